"""The pane strip shown on narrow terminals: which pane is in view, its F-key, and what waits.

Below ``NARROW_WIDTH`` columns the main screen shows one pane at a time beside nothing; this line
says which (highlighted), how to reach the others (F2–F5), and how many approvals wait.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

PANES = (("transcript", "F2", "Transcript"), ("context", "F3", "Context"), ("approvals", "F4", "Approvals"),
         ("artifacts", "F5", "Artifacts"))  # fmt: skip


class PaneTabs(Static):
    DEFAULT_CSS = """
    PaneTabs { height: 1; background: $panel; }
    """

    def __init__(self, current: str = "transcript", waiting: int = 0, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__("", id=id, markup=False)
        self.current = current
        self.waiting = waiting

    def on_mount(self) -> None:
        self._refresh_text()

    def show(self, current: str | None = None, *, waiting: int | None = None) -> None:
        if current is not None:
            self.current = current
        if waiting is not None:
            self.waiting = waiting
        self._refresh_text()

    def _refresh_text(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        for number, (name, key, title) in enumerate(PANES):
            if number:
                text.append(" │", style="dim")
            style = "reverse bold" if name == self.current else ""
            text.append(f" {key} ", style=f"{style} bold" if style else "bold")
            label = title
            if name == "approvals" and self.waiting:
                label = f"{title} {self.waiting}"
            text.append(f"{label} ", style=style or ("bold yellow" if name == "approvals" and self.waiting else ""))
        self.update(text)
