"""The chunk viewer: one chunk's full text and every piece of its metadata."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from widgets.safe import plain

if TYPE_CHECKING:
    from services.retrieval.models import ChunkView

FIELDS = (
    "handle", "index", "chunk_id", "source_path", "content_type", "page", "section",
    "start_offset", "end_offset", "ordinal", "hash", "embedding_model", "last_modified",
)  # fmt: skip


def metadata_table(chunk: ChunkView) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    data = chunk.to_dict()
    for field in FIELDS:
        value = data.get(field)
        if value is not None and value != "":
            table.add_row(field, plain(value, single_line=field != "section"))
    return table


class ChunkViewer(ModalScreen[None]):
    CSS_PATH = "chunk_viewer.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close", id="chunk.close", tooltip="Close the chunk viewer"),
    ]

    def __init__(self, chunk: ChunkView) -> None:
        super().__init__()
        self.chunk = chunk

    def compose(self) -> Any:
        with Vertical(id="chunk"):
            yield Static(Text.assemble("Chunk ", plain(self.chunk.handle, single_line=True)), id="chunk-title")
            with VerticalScroll(id="chunk-body"):
                yield Static(metadata_table(self.chunk), id="chunk-meta")
                if self.chunk.context:
                    yield Static(plain(self.chunk.context, "italic"), id="chunk-context")
                yield Static(plain(self.chunk.text), id="chunk-text")
            yield Static("↑ ↓ PgUp PgDn scroll  ·  Esc closes", id="chunk-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#chunk-body").focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
