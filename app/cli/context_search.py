"""``aries context find|search|trace``: retrieval over the context index, with budgets and traces.

``find`` is the flat ranked lookup, ``search`` the directory-aware recursive one (see
:mod:`services.context.search`); both print a ranked table of URIs and the id of the trace they
wrote (``--json``: hits and trace).  ``trace`` lists recent traces, or shows one.  The settings
(``AXIOMME_RETRIEVAL_BACKEND``, ``AXIOMME_QUERY_NORMALIZER``, ``AXIOMME_RERANKER`` ...) are read
before anything is opened, so a bad value fails fast with one line.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from app.cli._common import open_session, out, print_json, safe, workspace_option

if TYPE_CHECKING:
    from services.context.search import ContextRetriever
    from services.context.search_types import RetrievalResult
    from services.context.traces import Trace


def register_search_commands(sub: Any) -> None:
    """Add find, search and trace to the ``context`` parser's sub-parsers."""
    find = sub.add_parser("find", help="flat ranked lookup over the context index (files, best chunk each)")
    _query_options(find)
    find.set_defaults(func=handle_find)
    search = sub.add_parser("search", help="directory-aware recursive retrieval, with a trace")
    _query_options(search)
    search.add_argument("--session", metavar="ID", help="expand the query with this session's recent messages")
    search.set_defaults(func=handle_search)
    trace = sub.add_parser("trace", help="list recent retrieval traces, or show one")
    workspace_option(trace)
    trace.add_argument("id", nargs="?", help="the trace to show (default: list recent ones)")
    trace.add_argument("-n", type=int, default=20, metavar="N", help="how many to list (default 20)")
    trace.add_argument("--json", action="store_true", help="print JSON")
    trace.set_defaults(func=handle_trace)


def _query_options(parser: argparse.ArgumentParser) -> None:
    workspace_option(parser)
    parser.add_argument("query", help="what to look for")
    parser.add_argument("--target", metavar="URI", help="only below this axiom:// URI")
    parser.add_argument("-n", "--limit", type=int, default=10, metavar="N", help="most hits (default 10)")
    parser.add_argument("--threshold", type=float, metavar="X", help="drop hits scoring below X (0..1)")
    parser.add_argument("--scope", help="only this scope (resources, user, agent, session)")
    parser.add_argument("--type", dest="types", action="append", metavar="EXT", help="only files ending .EXT")
    parser.add_argument("--max-ms", type=float, metavar="N", help="time budget in ms")
    parser.add_argument("--max-nodes", type=int, metavar="N", help="most directories (search) or files (find)")
    parser.add_argument("--max-depth", type=int, metavar="N", help="most levels below a start point / the target")
    parser.add_argument("--sync", action="store_true", help="bring the index up to date with the tree first")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")


@contextmanager
def _retriever(args: argparse.Namespace) -> Iterator[ContextRetriever]:
    from services.context.index import sync_index
    from services.context.search import ContextRetriever
    from services.context.settings import ContextSettings
    from services.context.tree import ContextTree
    from services.retrieval.settings import RetrievalSettings

    RetrievalSettings.from_env()  # ConfigError before anything is opened
    settings = ContextSettings.from_env()
    ephemeral = "no workspace given (-w NAME): using an empty ephemeral workspace"
    with open_session(args, announce=ephemeral) as session:
        engine = session.engine()
        retriever: ContextRetriever | None = None
        try:
            tree = ContextTree(session.workspace.paths.context)
            if getattr(args, "sync", False):
                sync_index(tree, engine)
            retriever = ContextRetriever(tree, engine, settings=settings)
            yield retriever
        finally:
            if retriever is not None:
                retriever.close()


def _budget(args: argparse.Namespace) -> Any:
    from services.context.traces import Budget

    given = {key: getattr(args, key) for key in ("max_ms", "max_nodes", "max_depth") if getattr(args, key) is not None}
    return Budget(**given)


def _filter(args: argparse.Namespace) -> Any:
    from services.context.search_types import SearchFilter

    if args.scope is None and not args.types:
        return None
    types = tuple(t.lower().lstrip(".") for t in args.types or ())
    return SearchFilter(scope=args.scope, file_types=types)


def handle_find(args: argparse.Namespace) -> int:
    """Flat ranked lookup: one row per file (its best chunk)."""
    budget, flt = _budget(args), _filter(args)
    with _retriever(args) as retriever:
        result = _logged(
            retriever,
            "find",
            args.target,
            lambda: retriever.find(
                args.query, args.target, limit=args.limit, score_threshold=args.threshold, filter=flt, budget=budget
            ),
        )
    return _print_result(result, args.json)


def _logged(retriever: Any, kind: str, target: Any, run: Any) -> Any:
    """The call, as one row of the workspace's context request log."""
    from services.audit.db import AUDIT_FILE
    from services.context.requests import log_retrieval

    return log_retrieval(retriever.engine.workspace.root / AUDIT_FILE, kind, target, run)


def handle_search(args: argparse.Namespace) -> int:
    """Directory-aware recursive retrieval from the best L0/L1 start points."""
    budget, flt = _budget(args), _filter(args)
    with _retriever(args) as retriever:
        result = _logged(
            retriever,
            "search",
            args.target,
            lambda: retriever.search(
                args.query,
                args.target,
                session=args.session,
                limit=args.limit,
                score_threshold=args.threshold,
                filter=flt,
                budget=budget,
            ),
        )
    return _print_result(result, args.json)


def handle_trace(args: argparse.Namespace) -> int:
    """Recent traces (newest first), or one trace: start points, steps, stop reason."""
    with _retriever(args) as retriever:
        if args.id:
            trace = retriever.trace(args.id)
            if args.json:
                print_json(trace.to_dict())
            else:
                _print_trace(trace)
            return 0
        traces = retriever.recent_traces(args.n)
    if args.json:
        print_json([t.to_dict() for t in traces])
        return 0
    if not traces:
        out("no traces yet; run: aries context find|search QUERY")
        return 0
    out(f"{'id':<12}  {'when':<24}  {'kind':<6}  {'stop':<9}  {'hits':>4}  query")
    for t in traces:
        out(f"{t.id:<12}  {t.ts:<24}  {t.kind:<6}  {t.stop_reason:<9}  {len(t.hits):>4}  {t.query}", single_line=True)
    return 0


def _print_result(result: RetrievalResult, as_json: bool) -> int:
    if as_json:
        print_json(result.to_dict())
        return 0
    trace = result.trace
    if not result.hits:
        out("no hits")
    else:
        out(f"{'#':>3}  {'score':>7}  {'lvl':<3}  uri")
        for rank, hit in enumerate(result.hits, start=1):
            out(f"{rank:>3}  {hit.score:>7.4f}  {hit.level:<3}  {hit.uri}", single_line=True)
            out(f"{'':>3}  {'':>7}  {'':<3}  {safe(hit.snippet, single_line=True)[:100]}")
    used = trace.budget_used
    out(
        f"trace {trace.id}: stop {trace.stop_reason}, {used.get('nodes', 0)} nodes, "
        f"{used.get('ms', 0):.1f} ms (aries context trace {trace.id})"
    )
    return 0


def _print_trace(trace: Trace) -> None:
    out(f"trace {trace.id}  {trace.kind}  {trace.ts}")
    out(f"query: {trace.query}", single_line=True)
    out(f"normalized: {trace.normalized}", single_line=True)
    if trace.expansion:
        out(f"session terms: {' '.join(trace.expansion)}", single_line=True)
    if trace.target:
        out(f"target: {trace.target}", single_line=True)
    out(f"settings: {trace.settings}  budget: {trace.budget}")
    out("start points:")
    for point in trace.start_points:
        out(f"  {point['score']:.4f}  {point['uri']}", single_line=True)
    out("steps:")
    for number, step in enumerate(trace.steps, start=1):
        out(
            f"  {number:>3}. depth {step['depth']}  {step['score']:.4f}  {safe(step['directory'], single_line=True)}  "
            f"({len(step['hits'])} hits, {len(step['children'])} children kept)"
        )
        for child in step["children"]:
            out(f"         → {child['score']:.4f}  {child['uri']}", single_line=True)
    used = trace.budget_used
    out(f"budget used: {used.get('ms', 0)} ms, {used.get('nodes', 0)} nodes, depth {used.get('depth', 0)}")
    out(f"stop reason: {trace.stop_reason}")
    out(f"timings: {trace.timings}")
    out(f"hits: {len(trace.hits)}")
    for hit in trace.hits:
        out(f"  {hit['score']:.4f}  {hit['level']}  {hit['uri']}", single_line=True)
