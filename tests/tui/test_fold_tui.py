"""A pasted 60-line text is a chip at the prompt and a folded message in the transcript (issue 34,
item 7): its first lines and "… N more lines"; Enter on the selected message or a click on that
line unfolds it and folds it again; ``y`` and a mouse selection through the fold copy all of it."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.pilot import Pilot
from textual.widget import Widget

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import Transcript
from tests.tui.fixtures import CONVERSATION
from tests.tui.helpers import Messages
from tests.tui.test_terminal_copy_tui import SIZE, drag, opened
from widgets.transcript.pane import FOLD_SHOWN, TranscriptEntry, TranscriptPane

PASTED = "\n".join(f"line {n:02d} of the pasted log" for n in range(1, 61))


def seeded(name: str) -> None:
    """A conversation (fixed id and times: the snapshot uses it too) whose first message is a pasted log."""
    created = WorkspaceManager().create(name)[0]
    transcript = Transcript(created.transcripts_dir, CONVERSATION)
    turn = f"{CONVERSATION}-t0001"
    transcript.append("user", f"What is wrong here?\n{PASTED}", turn_id=turn, timestamp="2026-01-01T09:00:00.000Z")
    transcript.append(
        "assistant",
        "Line 42 repeats line 41.",
        turn_id=turn,
        provider="ollama",
        model="m",
        timestamp="2026-01-01T09:00:02.000Z",
    )
    created.close()


async def terminal_drag(pilot: Pilot[Any], widget: Widget, start: tuple[int, int], end: tuple[int, int]) -> None:
    """A drag as a terminal reports it (press, moves with the button held, release), through the App as
    the driver's events go: Textual follows the release with a click on the widget pressed."""
    app = pilot.app
    for kind, (x, y) in ((events.MouseDown, start), (events.MouseMove, end), (events.MouseUp, end)):
        sx, sy = widget.region.x + x, widget.region.y + y
        app.post_message(kind(None, sx, sy, 0, 0, 1, False, False, False, screen_x=sx, screen_y=sy))
        await pilot.pause()


def shown(entry: TranscriptEntry) -> str:
    return str(entry.render())


async def test_a_long_pasted_message_is_folded_and_unfolds_with_enter_or_a_click() -> None:
    seeded("fold")
    app, messages = AriesApp("fold", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        pane = await opened(pilot)
        entry = pane.query_one(TranscriptEntry)
        assert entry.region.height <= FOLD_SHOWN + 3  # the label, 4 lines, the fold's line: not ~62 rows
        assert "line 03 of" in shown(entry) and "line 04 of" not in shown(entry)
        assert "… 57 more lines" in shown(entry)
        pane.focus()
        await pilot.press("up")  # the newest message (the answer) …
        await pilot.press("up")  # … then the pasted one
        assert pane.selected is entry
        await pilot.press("enter")
        await pilot.pause()
        assert "line 60 of" in shown(entry) and entry.region.height >= 61
        await pilot.press("y")  # the whole message, as written
        assert app.clipboard == f"What is wrong here?\n{PASTED}"
        await pilot.press("enter")
        await pilot.pause()
        assert "… 57 more lines" in shown(entry)
        await pilot.click(entry, offset=(2, entry.region.height - 1))  # the fold's line
        await pilot.pause()
        assert "line 60 of" in shown(entry)
        pane.scroll_end(animate=False)  # the fold's line, at the end of the unfolded message, in view
        await pilot.pause()
        await pilot.click(entry, offset=(2, entry.region.height - 1))
        await pilot.pause()
        assert "line 60 of" not in shown(entry)


async def test_a_mouse_selection_through_the_fold_copies_the_hidden_lines() -> None:
    seeded("foldsel")
    app, messages = AriesApp("foldsel", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        pane = await opened(pilot)
        entry = pane.query_one(TranscriptEntry)
        assert isinstance(pane, TranscriptPane)
        await terminal_drag(pilot, entry, (2, 1), (entry.region.width - 2, entry.region.height - 1))
        assert entry.folded  # the drag's end on the fold's line is not a click that unfolds it
        await pilot.press("ctrl+c")
        await messages.notified(pilot, "Copied")
        assert app.clipboard == f"What is wrong here?\n{PASTED}"  # the fold's note is not copied
        await drag(pilot, entry, (2, 1), (entry.region.width - 2, 2))  # above the fold: what is shown
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.clipboard == "What is wrong here?\nline 01 of the pasted log"


async def test_find_unfolds_the_message_it_lands_on() -> None:
    """Ctrl+F for a line that only the folded part holds: the message is the current match, unfolded."""
    seeded("foldfind")
    app = AriesApp("foldfind", conversation="last")
    async with app.run_test(size=SIZE) as pilot:
        pane = await opened(pilot)
        entry = pane.query_one(TranscriptEntry)
        assert entry.folded
        await pilot.press("ctrl+f", *"line 47 of")
        await pilot.pause()
        assert entry.has_class("-find-current") and not entry.folded
        assert "line 47 of" in shown(entry)
