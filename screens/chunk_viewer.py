"""The chunk viewer: one chunk's full text and every piece of its metadata.

Opened from a checked citation (Enter on a cited handle or on a sentence's mark under an answer) it
highlights the span of the text that supports the sentence (``handle#start-end``, offsets in the
chunk's text as the check read it) and scrolls to it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from widgets.safe import clean, plain

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


def parse_span(target: str) -> tuple[str, tuple[int, int] | None]:
    """``handle#start-end`` → the handle and the span; a bare handle (or a span it cannot read) → no span."""
    handle, _, span = target.partition("#")
    start, _, end = span.partition("-")
    if start.isdigit() and end.isdigit() and int(start) < int(end):
        return handle, (int(start), int(end))
    return handle, None


def chunk_text(text: str, span: tuple[int, int] | None) -> Text:
    """The chunk's text shown literally, the supporting ``span`` in reverse video and bold (it keeps
    its colours whatever the theme; the caption above says what is highlighted)."""
    if span is None or span[1] > len(text):
        return plain(text)
    start, end = span
    return Text.assemble(clean(text[:start]), (clean(text[start:end]), "reverse bold"), clean(text[end:]))


class ChunkViewer(ModalScreen[None]):
    CSS_PATH = "chunk_viewer.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close", id="chunk.close", tooltip="Close the chunk viewer"),
    ]

    def __init__(self, chunk: ChunkView, span: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.chunk = chunk
        self.span = span if span is not None and span[1] <= len(chunk.text) else None

    def compose(self) -> Any:
        with Vertical(id="chunk"):
            yield Static(Text.assemble("Chunk ", plain(self.chunk.handle, single_line=True)), id="chunk-title")
            with VerticalScroll(id="chunk-body"):
                yield Static(metadata_table(self.chunk), id="chunk-meta")
                if self.chunk.context:
                    yield Static(plain(self.chunk.context, "italic"), id="chunk-context")
                if self.span is not None:
                    yield Static(
                        f"▌ the span that supports the citing sentence is highlighted "
                        f"(characters {self.span[0]}–{self.span[1]}; supported = grounded, not proven true)",
                        id="chunk-span-note",
                        markup=False,
                    )
                yield Static(chunk_text(self.chunk.text, self.span), id="chunk-text")
            yield Static("↑ ↓ PgUp PgDn scroll  ·  Esc closes", id="chunk-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#chunk-body").focus()
        if self.span is not None:
            self.call_after_refresh(self._scroll_to_span)

    def _scroll_to_span(self) -> None:
        """The highlighted span in view: the body scrolled by the share of the text before it."""
        body, text = self.query_one("#chunk-body", VerticalScroll), self.query_one("#chunk-text", Static)
        assert self.span is not None
        share = self.span[0] / max(1, len(self.chunk.text))
        body.scroll_to(
            y=max(0, text.region.y - body.region.y + body.scroll_y + int(share * text.region.height) - 2), animate=False
        )

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
