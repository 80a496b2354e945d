"""The Context pane: the last retrieved or injected set of chunks (``/rag last``).

Each row: rank, citation handle, source and page/section, the fused score, and each retriever's
rank and score (BM25, dense). Enter on a row opens the full chunk with its metadata. While an
index is being built, a progress bar shows the stage and the count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Label, Static

if TYPE_CHECKING:
    from textual.widgets import DataTable

COLUMNS = ("#", "handle", "source · page/section", "fused", "bm25", "dense")
SOURCE_WIDTH = 20


def _retriever_cell(rank: Any, score: Any) -> Text:
    """``#rank score`` of one retriever, or a dash when it did not return the chunk."""
    if rank is None:
        return Text("—", style="dim")
    shown = f"{score:.3f}" if isinstance(score, int | float) else "?"
    return Text(f"#{rank} {shown}")


def _where(hit: dict[str, Any]) -> str:
    if hit.get("page") is not None:
        return f"p. {hit['page']}"
    section = str(hit.get("section") or "")
    return section.rsplit(" > ", 1)[-1]  # the innermost heading; the full path is in the chunk viewer


def _source_cell(hit: dict[str, Any]) -> Text:
    where = _where(hit)
    text = Text(str(hit.get("source_path", "")))
    if where:
        text.append(f" · {where}", style="dim")
    text.truncate(SOURCE_WIDTH, overflow="ellipsis")
    return text


class ContextPane(Vertical):
    """Shows an empty state until a result set arrives; the table is mounted on first use."""

    BORDER_TITLE = "Context"
    can_focus = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "open",
            "Open chunk",
            show=False,
            id="context.open",
            tooltip="Open the highlighted chunk with its full text and metadata",
        ),
    ]

    @dataclass
    class ShowChunk(Message):
        """The operator asked for the full chunk behind a handle."""

        handle: str

    def compose(self) -> Any:
        yield Static("Nothing retrieved yet in this workspace.", id="context-empty", classes="empty")

    def focus_main(self) -> None:
        def focus() -> None:
            tables = self.query("#context-table")
            (tables.first() if tables else self).focus()

        self.call_after_refresh(focus)

    # -- results -------------------------------------------------------------------------
    def _table(self) -> DataTable[Any]:
        from textual.widgets import DataTable  # mounted on first results: keeps start-up light

        tables = self.query("#context-table")
        if tables:
            return tables.first(DataTable)
        caption = Label("", id="context-caption")
        table: DataTable[Any] = DataTable(id="context-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        self.mount(caption, table)
        return table

    def show_results(self, caption: str, hits: list[dict[str, Any]]) -> None:
        """Replace the table with ``hits`` (dicts with the fields of ``services.retrieval.Hit``)."""
        table = self._table()
        table.clear()
        for hit in hits:
            table.add_row(
                str(hit["rank"]),
                Text(str(hit["handle"]), style="bold"),
                _source_cell(hit),
                f"{hit.get('score', 0.0):.4f}",
                _retriever_cell(hit.get("bm25_rank"), hit.get("bm25_score")),
                _retriever_cell(hit.get("dense_rank"), hit.get("dense_score")),
                key=str(hit["handle"]),
            )
        self.query_one("#context-caption", Label).update(caption)
        self.query_one("#context-empty", Static).display = False
        self.add_class("-has-items")
        if not hits:
            self.query_one("#context-caption", Label).update(f"{caption}: no matching chunks")

    def action_open(self) -> None:
        tables = self.query("#context-table")
        if not tables:
            return
        table: DataTable[Any] = tables.first()  # type: ignore[assignment]
        if table.row_count:
            row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
            if row_key.value:
                self.post_message(self.ShowChunk(row_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value:
            self.post_message(self.ShowChunk(event.row_key.value))

    # -- progress ------------------------------------------------------------------------
    def show_progress(self, stage: str, done: int, total: int, path: str | None = None) -> None:
        from textual.widgets import ProgressBar

        bars = self.query("#context-progress")
        if bars:
            bar = bars.first(ProgressBar)
        else:
            bar = ProgressBar(id="context-progress", show_eta=False)
            self.mount(Label("", id="context-progress-label"), bar, before=0)
        bar.update(total=max(total, 1), progress=done)
        where = f"  {path}" if path else ""
        label = f"indexing: {stage} {done}/{total}{where}   (Ctrl+X cancels)"
        self.query_one("#context-progress-label", Label).update(Text(label, overflow="ellipsis", no_wrap=True))

    def clear_progress(self) -> None:
        for widget in self.query("#context-progress, #context-progress-label"):
            widget.remove()
