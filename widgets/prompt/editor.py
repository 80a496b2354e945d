"""The multi-line prompt: a ``TextArea`` that takes the prompt's place while a message has more
than one line. Ctrl+J (Shift+Enter where the terminal tells it apart from Enter) inserts a newline,
Enter sends; Esc goes back to the one-line prompt when the text fits on one line.

The prompt (``PromptInput``) opens it (Ctrl+J, Shift+Enter, a multi-line paste, a pasted chip to
expand) with ``PromptInput.Expand``; it sends with ``PromptEditor.Send`` and the main screen hands
the text back to the prompt, which submits it as if typed: one path to the App for every message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import TextArea


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
    ]

    @dataclass
    class Send(Message):
        text: str

    @dataclass
    class Collapse(Message):
        text: str

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__("", id=id, soft_wrap=True, show_line_numbers=False, compact=True, tab_behavior="focus")

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
