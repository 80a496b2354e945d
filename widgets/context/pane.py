"""The Context pane: the last retrieved or injected set of chunks (``/rag last``)."""

from __future__ import annotations

from typing import Any

from textual.containers import Vertical
from textual.widgets import DataTable, Static

COLUMNS = ("#", "handle", "source", "page/section", "fused", "bm25", "dense")


class ContextPane(Vertical):
    BORDER_TITLE = "Context"

    def compose(self) -> Any:
        yield Static("Nothing retrieved yet in this workspace.", id="context-empty", classes="empty")
        table: DataTable[str] = DataTable(id="context-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        table.display = False
        yield table

    def focus_main(self) -> None:
        self.query_one(DataTable).focus()
