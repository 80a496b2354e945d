"""The context backend of the tools ``builtin:context:find`` and ``builtin:context:search``.

The tool *specs* (ids, class ``context``, tier READ_ONLY, schemas) are in
:mod:`services.tools.context`, so the builtin registry, the profiles and ``aries tool list`` know
them; this module does the work, because it needs the retrieval engine and ``services.tools`` may
not import ``services.retrieval``.  :class:`services.session.Session` builds one
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

from services.context.requests import RequestLog
from services.context.search import ContextRetriever, SearchFilter
from services.context.settings import ContextSettings
from services.context.traces import Budget
from services.context.tree import ContextTree

if TYPE_CHECKING:
    from services.context.search_types import RetrievalResult
    from services.retrieval import RetrievalEngine


class ContextToolBackend:
    """find/search for the tool gateway, on ``engine()`` (called on first use, from the call's thread)."""

    def __init__(
        self, root: Path, engine: Callable[[], RetrievalEngine], *, settings: ContextSettings | None = None
    ) -> None:
        self.tree_root = Path(root) / "context"
        self._engine = engine
        self._settings = settings
        self._retriever: ContextRetriever | None = None
        self._lock = threading.Lock()
        self.requests = RequestLog(Path(root) / "audit.db")

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
    def find(self, args: dict[str, Any], *, deadline_ms: float | None = None) -> dict[str, Any]:
        with self.requests.request("find", args.get("target_uri")) as req:
            common = _common(args, deadline_ms)
            result = self.retriever().find(args["query"], args.get("target_uri"), **common)
            req.trace_id, req.counts = result.trace.id, {"hits": len(result.hits)}
        return _output("find", args, result)

    def search(self, args: dict[str, Any], *, deadline_ms: float | None = None) -> dict[str, Any]:
        with self.requests.request("search", args.get("target_uri")) as req:
            common = _common(args, deadline_ms)
            result = self.retriever().search(
                args["query"], args.get("target_uri"), session=args.get("session"), **common
            )
            req.trace_id, req.counts = result.trace.id, {"hits": len(result.hits)}
        return _output("search", args, result)


def _common(args: dict[str, Any], deadline_ms: float | None) -> dict[str, Any]:
    given = dict(args.get("budget") or {})
    if deadline_ms is not None:
        given["max_ms"] = min(float(given.get("max_ms", deadline_ms)), deadline_ms)
    raw = args.get("filter")
    flt = None
    if raw:
        flt = SearchFilter(
            scope=raw.get("scope"),
            prefix=raw.get("prefix"),
            file_types=tuple(t.lower().lstrip(".") for t in raw.get("file_types", ())),
            levels=tuple(raw.get("levels", ())),
        )
    return {
        "limit": int(args.get("limit", 10)),
        "score_threshold": args.get("score_threshold"),
        "filter": flt,
        "budget": Budget(**given),
    }


def _output(kind: str, args: dict[str, Any], result: RetrievalResult) -> dict[str, Any]:
    trace = result.trace
    return {
        "kind": kind,
        "query": args["query"],
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
