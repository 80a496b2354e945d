"""A tool call read from the model's text, in the TUI: the modal says so and offers no session grant,
and the transcript's tool block is marked."""

from __future__ import annotations

import asyncio

from rich.console import Console

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen, summary_table
from tests.tui.helpers import settle
from tests.tui.test_approvals import SIZE, make_workspace, tool_entries, wait_for_pending
from widgets.transcript.tool_call import header_text


async def test_a_text_call_is_approved_once_only_and_marked() -> None:
    workspace = make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        session = app.session
        assert session is not None
        call = asyncio.ensure_future(
            session.call_tool(
                "builtin:fs:write_text", {"path": "notes.txt", "text": "new\n"}, source="assistant", from_text=True
            )
        )
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ApprovalScreen)
        console = Console(width=200, record=True)
        console.print(summary_table(screen.request))
        assert "read from the model's text" in console.export_text()
        assert screen.check_action("approve_session", ()) is None  # shown disabled
        await pilot.press("s")  # does nothing: no lasting grant from a text call
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen) and not call.done()
        await pilot.press("a")
        result = await call
        await settle(pilot)
        assert result.ok and (workspace.root / "notes.txt").read_text() == "new\n"
        assert session.grants() == []
        [entry] = tool_entries(app)
        assert entry["from_text"] is True and "(from text)" in header_text(entry, expanded=False).plain
        native = {**entry, "from_text": None}
        assert "(from text)" not in header_text(native, expanded=False).plain
