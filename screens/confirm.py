"""A yes/no confirmation for destructive operator actions (dropping an index, …)."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen #confirm { width: 72; height: auto; border: thick $error; background: $surface; padding: 1 2; }
    ConfirmScreen #confirm-title { text-style: bold; margin-bottom: 1; }
    ConfirmScreen #confirm-keys { color: $text-muted; margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes", tooltip="Go ahead"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no", tooltip="Change nothing"),
    ]

    def __init__(self, title: str, detail: str) -> None:
        super().__init__()
        self.title_text = title
        self.detail = detail

    def compose(self) -> Any:
        with Vertical(id="confirm"):
            yield Label(self.title_text, id="confirm-title")
            yield Static(self.detail, id="confirm-detail", markup=False)
            yield Static("y yes  ·  n / Esc no", id="confirm-keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
