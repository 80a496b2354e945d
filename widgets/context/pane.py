"""The Context pane: the last retrieved or injected set of chunks (``/rag last``)."""

from __future__ import annotations

from typing import Any

from textual.containers import Vertical
from textual.widgets import Static

COLUMNS = ("#", "handle", "source", "page/section", "fused", "bm25", "dense")


class ContextPane(Vertical):
    """Shows an empty state until a result set arrives; the table is mounted on first use."""

    BORDER_TITLE = "Context"
    can_focus = True

    def compose(self) -> Any:
        yield Static("Nothing retrieved yet in this workspace.", id="context-empty", classes="empty")

    def focus_main(self) -> None:
        tables = self.query("#context-table")
        (tables.first() if tables else self).focus()
