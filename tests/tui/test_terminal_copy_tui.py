"""Copy like a terminal (issue 34, item 1): a mouse selection over the transcript copies the source
text — a wrapped paragraph as its own line, a code block with its indentation — and every copy path
(the selection with Ctrl+C, ``/copy``, ``y``) puts no control, escape or bidi character on the
clipboard, saying how many it left out. Ctrl+C with nothing selected says how to quit, in plain words."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widget import Widget

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import Messages, panes_show
from widgets.transcript.pane import TranscriptEntry, TranscriptPane

SIZE = (100, 40)
PARAGRAPH = " ".join(["The quick brown fox jumps over the lazy dog."] * 6)
CODE = "def f(x):\n    if x:\n        return 1\n    return 2"
HOSTILE = "Run this: \x1b]52;c;cm0gLXJmIH4=\x07 then \x1b[2J and \u202eevil\u202c done."
UNSAFE = ("\x1b", "\x07", "\u202e", "\u202c")


def seeded(name: str, answer: str) -> None:
    created = WorkspaceManager().create(name)[0]
    transcript = created.new_transcript()
    turn = f"{transcript.conversation_id}-t0001"
    transcript.append("user", PARAGRAPH, turn_id=turn)
    transcript.append("assistant", answer, turn_id=turn, provider="ollama", model="m")
    created.close()


async def drag(pilot: Pilot[Any], widget: Widget, start: tuple[int, int], end: tuple[int, int]) -> None:
    """Press the mouse at ``start`` in ``widget``, move to ``end``, release: Textual's selection."""
    await pilot.mouse_down(widget, offset=start)
    await pilot.hover(widget, offset=end)
    await pilot.mouse_up(widget, offset=end)
    await pilot.pause()


async def opened(pilot: Pilot[Any]) -> TranscriptPane:
    app = pilot.app
    assert isinstance(app, AriesApp)
    await app.ready()
    await panes_show(pilot)
    await pilot.pause()
    return app.screen.query_one(TranscriptPane)


async def test_a_selected_wrapped_paragraph_is_copied_as_its_own_line() -> None:
    seeded("sel", "A short answer.")
    app, messages = AriesApp("sel", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        pane = await opened(pilot)
        entry = pane.query_one(TranscriptEntry)
        assert entry.region.height >= 4  # the label, then the paragraph wrapped on the screen
        mark = messages.mark()
        await drag(pilot, entry, (0, 1), (entry.region.width - 1, entry.region.height - 1))
        await pilot.press("ctrl+c")
        note = await messages.notified(pilot, "Copied", since=mark)
        assert app.clipboard == PARAGRAPH  # one line: the source's, not the screen's wrapping
        assert f"Copied {len(PARAGRAPH)} characters" in note and "Removed" not in note


async def test_a_selected_code_block_keeps_its_indentation() -> None:
    seeded("code", f"Here:\n\n```python\n{CODE}\n```\n\nDone.")
    app, messages = AriesApp("code", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await opened(pilot)
        code = app.screen.query_one("MarkdownFence Label")
        await drag(pilot, code, (0, 0), (code.region.width - 1, code.region.height - 1))
        await pilot.press("ctrl+c")
        await messages.notified(pilot, "Copied")
        assert app.clipboard == CODE


async def test_no_copy_path_puts_escape_or_bidi_characters_on_the_clipboard() -> None:
    seeded("hostile", HOSTILE)
    app, messages = AriesApp("hostile", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        pane = await opened(pilot)
        mark = messages.mark()
        app.screen.query_one("#prompt").focus()
        await pilot.press(*"/copy", "enter")
        note = await messages.notified(pilot, "Copied", since=mark)
        assert app.clipboard == "Run this: ]52;c;cm0gLXJmIH4= then [2J and evil done."
        assert "Removed 5 control, escape or bidi characters" in note
        pane.focus()
        await pilot.press("up")  # the newest message: the answer
        mark = messages.mark()
        await pilot.press("y")
        note = await messages.notified(pilot, "Copied", since=mark)
        assert not any(char in app.clipboard for char in UNSAFE) and "Removed 5" in note
        answer = pane.query("RecordedAnswer").last()
        mark = messages.mark()
        await drag(pilot, answer, (0, 0), (answer.region.width - 1, answer.region.height - 1))
        await pilot.press("ctrl+c")
        await messages.notified(pilot, "Copied", since=mark)
        assert "evil" in app.clipboard  # as shown, the escapes made visible
        assert not any(char in app.clipboard for char in UNSAFE)


async def test_ctrl_c_with_nothing_selected_says_how_to_quit_in_plain_words() -> None:
    app, messages = AriesApp("quiet"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await pilot.press("ctrl+c")
        note = await messages.notified(pilot, "to quit")
        assert "Ctrl+Q" in note and "[b]" not in note
        assert app.clipboard == "" and app.is_running


async def test_textuals_own_copies_are_sanitised_too() -> None:
    """An input's selection (Textual copies it itself) reaches the clipboard through the same sanitiser."""
    app = AriesApp("input")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        prompt = app.screen.query_one("#prompt")
        prompt.focus()
        prompt.insert_text_at_cursor("a\u202eb\x1bc")  # type: ignore[attr-defined]
        prompt.select_all()  # type: ignore[attr-defined]
        await pilot.press("ctrl+c")
        assert app.clipboard == "abc"
