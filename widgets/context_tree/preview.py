"""The preview beside the tree: a folder's L0 (``.abstract.md``) and L1 (``.overview.md``) rendered as
Markdown, or the start of a file's text.

:func:`load_preview` reads (in the screen's thread worker); :class:`ContextPreview` shows. Text from
the tree is neutralised (``widgets.safe.clean``) before Rich renders it, and Rich's Markdown never
reads console markup, so ``[bold]``, ``[link=…]``, ANSI escapes and bidi controls in a file are
shown inert. Links in the Markdown are not made clickable (``hyperlinks=False``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.markdown import Markdown
from rich.rule import Rule
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from services.context.errors import ContextError
from widgets.context_tree.tree import NodeInfo
from widgets.safe import clean, plain

if TYPE_CHECKING:
    from services.context.tree import ContextTree

PREVIEW_BYTES = 8 * 1024
"""How much of a file the preview shows (the full viewer shows more)."""
VIEWER_BYTES = 256 * 1024
"""How much of a file the full viewer shows."""
ABSTRACT = ".abstract.md"
OVERVIEW = ".overview.md"


@dataclass(frozen=True)
class FileText:
    """The start of a file: its text (decoded, replacement characters for bad UTF-8), how many bytes
    were left out, and whether it looks binary (a NUL byte in what was read)."""

    text: str
    more: int = 0
    binary: bool = False


def read_start(tree: ContextTree, info: NodeInfo, limit: int) -> FileText:
    """The first ``limit`` bytes of the file ``info`` (never the whole of a big file)."""
    data = tree.read_bytes(info.uri, limit=limit + 1)
    size = max(info.size, len(data))
    if len(data) > limit:
        data = data[:limit]
    if b"\x00" in data:
        return FileText("", size - len(data), binary=True)
    return FileText(data.decode("utf-8", errors="replace"), size - len(data))


@dataclass(frozen=True)
class PreviewData:
    info: NodeInfo
    abstract: str | None = None
    overview: str | None = None
    file: FileText | None = None
    entries: int | None = None
    errors: list[str] = field(default_factory=list)


def _tier(tree: ContextTree, info: NodeInfo, name: str, errors: list[str]) -> str | None:
    try:
        uri = info.uri.join(name)
        if not tree.exists(uri):
            return None
        return read_start(tree, NodeInfo(uri, "file", tree.stat(uri).size), PREVIEW_BYTES).text
    except ContextError as exc:
        errors.append(exc.message)
        return None


def load_preview(tree: ContextTree, info: NodeInfo) -> PreviewData:
    """What the preview shows for ``info`` (read from the tree; typed errors are kept, not raised)."""
    errors: list[str] = []
    if info.kind == "dir":
        abstract = _tier(tree, info, ABSTRACT, errors)
        overview = _tier(tree, info, OVERVIEW, errors)
        try:
            entries = len(tree.ls(info.uri))
        except ContextError as exc:
            errors.append(exc.message)
            entries = None
        return PreviewData(info, abstract=abstract, overview=overview, entries=entries, errors=errors)
    if info.kind == "file":
        try:
            return PreviewData(info, file=read_start(tree, info, PREVIEW_BYTES))
        except ContextError as exc:
            return PreviewData(info, errors=[exc.message])
    return PreviewData(info)


def markdown(text: str) -> Markdown:
    """Markdown from untrusted text: neutralised first, links not clickable."""
    return Markdown(clean(text), hyperlinks=False)


def more_note(file: FileText) -> Text:
    return plain(f"… {file.more:,} more bytes (Enter opens the file)", "dim italic")


def size_text(size: int) -> str:
    return f"{size:,} bytes" if size != 1 else "1 byte"


def render_preview(data: PreviewData) -> Group:
    info = data.info
    head = Text.assemble(plain(str(info.uri), "bold", single_line=True))
    facts: list[str] = []
    if info.kind == "dir":
        facts.append("folder" if data.entries is None else f"folder · {data.entries} entries")
    else:
        facts.append(f"{info.kind} · {size_text(info.size)}")
    if info.read_only:
        facts.append("read-only")
    if info.internal:
        facts.append("internal scope (shown for debugging)")
    parts: list[Any] = [head, plain(" · ".join(facts), "dim", single_line=True)]
    for error in data.errors:
        parts.append(plain(error, "bold red"))
    if info.kind == "dir":
        for title, text in (("L0 · abstract", data.abstract), ("L1 · overview", data.overview)):
            parts.append(Rule(Text(title, "bold"), align="left", style="dim"))
            if text is None:
                parts.append(plain("not synthesized yet", "dim italic"))
            else:
                parts.append(markdown(text))
    elif data.file is not None:
        parts.append(Rule(Text("L2 · file", "bold"), align="left", style="dim"))
        if data.file.binary:
            parts.append(plain("binary file: not shown", "dim italic"))
        else:
            parts.append(plain(data.file.text))
            if data.file.more:
                parts.append(more_note(data.file))
    return Group(*parts)


class ContextPreview(VerticalScroll):
    """The preview pane (scrolls; it can take the focus for long overviews)."""

    DEFAULT_CSS = """
    ContextPreview { padding: 0 1; }
    """

    rendered: Any = None
    """What the preview shows now (a Rich renderable), for tests and copy."""

    def compose(self) -> Any:
        self.rendered = plain("Select a folder to read its L0 and L1, or a file to read its start.", "dim")
        yield Static(self.rendered, id="preview")

    def show(self, data: PreviewData) -> None:
        self.rendered = render_preview(data)
        self.query_one("#preview", Static).update(self.rendered)
        self.scroll_home(animate=False)

    def show_message(self, text: str) -> None:
        self.rendered = plain(text, "dim")
        self.query_one("#preview", Static).update(self.rendered)
