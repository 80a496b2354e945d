"""/replay shows a stored conversation as it was (nothing runs; a tool call's audit row one key away);
/runs lists plan runs with their timelines."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.audit_row import AuditRowScreen
from screens.replay import ReplayScreen
from screens.runs import RunsScreen
from services.audit.log import AuditStore
from services.plans.plan import parse_plan
from services.plans.runner import run_plan
from services.session.session import Session
from services.workspace.manager import WorkspaceManager
from widgets.transcript.pane import TranscriptPane

SIZE = (160, 48)


async def submit(app: AriesApp, pilot: Pilot[int], line: str) -> None:
    app.screen.query_one("#prompt").value = line  # type: ignore[attr-defined]
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


def _history(tmp_path: Path) -> int:
    """A conversation with a tool call, and one plan run; returns the audit rows written."""
    workspace, _ = WorkspaceManager().create("demo")
    (workspace.root / "notes.txt").write_text("hello\n")
    session = Session(workspace, source="operator", interactive=False)
    session.conversation.notice("before the call", title="test")
    session.call_tool_sync("builtin:fs:read_text", {"path": "notes.txt"})
    plan = parse_plan("version: '1.0'\nsteps:\n  - tool: fs.read\n    args: {path: notes.txt}\n", source="p.yaml")
    asyncio.run(run_plan(session, plan))
    session.close()
    with AuditStore.for_workspace(workspace.root) as audit:
        return len(audit.calls(limit=1000))


async def test_replay_is_read_only_and_opens_audit_rows(tmp_path: Path) -> None:
    rows_before = await asyncio.to_thread(_history, tmp_path)
    workspace = WorkspaceManager().path_for("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await submit(app, pilot, "/replay")
        assert isinstance(app.screen, ReplayScreen)
        shown = app.screen.query_one("#replay-transcript", TranscriptPane).entries()
        roles = [entry["role"] for entry in shown]
        assert "tool" in roles and "notice" in roles
        block = app.screen.query_one("ToolCallBlock")
        block.focus()
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AuditRowScreen)
        assert app.screen.record["tool_name"] == "builtin:fs:read_text"
        await pilot.press("escape")
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ReplayScreen)

        await submit(app, pilot, "/runs")
        assert isinstance(app.screen, RunsScreen)
        assert app.screen.query_one("#runs-table").row_count == 1  # type: ignore[attr-defined]
        assert app.screen.query_one("#runs-timeline").row_count == 1  # type: ignore[attr-defined]
        await pilot.press("escape")
    with AuditStore.for_workspace(workspace) as audit:
        assert len(audit.calls(limit=1000)) == rows_before  # replaying executed nothing
