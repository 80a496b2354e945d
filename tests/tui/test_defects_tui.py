"""Defects found by trying the workbench (issue 34 item 7), each pinned by a pilot test that failed
before its fix."""

from __future__ import annotations

from io import StringIO

from rich.console import Console
from textual.content import Content
from textual.widgets import Static

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import Messages
from tests.tui.test_markup_safety import MARKUP, RAW, submit
from widgets.transcript.pane import TranscriptPane

SIZE = (160, 48)


def transcript_text(app: AriesApp) -> str:
    """What the Transcript pane shows as text (not the toasts)."""
    console = Console(width=400, record=True, file=StringIO(), color_system=None)
    parts: list[str] = []
    for widget in app.screen_stack[0].query_one(TranscriptPane).query(Static):
        visual = widget.render() if isinstance(widget.content, str) else widget.content
        if isinstance(visual, Content | str):
            parts.append(str(visual))
        else:
            console.print(visual)
    parts.append(console.export_text())
    return " ".join("\n".join(parts).split())


async def test_slash_command_errors_stay_in_the_transcript() -> None:
    """``/bogus`` and ``/rag index add`` of a missing folder: the toast, and a notice in the transcript
    that stays (shown literally: the path is the operator's text)."""
    WorkspaceManager().create("demo")
    app, messages = AriesApp("demo"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await submit(pilot, "/bogus")
        await messages.notified(pilot, "Unknown command /bogus")
        missing = f"/nonexistent/{MARKUP}\x1b[31m"
        await submit(pilot, f"/rag index add {missing}")
        await messages.notified(pilot, "nonexistent")
        notices = [e for e in app.screen.query_one(TranscriptPane).entries() if e["role"] == "notice"]
        assert [n.get("level") for n in notices] == ["error", "error"]
        assert "Unknown command /bogus" in notices[0]["content"] and "nonexistent" in notices[1]["content"]
        shown = transcript_text(app)
        assert "Unknown command /bogus" in shown and " ".join(MARKUP.split()) in shown
        assert not any(raw in shown for raw in RAW)
