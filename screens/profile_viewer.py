"""The profile viewer: one profile's YAML as written, with syntax highlighting (``/profile show``)."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from widgets.safe import clean, plain


class ProfileViewer(ModalScreen[None]):
    CSS_PATH = "profile_viewer.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close", id="profile.close", tooltip="Close the profile viewer"),
    ]

    def __init__(self, name: str, path: str, origin: str, text: str, error: str | None = None) -> None:
        super().__init__()
        self.profile_name = name
        self.path = path
        self.origin = origin
        self.text = text
        self.error = error

    def compose(self) -> Any:
        with Vertical(id="profile"):
            title = Text.assemble("Profile ", plain(self.profile_name, "bold", single_line=True))
            title.append_text(plain(f"  {self.origin} · {self.path}", "dim", single_line=True))
            yield Static(title, id="profile-title")
            if self.error:
                yield Static(plain(f"Broken: {self.error}", "bold red", single_line=True), id="profile-error")
            with VerticalScroll(id="profile-body"):
                # The file is neutralised (no control or bidi characters) before it is highlighted.
                yield Static(
                    Syntax(clean(self.text), "yaml", theme="ansi_dark", line_numbers=True, word_wrap=True),
                    id="profile-yaml",
                )
            yield Static("↑ ↓ PgUp PgDn scroll  ·  Esc closes", id="profile-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#profile-body").focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
