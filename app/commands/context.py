"""``/context …``: the context browser, reading a file, adding files, find/search and their traces.

Thin: the context tree (``services.context.tree.ContextTree`` on ``<workspace>/context``) does the
work; this parses arguments, opens screens and reports typed errors as one line.

``/context find|search QUERY`` run :class:`services.context.search.ContextRetriever` in a thread
and open the trace view (start points, steps, budget use, stop reason, the ranked hits);
``/context trace ID|last`` opens a persisted trace (the ``context_traces`` table of ``audit.db``).
Each blocking call runs in a thread awaited by an async worker; the thread reports progress only by
posting messages, and the screens open back on the App's thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from app.host import run_task
from services.errors import AriesError
from widgets.commands import CommandError, ContextAt, Query
from widgets.messages import HitsFound, StatusStarted

if TYPE_CHECKING:
    from app.host import Host
    from services.context.tree import ContextTree
    from services.context.uri import AxiomUri


class ContextNotAvailable(AriesError):
    """A ``/context`` request with nothing to show (no trace yet)."""


class ContextController:
    def __init__(self, host: Host) -> None:
        self.host = host
        self._tree: ContextTree | None = None
        self._tree_root: Any = None

    def tree(self) -> ContextTree:
        """The context tree of the open workspace (``<workspace.root>/context``), opened once per workspace."""
        from services.context.tree import ContextTree

        session = self.host.require_session()
        root = session.workspace.paths.context
        if self._tree is None or self._tree_root != root:
            self._tree, self._tree_root = ContextTree(root), root
        return self._tree

    def command(self, parsed: ContextAt | Query) -> None:
        """The parsed ``/context`` line (``widgets.commands``: its forms)."""
        if isinstance(parsed, Query):
            (self.find if parsed.action == "find" else self.search)(parsed.text)
        elif parsed.action == "ls":
            self.browse(parsed.target)
        elif parsed.target is None:  # the other forms' target is required by the grammar
            raise CommandError(f"/context {parsed.action} needs its argument.")
        elif parsed.action == "read":
            self.read(parsed.target)
        elif parsed.action == "add":
            self.add(parsed.target, parsed.uri)
        else:  # trace
            self.open_trace(parsed.target)

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
        current = self.host.screen
        if isinstance(current, ContextBrowser):
            if start is not None:
                current.reveal(start)
            return
        self.host.push_screen(ContextBrowser(tree, start=start, workspace=self.host.workspace_name))

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

        def viewer(file: Any) -> None:
            from screens.context_file_viewer import ContextFileViewer

            self.host.push_screen(ContextFileViewer(info, file))

        run_task(self.host, "/context", lambda: read_start(tree, info, VIEWER_BYTES), viewer, group="context-read")

    # -- traces --------------------------------------------------------------------------
    def show_trace(self, trace: Mapping[str, Any]) -> None:
        """Open the trace view on ``trace`` (the agreed dict shape; partial traces are fine)."""
        from screens.context_trace import ContextTraceScreen

        self.host.push_screen(ContextTraceScreen(trace))

    # -- adding ------------------------------------------------------------------------------
    def add(self, source: str, to: str | None = None) -> None:
        """``/context add PATH|URL [URI]``: stage, move into place, then run the queued tier and index
        jobs in a thread worker, with progress in the status line (``Ctrl+X`` is not needed: each step
        is short and the queue is replay-safe). A URL is fetched through the session's
        ``builtin:web:fetch``: the policy decides, and when it asks, the call waits in the Approvals
        pane like any other (F4, Enter) while the worker waits for the decision."""
        from pathlib import Path

        from services.context.ingest import is_url

        session = self.host.require_session()
        path: Path | str = source
        if not is_url(source):
            path = Path(source).expanduser()
            if not path.is_absolute():
                path = session.workspace.root / path  # relative paths resolve against the workspace root
        target = self.parse(to) if to else None
        key = "context-add"

        host = self.host

        def progress(stage: str, done: int, total: int) -> None:  # in the worker's thread: posted
            label = f"context add: {stage} {done}/{total}" if total else f"context add: {stage}"
            host.publish(StatusStarted(key, label))

        def add() -> tuple[Any, Any]:
            from services.context.service import ContextService

            service = ContextService(session.workspace, session=session)
            try:
                return service.add(str(path), target, progress=progress), service.process_queue(progress=progress)
            finally:
                service.close()

        def said(result: tuple[Any, Any]) -> None:
            added, queued = result
            skipped = f", {len(added.skipped)} skipped" if added.skipped else ""
            failed = f"; {len(queued.failed)} job(s) failed" if queued.failed else ""
            host.say(
                f"Added {added.uri}: {len(added.files)} file(s){skipped}; tiers and index updated{failed}.", "context"
            )

        run_task(host, "/context add", add, said, group=key, status=f"context add: {source}", key=key)

    # -- find / search / traces ---------------------------------------------------------------
    def find(self, query: str) -> None:
        """``/context find QUERY`` — the flat ranked lookup; opens its trace view with the hits."""
        self._retrieve("find", query)

    def search(self, query: str) -> None:
        """``/context search QUERY`` — the directory-aware search; opens its trace view with the hits."""
        self._retrieve("search", query)

    def open_trace(self, trace_id: str) -> None:
        """``/context trace ID`` (or ``last``) — a persisted trace, in the trace view."""
        session = self.host.require_session()

        def load() -> dict[str, Any]:
            from services.audit.db import AUDIT_FILE
            from services.context.traces import TraceStore

            store = TraceStore(session.workspace.root / AUDIT_FILE)
            try:
                if trace_id == "last":
                    recent = store.recent(1)
                    if not recent:
                        raise ContextNotAvailable("no find or search has run in this workspace yet")
                    trace = recent[0]
                else:
                    trace = store.get(trace_id)
                return trace_view(trace.to_dict())
            finally:
                store.close()

        run_task(self.host, "/context trace", load, self.show_trace, group="context-trace")

    def _retrieve(self, kind: str, query: str) -> None:
        session = self.host.require_session()
        tree = self.tree()
        key = f"context-{kind}"

        def retrieve() -> Any:
            from services.audit.db import AUDIT_FILE
            from services.context.requests import log_retrieval
            from services.context.search import ContextRetriever

            retriever = ContextRetriever(tree, session.engine())
            try:
                run = (lambda: retriever.find(query)) if kind == "find" else (lambda: retriever.search(query))
                return log_retrieval(session.workspace.root / AUDIT_FILE, kind, None, run)
            finally:
                retriever.close()

        def found(result: Any) -> None:
            data = trace_view(result.trace.to_dict())
            snippets = {str(hit.uri): hit.snippet for hit in result.hits}
            for row in data.get("hits", []):
                row.setdefault("snippet", snippets.get(str(row.get("uri")), ""))
            rows = [
                {"rank": rank, "handle": hit.handle, "source_path": str(hit.uri), "score": hit.score}
                for rank, hit in enumerate(result.hits, start=1)
            ]
            caption = f"context {kind}: {query}  ·  trace {result.trace.id} (/context trace last)"
            self.host.publish(HitsFound(caption, rows))
            self.show_trace(data)

        run_task(self.host, f"/context {kind}", retrieve, found, group=key, status=f"context {kind}: {query}", key=key)


def trace_view(trace: dict[str, Any]) -> dict[str, Any]:
    """A persisted trace in the trace view's shape: the limits and the use in one ``budget``."""
    limits = dict(trace.get("budget") or {})
    used = dict(trace.get("budget_used") or {})
    view = dict(trace)
    view["budget"] = {**limits, "used_ms": used.get("ms"), "nodes": used.get("nodes"), "depth": used.get("depth")}
    view["query"] = trace.get("normalized") or trace.get("query")
    view["start_points"] = [
        {**point, "level": point.get("level") or ("L0/L1" if point.get("tier") else "–")}
        for point in trace.get("start_points") or []
    ]
    view["steps"] = [
        {**step, "uri": step.get("uri") or step.get("directory"), "kept": step.get("kept", step.get("hits", []))}
        for step in trace.get("steps") or []
    ]
    return view
