"""``/context …`` for the App: the context browser, reading a file, and the hooks for find/search/traces.

Thin: the context tree (``services.context.tree.ContextTree`` on ``<workspace>/context``) does the
work; this parses arguments, opens screens and reports typed errors as one line.

Hooks left for the retrieval work (ctx-search), to be wired by the lead — each raises
:class:`ContextNotAvailable` ("… is not available yet") until then:

* :meth:`ContextController.find` and :meth:`ContextController.search` (``/context find|search QUERY``):
  call the service, show the hits in the Context pane, keep the trace;
* :meth:`ContextController.open_trace` (``/context trace ID``): load a persisted trace by id.

:meth:`ContextController.show_trace` already works: give it a trace dict (the agreed shape, see
``widgets.context_tree.trace``) and it opens the trace view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from app.commands import CommandError
from services.errors import AriesError

if TYPE_CHECKING:
    from app.aries_app import AriesApp
    from services.context.tree import ContextTree
    from services.context.uri import AxiomUri


class ContextNotAvailable(AriesError):
    """A ``/context`` feature whose service has not landed yet."""


class ContextController:
    def __init__(self, app: AriesApp) -> None:
        self.app = app
        self._tree: ContextTree | None = None
        self._tree_root: Any = None

    def tree(self) -> ContextTree:
        """The context tree of the open workspace (``<workspace.root>/context``), opened once per workspace."""
        from services.context.tree import ContextTree

        session = self.app.require_session()
        root = session.workspace.root / "context"
        if self._tree is None or self._tree_root != root:
            self._tree, self._tree_root = ContextTree(root), root
        return self._tree

    def command(self, args: list[str]) -> None:
        if not args:
            self.browse()
            return
        action, rest = args[0], args[1:]
        if action == "ls" and len(rest) <= 1:
            self.browse(rest[0] if rest else None)
        elif action == "read" and len(rest) == 1:
            self.read(rest[0])
        elif action in ("find", "search") and rest:
            (self.find if action == "find" else self.search)(" ".join(rest))
        elif action == "trace" and len(rest) == 1:
            self.open_trace(rest[0])
        else:
            raise CommandError(f"cannot read '/context {' '.join(args)}'.")

    @staticmethod
    def parse(text: str) -> AxiomUri:
        """An ``axiom://`` URI typed by the operator (a typed InvalidUri error when it is not one)."""
        from services.context.uri import parse_uri

        return parse_uri(text)

    # -- browsing and reading ----------------------------------------------------------
    def browse(self, uri: str | None = None) -> None:
        """Open the context browser (at ``uri`` when given: its folders listed, the cursor on it)."""
        from screens.context_browser import ContextBrowser

        start = self.parse(uri) if uri else None
        tree = self.tree()
        if start is not None:
            tree.stat(start)  # nothing there: a ResourceNotFound line, no browser
        current = self.app.screen
        if isinstance(current, ContextBrowser):
            if start is not None:
                current.reveal(start)
            return
        self.app.push_screen(ContextBrowser(tree, start=start, workspace=self.app.workspace_name))

    def read(self, uri: str) -> None:
        """Open the file ``uri`` in the viewer (a folder opens the browser on it)."""
        target = self.parse(uri)
        tree = self.tree()
        entry = tree.stat(target)
        if entry.kind == "dir":
            self.browse(uri)
            return
        if entry.kind != "file":
            raise CommandError(f"{target} is a {entry.kind}, not a file.")
        from widgets.context_tree.preview import VIEWER_BYTES, read_start
        from widgets.context_tree.tree import NodeInfo

        info = NodeInfo(target, "file", entry.size)

        def work() -> None:
            try:
                file = read_start(tree, info, VIEWER_BYTES)
            except AriesError as exc:
                self.app.call_from_thread(self.app.report_error, exc.message, "/context")
                return
            self.app.call_from_thread(self._show_file, info, file)

        self.app.run_worker(work, thread=True, group="context-read", exit_on_error=False)

    def _show_file(self, info: Any, file: Any) -> None:
        from screens.context_file_viewer import ContextFileViewer

        self.app.push_screen(ContextFileViewer(info, file))

    # -- traces --------------------------------------------------------------------------
    def show_trace(self, trace: Mapping[str, Any]) -> None:
        """Open the trace view on ``trace`` (the agreed dict shape; partial traces are fine)."""
        from screens.context_trace import ContextTraceScreen

        self.app.push_screen(ContextTraceScreen(trace))

    # -- hooks for ctx-search (the lead wires them) -------------------------------------------
    def find(self, query: str) -> None:
        """HOOK: ``/context find QUERY`` — flat ranked lookup; show hits, keep the trace."""
        raise ContextNotAvailable("/context find is not available yet (the context search service is not wired)")

    def search(self, query: str) -> None:
        """HOOK: ``/context search QUERY`` — directory-aware search; show hits, keep the trace."""
        raise ContextNotAvailable("/context search is not available yet (the context search service is not wired)")

    def open_trace(self, trace_id: str) -> None:
        """HOOK: ``/context trace ID`` — load a persisted trace, then :meth:`show_trace` it."""
        raise ContextNotAvailable("/context trace is not available yet (traces are not persisted in this build)")
