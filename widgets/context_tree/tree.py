"""The tree of ``axiom://`` scopes, loaded lazily.

The widget only shows nodes; it never reads the disk. When a folder is expanded for the first time it
posts :class:`ContextTreeView.Expand`, the screen lists it in a thread worker
(``ContextTree.ls``) and hands the entries back with :meth:`ContextTreeView.fill`.

Every label is built from neutralised text (``widgets.safe.plain``): a file named ``[bold]x`` or one
holding escape characters is shown literally. ``temp`` and ``queue`` (Aries's own working scopes) are
shown dimmed and marked read-only, as is anything the operator may not write (``session``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from services.context.scopes import can_write
from services.context.uri import CORE_SCOPES, INTERNAL_SCOPES, AxiomUri
from widgets.safe import plain

if TYPE_CHECKING:
    from services.context.tree import Entry

READ_ONLY_MARK = " (read-only)"


@dataclass
class NodeInfo:
    """What a node of the tree stands for."""

    uri: AxiomUri
    kind: str  # "dir", "file", "link" or "other"
    size: int = 0
    loaded: bool = False

    @property
    def internal(self) -> bool:
        return self.uri.scope in INTERNAL_SCOPES

    @property
    def read_only(self) -> bool:
        """True when the operator may not change this entry (``can_write(uri, "user")`` is False)."""
        if self.uri.is_root:  # a scope folder is never writable as such; its contents may be
            return self.uri.scope not in ("resources", "user", "agent")
        return not can_write(self.uri, "user")


def node_label(info: NodeInfo) -> Text:
    """The label of a node: the name (neutralised), dimmed for internal scopes, marked when read-only."""
    style = "dim" if info.internal else ("bold" if info.uri.is_root else "")
    name = info.uri.name + ("/" if info.kind == "dir" and not info.uri.is_root else "")
    label = plain(name, style, single_line=True)
    if info.kind == "link":
        label.append(" (link)", "dim italic")
    if info.uri.is_root and info.read_only:
        label.append(READ_ONLY_MARK, "dim italic")
    return label


class ContextTreeView(Tree[NodeInfo]):
    """The scopes of a context tree as a ``Tree``; folders are listed when first expanded."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "right,l", "expand_cursor", "Expand", show=False, id="context.tree.expand", tooltip="Expand the folder"
        ),
        Binding(
            "left,h",
            "collapse_cursor",
            "Collapse",
            show=False,
            id="context.tree.collapse",
            tooltip="Collapse the folder",
        ),
    ]

    @dataclass
    class Expand(Message):
        """A folder was expanded for the first time: list ``uri`` and call :meth:`fill`."""

        uri: AxiomUri

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__("axiom://", id=id)
        self.show_root = False
        self.guide_depth = 3
        self._by_uri: dict[AxiomUri, TreeNode[NodeInfo]] = {}

    def on_mount(self) -> None:
        self.show_scopes()

    def show_scopes(self) -> None:
        """Back to the six scopes, nothing listed."""
        self.clear()
        self._by_uri = {}
        for scope in CORE_SCOPES + INTERNAL_SCOPES:
            info = NodeInfo(AxiomUri.root(scope), "dir")
            self._by_uri[info.uri] = self.root.add(node_label(info), data=info, allow_expand=True)
        self.cursor_line = 0

    def node_for(self, uri: AxiomUri) -> TreeNode[NodeInfo] | None:
        return self._by_uri.get(uri)

    @property
    def cursor_info(self) -> NodeInfo | None:
        node = self.cursor_node
        return node.data if node is not None else None

    def fill(self, uri: AxiomUri, entries: list[Entry]) -> None:
        """Show ``entries`` as the children of the folder ``uri`` (replacing what it showed)."""
        node = self._by_uri.get(uri)
        if node is None or node.data is None:
            return
        for child in list(node.children):
            self._forget(child)
        node.remove_children()
        for entry in entries:
            info = NodeInfo(entry.uri, entry.kind, entry.size)
            self._by_uri[entry.uri] = node.add(node_label(info), data=info, allow_expand=entry.kind == "dir")
        node.data.loaded = True
        if not entries:
            node.add_leaf(plain("(empty)", "dim italic"), data=None)

    def _forget(self, node: TreeNode[NodeInfo]) -> None:
        for child in node.children:
            self._forget(child)
        if node.data is not None:
            self._by_uri.pop(node.data.uri, None)

    def reload(self, uri: AxiomUri) -> None:
        """Ask again for the entries of ``uri`` (after a change on disk)."""
        node = self._by_uri.get(uri)
        if node is not None and node.data is not None:
            self.post_message(self.Expand(uri))

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[NodeInfo]) -> None:
        info = event.node.data
        if info is not None and info.kind == "dir" and not info.loaded:
            self.post_message(self.Expand(info.uri))

    def action_expand_cursor(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and not node.is_expanded:
            node.expand()
        elif node.children:
            self.move_cursor(node.children[0])

    def action_collapse_cursor(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)
