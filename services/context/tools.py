"""The context backend of the tools ``builtin:context:find`` and ``builtin:context:search``.

The tool *specs* (ids, class ``context``, tier READ_ONLY, schemas) are in
:mod:`services.tools.context`, so the builtin registry, the profiles and ``aries tool list`` know
them; this module does the work, because it needs the retrieval engine and ``services.tools`` may
not import ``services.retrieval``.  :class:`services.session.session.Session` builds one
:class:`ContextToolBackend` per gateway (``ToolGateway(backends={"context": …})``) on the session's
own engine, and the gateway hands it to each call after the policy (and the profile) allowed it.

A call is a :meth:`ContextRetriever.find`/``search`` on the workspace's context tree: it reads the
index as it is (the queue keeps it up to date; nothing is synced or written here but the trace).
The time budget is capped by what is left of the call's deadline, so a budget always ends a walk
before the gateway's timeout does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import MISSING

from services.audit.db import AUDIT_FILE
from services.context.requests import RequestLog
from services.context.search import ContextRetriever
from services.context.search_types import SearchFilter
from services.context.settings import ContextSettings
from services.context.traces import Budget
from services.context.tree import ContextTree
from services.tools.args import ContextFindArgs, ContextSearchArgs, given
from services.workspace.paths import WorkspacePaths

if TYPE_CHECKING:
    from services.context.search_types import RetrievalResult
    from services.retrieval import RetrievalEngine


class ContextToolBackend:
    """find/search for the tool gateway, on ``engine()`` (called on first use, from the call's thread)."""

    def __init__(
        self, root: Path, engine: Callable[[], RetrievalEngine], *, settings: ContextSettings | None = None
    ) -> None:
        self.tree_root = WorkspacePaths(root).context
        self._engine = engine
        self._settings = settings
        self._retriever: ContextRetriever | None = None
        self._lock = threading.Lock()
        self.requests = RequestLog(Path(root) / AUDIT_FILE)

    def retriever(self) -> ContextRetriever:
        with self._lock:
            if self._retriever is None:
                settings = self._settings or ContextSettings.from_env()
                self._retriever = ContextRetriever(ContextTree(self.tree_root), self._engine(), settings=settings)
            return self._retriever

    def close(self) -> None:
        with self._lock:
            if self._retriever is not None:
                self._retriever.close()
                self._retriever = None
        self.requests.close()

    # -- the two tools --------------------------------------------------------------------
    def find(self, args: ContextFindArgs, *, deadline_ms: float | None = None) -> dict[str, Any]:
        target = given(args.target_uri, None)
        with self.requests.request("find", target) as req:
            common = _common(args, deadline_ms)
            result = self.retriever().find(args.query, target, **common)
            req.trace_id, req.counts = result.trace.id, {"hits": len(result.hits)}
        return _output("find", args, result)

    def search(self, args: ContextSearchArgs, *, deadline_ms: float | None = None) -> dict[str, Any]:
        target = given(args.target_uri, None)
        with self.requests.request("search", target) as req:
            common = _common(args, deadline_ms)
            result = self.retriever().search(args.query, target, session=given(args.session, None), **common)
            req.trace_id, req.counts = result.trace.id, {"hits": len(result.hits)}
        return _output("search", args, result)


def _common(args: ContextFindArgs, deadline_ms: float | None) -> dict[str, Any]:
    budget: dict[str, Any] = {} if args.budget is MISSING else args.budget.model_dump()  # the fields given
    if deadline_ms is not None:
        budget["max_ms"] = min(float(budget.get("max_ms", deadline_ms)), deadline_ms)
    flt = None
    if args.filter is not MISSING and args.filter.model_dump():
        raw = args.filter
        flt = SearchFilter(
            scope=given(raw.scope, None),
            prefix=given(raw.prefix, None),
            file_types=tuple(t.lower().lstrip(".") for t in given(raw.file_types, [])),
            levels=tuple(given(raw.levels, [])),
        )
    return {
        "limit": args.limit,
        "score_threshold": given(args.score_threshold, None),
        "filter": flt,
        "budget": Budget(**budget),
    }


def _output(kind: str, args: ContextFindArgs, result: RetrievalResult) -> dict[str, Any]:
    trace = result.trace
    return {
        "kind": kind,
        "query": args.query,
        "target_uri": trace.target,
        "hits": [
            {"uri": h.uri, "score": h.score, "level": h.level, "snippet": h.snippet, "handle": h.handle}
            for h in result.hits
        ],
        "trace_id": trace.id,
        "stop_reason": trace.stop_reason,
        "budget_used": dict(trace.budget_used),
    }


__all__ = ["ContextToolBackend"]
