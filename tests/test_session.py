"""The session core: one policy in force for every surface, closing that loses no record,
rebinding that keeps processes and grants, artifacts as governed calls."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from services.conversation import Conversation
from services.session.session import SHIPPED_POLICY, Session
from services.tools.calls import ApprovalDecision
from services.tools.session_doctor import session_doctor
from services.workspace.manager import Workspace, WorkspaceManager

DISABLE_FS = "version: 1\nmode: guide\nproviders: {builtin: {enabled: true}}\ntool_classes: {fs: disabled}\n"


@pytest.fixture
def workspace(aries_home: Path) -> Workspace:
    workspace, _ = WorkspaceManager().create("sess")
    return workspace


def _tool_entries(session: Session) -> list[dict]:
    return [e for e in session.conversation.read().entries if e["role"] == "tool"]


async def _wait_pending(session: Session, count: int = 1) -> None:
    for _ in range(500):
        if len(session.approvals) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the call never reached the approval queue")


def test_workspace_policy_is_in_force_for_session_and_cli_alike(workspace: Workspace, venv_bin: Path) -> None:
    (workspace.root / "policy.yaml").write_text(DISABLE_FS, encoding="utf-8")
    with Session(workspace) as session:
        assert session.policy_source == str(workspace.root / "policy.yaml")
        tui = session.call_tool_sync("builtin:fs:list_dir", {"path": "."})
    cli = subprocess.run(
        [str(venv_bin / "aries"), "-w", "sess", "tool", "call", "builtin:fs:list_dir", "--args", "{}"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert tui.denied and tui.error is not None
    assert cli.returncode == 3, cli.stderr
    cli_result = json.loads(cli.stdout)
    assert cli_result["error"]["type"] == tui.error.type == "PolicyDenied"
    assert cli_result["error"]["details"]["rule"] == tui.error.details["rule"]
    # Without the workspace policy, the shipped default allows it, in both.
    (workspace.root / "policy.yaml").unlink()
    with Session(workspace) as session:
        assert session.policy_source == SHIPPED_POLICY
        assert session.call_tool_sync("builtin:fs:list_dir", {"path": "."}).ok


def test_cli_tool_call_writes_the_transcript_event(workspace: Workspace, venv_bin: Path) -> None:
    subprocess.run(
        [str(venv_bin / "aries"), "-w", "sess", "tool", "call", "builtin:fs:list_dir", "--args", "{}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    entries = Conversation(workspace.latest_transcript()).read().entries
    tools = [e for e in entries if e["role"] == "tool"]
    assert [e["tool_name"] for e in tools] == ["builtin:fs:list_dir"]
    assert tools[0]["source"] == "cli" and tools[0]["call_id"]


async def test_closing_denies_and_records_a_waiting_call(workspace: Workspace) -> None:
    session = Session(workspace)
    call = asyncio.create_task(session.call_tool("builtin:fs:write_text", {"path": "a.txt", "text": "x"}))
    await _wait_pending(session)
    await session.aclose("the workspace was switched")
    result = await call
    assert result.denied and result.error is not None
    assert "the workspace was switched" in result.error.message
    assert not (workspace.root / "a.txt").exists()
    # The audit row and the transcript event were written before the audit store closed.
    from services.audit.log import AuditStore

    with AuditStore.for_workspace(workspace.root) as audit:
        rows = [c for c in audit.calls(limit=10) if c["tool_name"] == "builtin:fs:write_text"]
    assert rows and rows[0]["status"] == "denied"
    assert rows[0]["rule_id"] == "approval.operator_denied"
    entries = Conversation(workspace.latest_transcript()).read().entries
    assert [e["status"] for e in entries if e["role"] == "tool"] == ["fail"]


async def test_closing_cancels_and_records_a_running_call(workspace: Workspace) -> None:
    (workspace.root / "policy.yaml").write_text(
        "version: 1\nmode: commander\nproviders: {builtin: {enabled: true}}\ntool_classes: {shell: enabled}\n"
        "filesystem: {allowed_roots: ['${workspace}']}\n"
        "shell: {executables: [{id: sleepers, names: [sleep]}]}\n",
        encoding="utf-8",
    )
    session = Session(workspace, approver=lambda request: ApprovalDecision.once())
    # a new workspace sets no approval mode: the policy file's applies (services.session.inforce's precedence)
    assert session.mode == "commander"
    assert session.in_force.mode_source == f"policy file {workspace.root / 'policy.yaml'}"
    call = asyncio.create_task(session.call_tool("builtin:shell:run", {"argv": ["sleep", "30"]}))
    await asyncio.sleep(0.5)
    await session.aclose("Aries quit")
    with pytest.raises(asyncio.CancelledError):
        await call
    from services.audit.log import AuditStore

    with AuditStore.for_workspace(workspace.root) as audit:
        rows = [c for c in audit.calls(limit=10) if c["tool_name"] == "builtin:shell:run"]
    assert rows and rows[0]["status"] != "running" and rows[0]["rule_id"] == "gateway.cancelled"


async def test_mode_change_denies_waiting_calls_and_keeps_processes_and_grants(workspace: Workspace) -> None:
    (workspace.root / "policy.yaml").write_text(
        "version: 1\nmode: guide\nproviders: {builtin: {enabled: true}}\ntool_classes: {fs: enabled, shell: enabled}\n"
        "filesystem: {allowed_roots: ['${workspace}']}\n"
        "shell: {executables: [{id: sleepers, names: [sleep]}]}\n",
        encoding="utf-8",
    )
    session = Session(workspace)
    # A background process, approved for the session.
    start = asyncio.create_task(session.call_tool("builtin:shell:start", {"argv": ["sleep", "30"]}))
    await _wait_pending(session)
    session.approvals.answer(session.approvals.pending()[0].call_id, ApprovalDecision.session())
    started = await start
    assert started.ok, started.to_dict()
    grants_before = session.grants()
    assert grants_before
    # A write waits for approval while the mode changes.
    write = asyncio.create_task(session.call_tool("builtin:fs:write_text", {"path": "b.txt", "text": "y"}))
    await _wait_pending(session)
    run_before = session.gateway().run_id
    assert session.set_mode("strict") == 1
    denied = await write
    assert denied.denied and "approval mode changed to strict" in denied.error.message  # type: ignore[union-attr]
    assert session.gateway().mode == "strict" and session.gateway().run_id != run_before
    assert session.grants() == grants_before
    polled = await session.call_tool("builtin:shell:poll", {"process_id": started.data["process_id"]})  # type: ignore[index]
    assert polled.ok and polled.data["running"] is True, polled.to_dict()  # type: ignore[index]
    notices = [e for e in session.conversation.read().entries if e["role"] == "notice"]
    assert notices and "strict" in notices[-1]["content"]
    await session.aclose()
    assert workspace.setting("approval_mode") == "strict"


def test_a_broken_workspace_policy_fails_doctor_and_says_which_file(workspace: Workspace) -> None:
    (workspace.root / "policy.yaml").write_text("version: 1\nmode: sideways\n", encoding="utf-8")
    with Session(workspace) as session:
        report = session_doctor(session)
    assert not report.ok
    check = next(c for c in report.checks if c.name == "policy in force")
    assert not check.ok and "policy.yaml" in check.detail


def test_policy_reload_applies_an_edited_file(workspace: Workspace) -> None:
    with Session(workspace) as session:
        assert session.call_tool_sync("builtin:fs:list_dir", {"path": "."}).ok
        (workspace.root / "policy.yaml").write_text(DISABLE_FS, encoding="utf-8")
        assert session.call_tool_sync("builtin:fs:list_dir", {"path": "."}).ok  # not yet reloaded
        session.reload_policy()
        assert session.call_tool_sync("builtin:fs:list_dir", {"path": "."}).denied


def test_artifact_add_is_a_governed_call(workspace: Workspace, tmp_path: Path) -> None:
    (workspace.root / "notes.txt").write_text("same content\n", encoding="utf-8")
    (workspace.root / "copy.txt").write_text("same content\n", encoding="utf-8")
    os.symlink("/proc/self/environ", workspace.root / "env-link")
    with Session(workspace, interactive=False) as session:
        first = session.call_tool_sync("builtin:fs:add_artifact", {"path": "notes.txt"})
        second = session.call_tool_sync("builtin:fs:add_artifact", {"path": "copy.txt"})
        leak = session.call_tool_sync("builtin:fs:add_artifact", {"path": "env-link"})
        outside = session.call_tool_sync("builtin:fs:add_artifact", {"path": "/etc/hostname"})
        rows = session.gateway().audit.calls(limit=10)
    assert first.ok and first.data["created"]  # type: ignore[index]
    assert second.ok and not second.data["created"]  # type: ignore[index]
    artifacts = workspace.artifacts.list()
    assert len(artifacts) == 1 and artifacts[0].name == "notes.txt" and artifacts[0].aliases == ["copy.txt"]
    assert workspace.artifacts.get("copy.txt").id == artifacts[0].id
    assert leak.denied and outside.denied
    assert {r["tool_name"] for r in rows} == {"builtin:fs:add_artifact"} and len(rows) == 4
    stored = b"".join(workspace.artifacts.read_bytes(a) for a in workspace.artifacts.list())
    assert b"PATH=" not in stored
