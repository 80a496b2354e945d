"""The TUI over the session core: the same decision as the CLI, grants listed and revoked,
the policy in force shown and reloaded, mode changes that keep processes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from textual.pilot import Pilot

from app.aries_app import AriesApp
from services.tools.calls import ApprovalDecision
from services.workspace.manager import Workspace, WorkspaceManager
from tests.tui.helpers import Messages
from tests.tui.test_approvals import wait_for_pending

SIZE = (160, 48)
# Differs from the shipped default: fs reads are refused outright, shell runs only `echo`.
STRICT_POLICY = """\
version: 1
mode: guide
providers: {builtin: {enabled: true}}
tool_classes: {fs: enabled, shell: enabled}
tools:
  "builtin:fs:read_text": {enabled: false}
filesystem:
  allowed_roots: ["${workspace}"]
shell:
  executables:
    - {id: echo-only, names: [echo, sleep]}
"""


def make_workspace(policy: str | None = STRICT_POLICY) -> Workspace:
    workspace, _ = WorkspaceManager().create("demo")
    (workspace.root / "notes.txt").write_text("hello\n")
    if policy is not None:
        (workspace.root / "policy.yaml").write_text(policy)
    return workspace


async def settle(app: AriesApp, pilot: Pilot[int]) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()


def notices(app: AriesApp) -> list[str]:
    assert app.session is not None
    return [e["content"] for e in app.session.conversation.read().entries if e["role"] == "notice"]


def cli_call(venv_bin: Path, tool: str, args: dict) -> dict:
    proc = subprocess.run(
        [str(venv_bin / "aries"), "-w", "demo", "tool", "call", tool, "--args", json.dumps(args)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    return json.loads(proc.stdout)


async def test_the_tui_and_the_cli_decide_a_call_alike(venv_bin: Path) -> None:
    make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs read notes.txt", "enter")
        await settle(app, pilot)
        assert app.session is not None
        [tui] = [e for e in app.session.conversation.read().entries if e["role"] == "tool"]
    cli = cli_call(venv_bin, "builtin:fs:read_text", {"path": "notes.txt"})
    assert tui["output"]["error"]["type"] == cli["error"]["type"] == "PolicyDenied"
    assert tui["output"]["error"]["details"]["rule"] == cli["error"]["details"]["rule"]


async def test_policy_show_names_the_file_and_reload_applies_an_edit() -> None:
    workspace = make_workspace()
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await pilot.press(*"/policy show", "enter")
        await settle(app, pilot)
        assert str(workspace.root / "policy.yaml") in notices(app)[-1]
        assert "workspace policy" in app.sub_title
        (workspace.root / "policy.yaml").write_text(STRICT_POLICY.replace("{enabled: false}", "{enabled: true}"))
        await pilot.press(*"/policy reload", "enter")
        await pilot.press(*"/fs read notes.txt", "enter")
        await settle(app, pilot)
        assert app.session is not None
        last = [e for e in app.session.conversation.read().entries if e["role"] == "tool"][-1]
        assert last["status"] == "success"
        # A broken edit is refused with one line and changes nothing.
        (workspace.root / "policy.yaml").write_text("version: 1\nmode: sideways\n")
        await pilot.press(*"/policy reload", "enter")
        note = await messages.notified(pilot, "policy.yaml")
        assert note.startswith("/policy")
        await pilot.press(*"/fs read notes.txt", "enter")
        await settle(app, pilot)
        last = [e for e in app.session.conversation.read().entries if e["role"] == "tool"][-1]
        assert last["status"] == "success"


async def test_grants_are_listed_and_revoked() -> None:
    make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        assert app.session is not None
        await pilot.press(*"/shell run echo one", "enter")
        await wait_for_pending(app, pilot)
        request = app.session.approvals.pending()[0]
        app.session.approvals.answer(request.call_id, ApprovalDecision.session())
        await settle(app, pilot)
        await pilot.press(*"/grants", "enter")
        await settle(app, pilot)
        assert "builtin:shell:run" in notices(app)[-1] and "1." in notices(app)[-1]
        await pilot.press(*"/grants revoke 1", "enter")
        await settle(app, pilot)
        assert app.session.grants() == []
        assert "revoked" in notices(app)[-1]
        # Without the grant the same call waits for approval again.
        await pilot.press(*"/shell run echo one", "enter")
        await wait_for_pending(app, pilot)
        assert len(app.session.approvals.pending()) == 1


async def test_doctor_fails_on_a_broken_workspace_policy_and_names_it() -> None:
    make_workspace("version: 1\nmode: sideways\n")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/doctor", "enter")
        await settle(app, pilot)
        report = notices(app)[-1]
        assert "FAIL  policy in force" in report and "policy.yaml" in report and "FAILED" in report


async def test_the_audit_row_of_a_tool_call_is_one_key_away() -> None:
    make_workspace(policy=None)
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs read notes.txt", "enter")
        await settle(app, pilot)
        from screens.audit_row import AuditRowScreen
        from widgets.transcript.tool_call import ToolCallBlock

        block = app.screen.query_one(ToolCallBlock)
        block.focus()
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AuditRowScreen)
        assert app.screen.record["call_id"] == block.entry["call_id"]
        assert app.screen.record["rule_id"] == "mode.guide.read_only"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, AuditRowScreen)
