"""The context browser: the ``axiom://`` tree of the workspace, a folder's L0/L1, a file's text.

A full screen (F6, ``/context``, palette "context: browse"). On the left the scopes as a tree, listed
lazily: a folder is read (``ContextTree.ls``) in a thread worker the first time it is expanded. On the
right the preview of the highlighted entry (read in a thread worker too): a folder's ``.abstract.md``
(L0) and ``.overview.md`` (L1) as Markdown, or the first KB of a file. ``Enter`` (or ``o``) on a file
opens it in the full viewer; on a folder it expands or collapses it. ``temp`` and ``queue`` are shown
dimmed and read-only: the browser never writes.

Workers never touch widgets: they post :class:`ContextBrowser.Listed`, :class:`ContextBrowser.Previewed`
or :class:`ContextBrowser.FileRead`, and the handlers update the panes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static, Tree

from services.context.errors import ContextError
from widgets.context_tree.preview import (
    VIEWER_BYTES,
    ContextPreview,
    FileText,
    PreviewData,
    load_preview,
    read_start,
)
from widgets.context_tree.tree import ContextTreeView, NodeInfo
from widgets.keybar import KeyBar, key_label
from widgets.safe import plain

if TYPE_CHECKING:
    from services.context.tree import ContextTree, Entry
    from services.context.uri import AxiomUri


class BrowserKeys(KeyBar):
    """The browser's own keys only (the workbench's F-keys do nothing here)."""

    def describe(self, *, narrow: bool = False) -> list[tuple[str, str]]:
        keys: list[tuple[str, str]] = []
        seen: set[str] = set()
        for key, (node, binding, enabled, _tooltip) in self.screen.active_bindings.items():
            if node is self.app or not binding.show or not enabled or binding.action in seen:
                continue
            seen.add(binding.action)
            keys.append((key_label(key), binding.description))
        return keys


class ContextBrowser(Screen[None]):
    CSS_PATH = "context_browser.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close", id="context.close", tooltip="Close the context browser"),
        Binding(
            "enter,o", "open", "Open", id="context.open", tooltip="Open the file in the viewer, or expand the folder"
        ),
        Binding("r", "refresh", "Refresh", id="context.refresh", tooltip="List the highlighted folder again"),
        Binding(
            "tab", "switch_pane", "Tree/preview", id="context.switch", tooltip="Move between the tree and the preview"
        ),
    ]

    @dataclass
    class Listed(Message):
        """Folders listed by the worker, parents first; ``select`` is where the cursor goes after."""

        listings: list[tuple[AxiomUri, list[Entry]]]
        error: str | None = None
        select: AxiomUri | None = None

    @dataclass
    class Previewed(Message):
        data: PreviewData

    @dataclass
    class FileRead(Message):
        info: NodeInfo
        file: FileText | None = None
        error: str | None = None

    @dataclass
    class Failed(Message):
        """A typed error the operator should see (one line)."""

        message: str
        extra: dict[str, Any] = field(default_factory=dict)

    def __init__(self, tree: ContextTree, *, start: AxiomUri | None = None, workspace: str = "") -> None:
        super().__init__()
        self.context_tree = tree
        self.start = start
        self.workspace_name = workspace

    def compose(self) -> Any:
        title = Text.assemble(plain("Context ", "bold"), plain("axiom://", "bold"))
        if self.workspace_name:
            title.append_text(plain(f"  ·  workspace {self.workspace_name}", "dim", single_line=True))
        yield Static(title, id="context-title")
        with Horizontal(id="context-body"):
            yield ContextTreeView(id="context-tree")
            yield ContextPreview(id="context-preview")
        yield BrowserKeys(id="context-keys")

    def on_mount(self) -> None:
        tree = self.query_one(ContextTreeView)
        tree.focus()
        if self.start is not None:
            self.reveal(self.start)

    # -- listing ---------------------------------------------------------------------
    def reveal(self, uri: AxiomUri) -> None:
        """List the folders down to ``uri`` and put the cursor on it."""
        folders = [*reversed(uri.ancestors), uri]
        self._list(folders, select=uri, missing_ok=True)

    def _list(self, folders: list[AxiomUri], *, select: AxiomUri | None = None, missing_ok: bool = False) -> None:
        self.run_worker(
            partial(self._list_in_thread, folders, select, missing_ok),
            thread=True,
            group="context-ls",
            exit_on_error=False,
        )

    def _list_in_thread(self, folders: list[AxiomUri], select: AxiomUri | None, missing_ok: bool) -> None:
        listings: list[tuple[AxiomUri, list[Entry]]] = []
        error = None
        for folder in folders:
            try:
                if missing_ok and folder == select and self.context_tree.stat(folder).kind != "dir":
                    break  # a file: its folder is listed, the cursor goes to it
                listings.append((folder, self.context_tree.ls(folder)))
            except ContextError as exc:
                error = exc.message
                break
        self.post_message(self.Listed(listings, error, select))

    @on(ContextTreeView.Expand)
    def _expand(self, message: ContextTreeView.Expand) -> None:
        self._list([message.uri])

    @on(Listed)
    def _listed(self, message: Listed) -> None:
        tree = self.query_one(ContextTreeView)
        for uri, entries in message.listings:
            tree.fill(uri, entries)
            node = tree.node_for(uri)
            if node is not None and not node.is_expanded:
                node.expand()
        if message.error:
            self.app.notify(message.error, title="Context", severity="error", timeout=8)
        target = tree.node_for(message.select) if message.select is not None else None
        if target is not None:
            self.call_after_refresh(tree.move_cursor, target)  # its line is known once the tree is laid out

    # -- preview ---------------------------------------------------------------------
    @on(Tree.NodeHighlighted, "#context-tree")
    def _highlighted(self, event: Tree.NodeHighlighted[NodeInfo]) -> None:
        info = event.node.data
        preview = self.query_one(ContextPreview)
        if info is None:
            preview.show_message("(empty folder)")
            return
        self.run_worker(
            partial(self._preview_in_thread, info),
            thread=True,
            group="context-preview",
            exclusive=True,
            exit_on_error=False,
        )

    def _preview_in_thread(self, info: NodeInfo) -> None:
        self.post_message(self.Previewed(load_preview(self.context_tree, info)))

    @on(Previewed)
    def _previewed(self, message: Previewed) -> None:
        current = self.query_one(ContextTreeView).cursor_info
        if current is None or current.uri == message.data.info.uri:
            self.query_one(ContextPreview).show(message.data)

    # -- opening ---------------------------------------------------------------------
    @on(Tree.NodeSelected, "#context-tree")
    def _selected(self, event: Tree.NodeSelected[NodeInfo]) -> None:
        info = event.node.data
        if info is not None and info.kind == "file":
            self.open_file(info)

    def action_open(self) -> None:
        tree = self.query_one(ContextTreeView)
        if self.focused is tree:
            tree.action_select_cursor()  # files open (NodeSelected); folders expand or collapse
            return
        info = tree.cursor_info
        if info is not None and info.kind == "file":
            self.open_file(info)

    def open_file(self, info: NodeInfo) -> None:
        self.run_worker(partial(self._read_in_thread, info), thread=True, group="context-read", exit_on_error=False)

    def _read_in_thread(self, info: NodeInfo) -> None:
        try:
            self.post_message(self.FileRead(info, read_start(self.context_tree, info, VIEWER_BYTES)))
        except ContextError as exc:
            self.post_message(self.FileRead(info, error=exc.message))

    @on(FileRead)
    def _file_read(self, message: FileRead) -> None:
        if message.error is not None or message.file is None:
            self.app.notify(message.error or "cannot read the file", title="Context", severity="error", timeout=8)
            return
        from screens.context_file_viewer import ContextFileViewer

        self.app.push_screen(ContextFileViewer(message.info, message.file))

    # -- other keys --------------------------------------------------------------------
    def action_refresh(self) -> None:
        tree = self.query_one(ContextTreeView)
        info = tree.cursor_info
        if info is None:
            return
        folder = info.uri if info.kind == "dir" else info.uri.parent
        self._list([folder], select=info.uri)

    def action_switch_pane(self) -> None:
        tree, preview = self.query_one(ContextTreeView), self.query_one(ContextPreview)
        (preview if self.focused is tree else tree).focus()

    def action_close(self) -> None:
        self.dismiss(None)
