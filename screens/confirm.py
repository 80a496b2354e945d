"""A yes/no confirmation for destructive operator actions (dropping an index, …)."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from widgets.safe import plain


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen #confirm {
        width: 94%; max-width: 72; height: auto; max-height: 100%;
        border: thick $error; background: $surface; padding: 0 1;
    }
    ConfirmScreen #confirm-title { dock: top; height: auto; text-style: bold; }
    ConfirmScreen #confirm-body { height: auto; max-height: 100%; padding: 1 0; }
    ConfirmScreen #confirm-keys { dock: bottom; height: 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes", tooltip="Go ahead"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no", tooltip="Change nothing"),
    ]

    def __init__(self, title: str, detail: str) -> None:
        super().__init__()
        self.title_text = title
        self.detail = detail
        self.asks_to_quit = False  # the quit question (Ctrl+Q on it asks nothing more)

    def compose(self) -> Any:
        with Vertical(id="confirm"):
            yield Static(plain(self.title_text), id="confirm-title")
            with VerticalScroll(id="confirm-body"):
                yield Static(plain(self.detail), id="confirm-detail")
            yield Static("y yes  ·  n / Esc no", id="confirm-keys", markup=False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
