"""``find`` and ``search`` over the context index, with budgets and persisted traces.

Both start the same way: the query is normalized (:mod:`services.context.normalize`), one hybrid
query of the ``context`` index (BM25 + dense, fused; see :mod:`services.context.index`) returns up
to ``top_n`` candidate chunks, and the candidates outside ``target_uri`` or the filter are dropped.
Scores are made absolute: a chunk's fused score divided by the best score fusion can give (rank 1
in every retriever), so 1.0 is a perfect match and ``score_threshold`` means the same for every
query.  Candidates are not written to the retrieval audit (``/rag last``): the trace is their record.

* :meth:`ContextRetriever.find` — the flat ranked lookup: the best chunk of each file (L2 files and
  tier files, reranked by :mod:`services.context.rerank`).  Budget: ``max_nodes`` files examined,
  ``max_depth`` folder levels below the target, ``max_ms``.
* :meth:`ContextRetriever.search` — directory-aware recursive retrieval.  Each directory gets
  ``tier`` (its best L0/L1 candidate) and ``best`` (the best candidate anywhere below it);
  ``own = (tier + best) / 2``.  Start points: the :data:`START_POINTS` directories with the best
  tier scores, then the target (or each scope root) so nothing is unreachable.  Directories are
  visited best first (a heap); a child's priority is ``ALPHA·own(child) + (1-ALPHA)·priority(parent)``.
  Visiting a directory (one node) collects its L2 files, scored
  ``FILE_WEIGHT·file + (1-FILE_WEIGHT)·priority(dir)`` then reranked, and queues its children that
  hold candidates, unless they are more than ``max_depth`` levels below their start point.  It stops
  when the heap is empty (``exhausted``, or ``max_depth`` if children were cut), on ``max_ms`` or
  ``max_nodes``, or with ``limit`` once it holds ``limit`` hits and no queued directory can beat the
  last of them (an upper bound from its subtree's best scores).
* ``session``: the last :data:`SESSION_MESSAGES` user/assistant messages of a context session
  expand the query with their :data:`SESSION_TERMS` most frequent words (folded, 3+ letters, stop
  words and query terms left out; ties by first appearance); the trace lists them.

Every call returns a :class:`RetrievalResult`; its :class:`~services.context.traces.Trace` is
written to the ``context_traces`` table before the call returns.
"""

from __future__ import annotations

import heapq
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from services.context.index import INDEX_NAME, NotContextSource, level_of, uri_of_source
from services.context.normalize import ALIASES_FILE, fold, load_aliases, normalize_query
from services.context.rerank import DIR_BOOST, order_key, rerank_factor
from services.context.search_types import (
    Cand,
    ContextHit,
    Dirs,
    RetrievalResult,
    SearchFilter,
    directories,
    parent_of,
    text_of,
)
from services.context.settings import ContextSettings
from services.context.traces import Budget, Trace, TraceStore
from services.context.uri import CORE_SCOPES, AxiomUri, parse_uri
from services.errors import InvalidInput
from services.text.textsafe import neutralize

__all__ = ["ContextRetriever"]

if TYPE_CHECKING:
    from pathlib import Path

    from services.context.sessions import ContextSession
    from services.context.tree import ContextTree
    from services.retrieval.engine import RetrievalEngine
    from services.retrieval.models import Hit

START_POINTS = 3
ALPHA = 0.7
FILE_WEIGHT = 0.7
SESSION_MESSAGES = 6
SESSION_TERMS = 6
SNIPPET_CHARS = 200
MIN_CANDIDATES = 200
"""Candidate chunks search asks the index for (at least; 10 per hit wanted)."""
FIND_CANDIDATES = 100
"""Candidate chunks find asks for (at least; 10 per hit wanted)."""


class ContextRetriever:
    """find/search over one context tree and its ``context`` index in ``engine``."""

    def __init__(
        self,
        tree: ContextTree,
        engine: RetrievalEngine,
        *,
        settings: ContextSettings | None = None,
        traces: TraceStore | None = None,
        aliases_path: Path | None = None,
    ) -> None:
        from pathlib import Path

        from services.audit.db import AUDIT_FILE

        self.tree = tree
        self.engine = engine
        self.settings = settings or ContextSettings.from_env()
        self.traces = traces or TraceStore(engine.workspace.root / AUDIT_FILE)
        path = aliases_path or (
            Path(self.settings.aliases_file) if self.settings.aliases_file else engine.workspace.root / ALIASES_FILE
        )
        self.aliases = load_aliases(path) if self.settings.query_normalizer else {}
        self._warm = False

    def close(self) -> None:
        self.traces.close()

    def _warm_up(self) -> None:
        """Load the embedding model once, before a call's clock starts: a request's ``max_ms`` budget
        is for retrieving and walking, not for a cold start of the model (seconds, once per process)."""
        if not self._warm:
            from services.retrieval.embedders import preload

            preload(self.engine.embedder)
            self._warm = True

    # -- shared steps ----------------------------------------------------------------------
    def _start(self, kind: str, query: str, target: AxiomUri | str | None, limit: int, budget: Budget) -> Trace:
        if not query or not query.strip():
            raise InvalidInput("the query is empty")
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit must be between 1 and 1000")
        normalized = normalize_query(query, enabled=self.settings.query_normalizer, aliases=self.aliases)
        if not normalized:
            raise InvalidInput("the query has no words")
        return Trace(
            id=secrets.token_hex(6),
            kind=kind,
            query=query,
            normalized=normalized,
            target=None if target is None else str(target),
            limit=limit,
            settings={"query_normalizer": self.settings.query_normalizer, "reranker": self.settings.reranker},
            budget=asdict(budget),
        )

    def _candidates(self, text: str, top_n: int) -> list[Hit]:
        """Fused candidate chunks of the context index (none before the first sync)."""
        engine = self.engine
        if not engine.indexes.exists(INDEX_NAME):
            return []
        store = engine.indexes.store(INDEX_NAME)
        embedder = engine.indexes.check_model(store)  # the index's own vector space (AXIOMME_EMBEDDER_BACKEND unset)
        vector = embedder.embed_query(text) if store.vector_health.ok else None
        with store.reading():
            hits, _warnings = engine.hits(store, INDEX_NAME, text, vector, top_n, top_n, None, embedder=embedder)
        return hits

    def _collect(
        self, trace: Trace, target: AxiomUri | None, flt: SearchFilter | None, limit: int, *, all_levels: bool
    ) -> list[Cand]:
        """The best chunk of each file within ``target`` (and the filter), best first."""
        from services.retrieval.fusion import fuse

        started = time.perf_counter()
        top_n = min(1000, max(MIN_CANDIDATES if all_levels else FIND_CANDIDATES, 10 * limit))
        perfect = fuse([("x", 1.0)], [("x", 1.0)], self.engine.settings.fusion)[0].score or 1.0
        seen: set[str] = set()
        out: list[Cand] = []
        for hit in self._candidates(trace.normalized, top_n):
            if hit.source_path in seen:
                continue
            seen.add(hit.source_path)
            try:
                uri = uri_of_source(hit.source_path)
            except Exception:  # a name that is not a valid URI name (made outside Aries): not a hit
                continue
            if target is not None and not uri.is_within(target):
                continue
            key, level = text_of(uri), level_of(uri)
            if flt is not None and not flt.admits(uri, key, level, navigation=all_levels and level != "L2"):
                continue
            out.append(Cand(uri, key, level, parent_of(uri), min(1.0, hit.score / perfect), hit))
        trace.timings["retrieve_ms"] = _ms(started)
        return out

    def _finish(self, trace: Trace, hits: list[ContextHit], started: float, nodes: int, depth: int) -> RetrievalResult:
        trace.budget_used = {"ms": _ms(started), "nodes": nodes, "depth": depth}
        trace.hits = [{"uri": h.uri, "score": h.score, "level": h.level, "handle": h.handle} for h in hits]
        trace.timings["total_ms"] = _ms(started)
        self.traces.record(trace)
        return RetrievalResult(hits=hits, trace=trace)

    def _hit(self, cand: Cand, score: float) -> ContextHit:
        snippet = neutralize(" ".join(cand.hit.text.split()), single_line=True)[:SNIPPET_CHARS]
        handle = cand.hit.handle
        return ContextHit(uri=cand.key, score=round(score, 6), snippet=snippet, handle=handle, level=cand.level)

    def _factor(self, cand: Cand, abstract_dirs: set[str]) -> float:
        return rerank_factor(self.settings.reranker, cand.level, cand.uri.name, text_of(cand.directory), abstract_dirs)

    # -- find ------------------------------------------------------------------------------
    def find(
        self,
        query: str,
        target_uri: AxiomUri | str | None = None,
        limit: int = 10,
        score_threshold: float | None = None,
        filter: SearchFilter | None = None,  # noqa: A002 - the spec's name
        budget: Budget | None = None,
    ) -> RetrievalResult:
        """The flat ranked lookup: the best chunk of each file, reranked, at most ``limit``."""
        self._warm_up()
        started = time.perf_counter()
        budget = budget or Budget()
        target = _target(target_uri)
        trace = self._start("find", query, target, limit, budget)
        trace.filter = asdict(filter) if filter else {}
        cands = self._collect(trace, target, filter, limit, all_levels=False)
        abstract_dirs = {text_of(c.directory) for c in cands if c.level == "L0"}
        base = len(target.segments) if target is not None else 0
        scored: list[tuple[float, Cand]] = []
        nodes = deepest = 0
        stop, cut = "exhausted", False
        for cand in cands:
            if _ms(started) >= budget.max_ms:
                stop = "max_ms"
                break
            if nodes >= budget.max_nodes:
                stop = "max_nodes"
                break
            nodes += 1
            depth = len(cand.directory.segments) - base
            if depth > budget.max_depth:
                cut = True
                continue
            deepest = max(deepest, depth)
            score = cand.score * self._factor(cand, abstract_dirs)
            if score_threshold is None or score >= score_threshold:
                scored.append((score, cand))
        if stop == "exhausted" and cut:
            stop = "max_depth"
        scored.sort(key=lambda item: order_key(item[0], item[1].key))
        if len(scored) > limit and stop == "exhausted":
            stop = "limit"
        trace.stop_reason = stop
        hits = [self._hit(cand, score) for score, cand in scored[:limit]]
        return self._finish(trace, hits, started, nodes, deepest)

    # -- search ----------------------------------------------------------------------------
    def search(
        self,
        query: str,
        target_uri: AxiomUri | str | None = None,
        session: ContextSession | str | None = None,
        limit: int = 10,
        score_threshold: float | None = None,
        filter: SearchFilter | None = None,  # noqa: A002 - the spec's name
        budget: Budget | None = None,
    ) -> RetrievalResult:
        """Directory-aware recursive retrieval (see the module docstring); L2 hits only."""
        self._warm_up()
        started = time.perf_counter()
        budget = budget or Budget()
        target = _target(target_uri)
        trace = self._start("search", query, target, limit, budget)
        trace.filter = asdict(filter) if filter else {}
        if session is not None:
            trace.expansion = self._session_terms(session, trace.normalized)
            if trace.expansion:
                trace.normalized = f"{trace.normalized} {' '.join(trace.expansion)}"
        cands = self._collect(trace, target, filter, limit, all_levels=True)
        walk_started = time.perf_counter()
        dirs = directories(cands, target)
        abstract_dirs = {text_of(c.directory) for c in cands if c.level == "L0"}
        walk = _Walk(
            dirs,
            budget,
            limit,
            score_threshold,
            factor=lambda cand: self._factor(cand, abstract_dirs),
            boost=DIR_BOOST if self.settings.reranker != "off" else 1.0,
        )
        walk.start(trace, target)
        trace.stop_reason = walk.run(trace, started)
        trace.timings["walk_ms"] = _ms(walk_started)
        walk.collected.sort(key=lambda item: order_key(item[0], item[1].key))
        hits = [self._hit(cand, score) for score, cand in walk.collected[:limit]]
        return self._finish(trace, hits, started, walk.nodes, walk.deepest)

    def _session_terms(self, session: ContextSession | str, normalized: str) -> list[str]:
        from services.context.sessions import SessionStore
        from services.retrieval.store_lexical import stopwords

        if isinstance(session, str):
            session = SessionStore(self.tree.root).load(session)
        messages = [m for m in session.messages() if m.role in ("user", "assistant")][-SESSION_MESSAGES:]
        stop = stopwords()
        present = set(normalized.split())
        counts: Counter[str] = Counter()
        order: dict[str, int] = {}
        for message in messages:
            for word in message.content.split():
                term = fold("".join(ch for ch in word if ch.isalnum()))
                if len(term) < 3 or term.isdigit() or term in stop or term in present:
                    continue
                counts[term] += 1
                order.setdefault(term, len(order))
        ranked = sorted(counts, key=lambda term: (-counts[term], order[term]))
        return ranked[:SESSION_TERMS]

    # -- traces ----------------------------------------------------------------------------
    def trace(self, trace_id: str) -> Trace:
        return self.traces.get(trace_id)

    def recent_traces(self, limit: int = 20) -> list[Trace]:
        return self.traces.recent(limit)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


class _Walk:
    """One directory-aware walk of :meth:`ContextRetriever.search`: the start points, the heap of
    directories to visit (best priority first), the hits collected and the budget spent."""

    def __init__(
        self,
        dirs: Dirs,
        budget: Budget,
        limit: int,
        score_threshold: float | None,
        *,
        factor: Callable[[Cand], float],
        boost: float,
    ) -> None:
        self.dirs = dirs
        self.budget = budget
        self.limit = limit
        self.score_threshold = score_threshold
        self.factor = factor  # the reranker's factor of a candidate
        self.boost = boost
        self.heap: list[tuple[float, str, int, float]] = []  # (-priority, dir key, depth, priority)
        self.collected: list[tuple[float, Cand]] = []
        self.visited: set[str] = set()
        self.nodes = self.deepest = 0
        self.cut = False  # children were left out for max_depth

    def start(self, trace: Trace, target: AxiomUri | None) -> None:
        """Queue the :data:`START_POINTS` directories with the best tier scores, then the target (or
        each scope root), so nothing is unreachable."""
        dirs = self.dirs
        ranked_tiers = sorted(dirs.tier, key=lambda key: (-dirs.tier[key], key))
        chosen: list[AxiomUri] = []
        for key in ranked_tiers:
            if len(chosen) == START_POINTS:
                break
            if not any(dirs.uris[key].is_within(done) for done in chosen):
                chosen.append(dirs.uris[key])
        scopes = [AxiomUri.root(s) for s in CORE_SCOPES if f"axiom://{s}" in dirs.uris]
        roots = [target] if target is not None else scopes
        for uri in [*chosen, *(r for r in roots if str(r) in dirs.uris and r not in chosen)]:
            key = str(uri)
            priority = dirs.own(key)
            trace.start_points.append({"uri": key, "score": round(priority, 6), "tier": dirs.tier.get(key, 0.0)})
            heapq.heappush(self.heap, (-priority, key, 0, priority))

    def run(self, trace: Trace, started: float) -> str:
        """Visit directories best first until the heap is empty or a budget stops it; the stop reason."""
        stop = "exhausted"
        while self.heap:
            if _ms(started) >= self.budget.max_ms:
                stop = "max_ms"
                break
            if self.nodes >= self.budget.max_nodes:
                stop = "max_nodes"
                break
            if self._beaten():
                stop = "limit"
                break
            _neg, key, depth, priority = heapq.heappop(self.heap)
            if key in self.visited:
                continue
            self.visited.add(key)
            self.nodes += 1
            self.deepest = max(self.deepest, depth)
            trace.steps.append(self._visit(key, depth, priority))
        if stop == "exhausted" and self.cut:
            stop = "max_depth"
        return stop

    def _beaten(self) -> bool:
        """``limit`` hits are held and no queued directory can beat the last of them."""
        if len(self.collected) < self.limit:
            return False
        self.collected.sort(key=lambda item: order_key(item[0], item[1].key))
        floor = self.collected[self.limit - 1][0]
        return all(self._bound(key, prio) < floor for _neg, key, _d, prio in self.heap)

    def _bound(self, key: str, priority: float) -> float:
        """The best score a file below directory ``key`` could get (from its subtree's best scores)."""
        reach = max(priority, self.dirs.best.get(key, 0.0))
        return (FILE_WEIGHT * self.dirs.best_l2.get(key, 0.0) + (1 - FILE_WEIGHT) * reach) * self.boost

    def _visit(self, key: str, depth: int, priority: float) -> dict[str, Any]:
        """Collect the L2 files of directory ``key`` and queue its children; the trace's step."""
        dirs = self.dirs
        found: list[str] = []
        for cand in dirs.files.get(key, []):
            score = (FILE_WEIGHT * cand.score + (1 - FILE_WEIGHT) * priority) * self.factor(cand)
            if self.score_threshold is None or score >= self.score_threshold:
                self.collected.append((score, cand))
                found.append(cand.key)
        kept: list[dict[str, Any]] = []
        dropped: list[str] = []
        for child_key in sorted(dirs.children.get(key, {})):
            if child_key in self.visited:
                continue
            if depth + 1 > self.budget.max_depth:
                dropped.append(child_key)
                continue
            child_priority = ALPHA * dirs.own(child_key) + (1 - ALPHA) * priority
            kept.append({"uri": child_key, "score": round(child_priority, 6)})
            heapq.heappush(self.heap, (-child_priority, child_key, depth + 1, child_priority))
        self.cut = self.cut or bool(dropped)
        step: dict[str, Any] = {
            "directory": key,
            "depth": depth,
            "score": round(priority, 6),
            "tier": round(dirs.tier.get(key, 0.0), 6),
            "hits": found,
            "children": kept,
        }
        if dropped:
            step["cut_by_depth"] = dropped
        return step


def _target(target_uri: AxiomUri | str | None) -> AxiomUri | None:
    if target_uri is None:
        return None
    uri = parse_uri(target_uri) if isinstance(target_uri, str) else target_uri
    if uri.scope not in CORE_SCOPES:
        raise NotContextSource(f"{uri} is in the internal scope {uri.scope}, which is never indexed")
    return uri
