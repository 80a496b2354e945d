"""The context file viewer: one L2 file of the context tree, read in full (up to 256 KB).

The text is shown literally and neutralised (``widgets.safe.plain``): markup, ANSI escapes, control
and bidi characters in the file are visible, never interpreted. Styled like the chunk viewer.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from widgets.context_tree.preview import FileText, size_text
from widgets.context_tree.tree import NodeInfo
from widgets.safe import plain


def facts_table(info: NodeInfo) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    table.add_row("uri", plain(str(info.uri), single_line=True))
    table.add_row("scope", plain(info.uri.scope))
    table.add_row("size", size_text(info.size))
    table.add_row("writable", "no (read-only)" if info.read_only else "yes")
    return table


class ContextFileViewer(ModalScreen[None]):
    CSS_PATH = "context_file_viewer.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close", id="context.file.close", tooltip="Close the file viewer"),
    ]

    def __init__(self, info: NodeInfo, file: FileText) -> None:
        super().__init__()
        self.info = info
        self.file = file

    def compose(self) -> Any:
        with Vertical(id="context-file"):
            yield Static(Text.assemble("File ", plain(self.info.uri.name, single_line=True)), id="context-file-title")
            with VerticalScroll(id="context-file-body"):
                yield Static(facts_table(self.info), id="context-file-meta")
                if self.file.binary:
                    yield Static(plain("Binary file: not shown.", "dim italic"), id="context-file-text")
                else:
                    yield Static(plain(self.file.text), id="context-file-text")
                if self.file.more:
                    note = f"… {self.file.more:,} more bytes not shown (read it with: aries context read URI)"
                    yield Static(plain(note, "dim italic"), id="context-file-more")
            yield Static("↑ ↓ PgUp PgDn scroll  ·  Esc closes", id="context-file-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#context-file-body").focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
