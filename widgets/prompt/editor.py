"""The multi-line prompt: a ``TextArea`` that takes the prompt's place while a message has more
than one line. Ctrl+J (Shift+Enter where the terminal tells it apart from Enter) inserts a newline,
Enter sends; Esc goes back to the one-line prompt when the text fits on one line. Tab completes the
``@path`` before the cursor as the one-line prompt does (the same completer; again: the next
candidate); anywhere else Tab moves the focus on.

The prompt (``PromptInput``) opens it (Ctrl+J, Shift+Enter, a multi-line paste, a pasted chip to
expand) with ``PromptInput.Expand``; it sends with ``PromptEditor.Send`` and the main screen hands
the text back to the prompt, which submits it as if typed: one path to the App for every message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import TextArea

from widgets.prompt.input import Completer, PromptInput


class PromptEditor(TextArea):
    DEFAULT_CSS = """
    PromptEditor { height: auto; max-height: 12; min-height: 3; display: none; }
    PromptEditor.-open { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+j,shift+enter",
            "newline",
            "Newline",
            show=False,
            id="prompt.newline",
            tooltip="Insert a newline in the message (Enter sends it)",
        ),
        Binding(
            "escape",
            "collapse",
            "One line",
            show=False,
            id="prompt.collapse",
            tooltip="Back to the one-line prompt (when the message fits on one line)",
        ),
        Binding(
            "tab",
            "complete",
            "Complete",
            show=False,
            id="prompt.editor.complete",
            tooltip="Complete the @path before the cursor; press again to cycle through the candidates",
        ),
    ]

    @dataclass
    class Send(Message):
        text: str

    @dataclass
    class Collapse(Message):
        text: str

    def __init__(self, *, completer: Completer | None = None, id: str | None = None) -> None:  # noqa: A002
        super().__init__("", id=id, soft_wrap=True, show_line_numbers=False, compact=True, tab_behavior="focus")
        self.completer: Completer = completer or (lambda line: (line, []))
        self._cycle: tuple[tuple[int, int], int, list[str], int] | None = (
            None  # (cursor after Tab, start, candidates, shown)
        )

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def open(self, text: str) -> None:
        self.add_class("-open")
        self.load_text(text)
        last = self.document.line_count - 1
        self.move_cursor((last, len(self.document.get_line(last))))
        self.screen.set_focus(self)  # now: the keys queued behind the newline come here

    def close(self) -> None:
        self.remove_class("-open")
        self.load_text("")
        if self._cycle is not None:
            self._cycle = None
            self.post_message(PromptInput.Candidates([]))

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":  # Enter sends; a newline is Ctrl+J (or Shift+Enter)
            event.stop()
            event.prevent_default()
            if self.text.strip():
                self.post_message(self.Send(self.text))
        elif event.key in ("ctrl+j", "shift+enter"):  # here, in order with the keys typed before it
            event.stop()
            event.prevent_default()
            self.action_newline()
        # any other key: TextArea's own handler (called after this one) inserts it

    def action_newline(self) -> None:
        self.insert("\n")

    def action_collapse(self) -> None:
        if "\n" in self.text.strip():
            self.app.bell()  # more than one line: Enter sends it, or delete the lines
            self.notify("The message has several lines: Enter sends it, Ctrl+J adds a line.", timeout=3)
            return
        self.post_message(self.Collapse(self.text.strip()))

    # -- @path completion ------------------------------------------------------------------------
    def _before_cursor(self) -> str:
        row, column = self.cursor_location
        return self.document.get_line(row)[:column]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "complete":  # an @path before the cursor: otherwise Tab moves the focus on
            cycling = self._cycle is not None and self._cycle[0] == self.cursor_location
            return self.is_open and (cycling or self._before_cursor().rsplit(" ", 1)[-1].startswith("@"))
        return super().check_action(action, parameters)

    def _put(self, start: int, text: str, candidates: list[str], current: int | None) -> None:
        """Replace what follows ``start`` on the cursor's line, up to the cursor, with ``text``."""
        row, column = self.cursor_location
        self.replace(text, (row, start), (row, column))
        self.move_cursor((row, start + len(text)))
        self._cycle = (self.cursor_location, start, candidates, -1 if current is None else current)
        self.post_message(PromptInput.Candidates(list(candidates) if len(candidates) > 1 else [], current))

    def action_complete(self) -> None:
        if self._cycle is not None and self._cycle[0] == self.cursor_location:  # Tab again: the next one
            _, start, candidates, index = self._cycle
            index = (index + 1) % len(candidates)
            self._put(start, candidates[index] + " ", candidates, index)
            return
        line = self._before_cursor()
        prefix, candidates = self.completer(line)
        if not candidates:
            self.app.bell()
            return
        start, partial = len(prefix), line[len(prefix) :]
        if len(candidates) == 1:  # a folder (``docs/``) is completed further: no space after it
            self._put(start, candidates[0] + ("" if candidates[0].endswith("/") else " "), [], None)
            self._cycle = None
            return
        common = os.path.commonprefix(candidates)
        if len(common) > len(partial):
            self._put(start, common, candidates, None)  # the next Tab shows the first candidate
        else:
            self._put(start, candidates[0] + " ", candidates, 0)
