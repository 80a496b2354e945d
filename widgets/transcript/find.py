"""The find bar (Ctrl+F): a query over the conversation shown in the Transcript pane.

Typing searches (case-insensitive, literal); Enter, Down or F3 go to the next match, Up or
Shift+F3 to the previous; Tab goes to the conversation with the bar open, where ``n`` / ``N`` step
(the main screen's keys); Esc closes the bar (the highlights go) and the prompt takes the focus.
The bar only says what was asked (``FindBar.Search``, ``FindBar.Step``, ``FindBar.Closed``): the
main screen asks the Transcript pane (``TranscriptPane.find``) and shows the count here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Static


class FindInput(Input):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down,f3", "step(1)", "Next", show=False, id="find.next", tooltip="The next match"),
        Binding("up,shift+f3", "step(-1)", "Previous", show=False, id="find.previous", tooltip="The previous match"),
        Binding(
            "escape", "close", "Close", show=False, id="find.close", tooltip="Close the find bar, back to the prompt"
        ),
        Binding(
            "tab",
            "leave",
            "To the transcript",
            show=False,
            id="find.leave",
            tooltip="To the conversation, the bar kept open: n / N the next / previous match",
        ),
    ]

    def action_step(self, step: int) -> None:
        self.post_message(FindBar.Step(step))

    def action_leave(self) -> None:
        self.post_message(FindBar.Leave())

    def action_close(self) -> None:
        self.post_message(FindBar.Closed())


class FindBar(Horizontal):
    DEFAULT_CSS = """
    FindBar { height: 1; display: none; }
    FindBar.-open { display: block; }
    FindBar #find-label { width: auto; padding: 0 1; color: $text-muted; }
    FindBar FindInput { width: 1fr; }
    FindBar #find-count { width: auto; padding: 0 1; color: $text-muted; }
    """

    @dataclass
    class Search(Message):
        query: str

    @dataclass
    class Step(Message):
        step: int

    class Closed(Message):
        pass

    class Leave(Message):
        """Tab: the focus to the conversation, where ``n`` / ``N`` step while the bar is open."""

    def compose(self) -> Any:
        yield Static("Find:", id="find-label", markup=False)
        yield FindInput(
            placeholder="in the conversation · Enter/↓/F3 next · ↑/Shift+F3 previous · Tab, then n/N · Esc",
            id="find-input",
            compact=True,
        )
        yield Static("", id="find-count", markup=False)

    def open(self) -> None:
        self.add_class("-open")
        find = self.query_one(FindInput)
        self.screen.set_focus(find)  # now, not after the keys already queued (typed fast, under tmux)
        find.select_all()
        if find.value:
            self.post_message(self.Search(find.value))

    def close(self) -> None:
        self.remove_class("-open")

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def show_count(self, current: int | None, total: int, query: str) -> None:
        if not query:
            text = ""
        elif total == 0:
            text = "no match"
        else:
            text = f"{(current or 0) + 1}/{total}"
        self.query_one("#find-count", Static).update(text)

    @on(Input.Changed, "FindInput")
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Search(event.value))

    @on(Input.Submitted, "FindInput")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Step(1))
