"""Warm query latency and its stages, two source trees side by side on the same index, taking turns.

    .venv/bin/python bench/query_compare.py --old /tmp/aries-base [--new .] [--dataset DIR] [--limit-docs N]
                                            [--embedder sentence-transformers] [--rounds 4] [--cache DIR]
    .venv/bin/python bench/query_compare.py --old /tmp/aries-base --scale-home HOME [--embedder hash]

Builds (or reuses from ``--cache``) the index of a BEIR collection (SciFact by default) once, with
the ``--new`` tree, copies it into a workspace per tree, and then runs ``--rounds`` rounds in which
each tree, in a fresh process of its own (``PYTHONPATH`` = that tree), answers every query once
warm through ``RetrievalEngine.query(text, k=10)`` — embed, BM25, dense, fusion, chunk reads, the
audit row — after a warm-up pass.  The trees take turns round by round, so a shared machine's load
weighs on both alike; the p50 / p95 of all rounds are reported with their ratio (new / old).

Each process also times the stages one by one on the same queries (what a query is made of):
``embed`` (``embed_query``), ``bm25`` and ``dense`` (under the store lock), ``fuse``, ``chunks``
(reading the hits' rows) and ``audit`` (recording the row: a synchronous SQLite insert in the old
tree, an append to the pending file and a queue in the new one).  A git worktree of the base commit
is the usual ``--old``: ``git worktree add --detach /tmp/aries-base d9c609b``.

``--scale-home HOME`` compares on an index that ``bench/scale.py --keep`` built instead (``HOME``
is its ``home-<size>-<embedder>`` folder: workspace ``scale``, index ``corpus``, and its queries
in ``queries-<size>.json`` beside it): each tree gets a copy of the index *as that ingest left it*,
and each tree opens its copy once before the clock starts (a tree whose Tantivy layout differs
rebuilds it from the manifest there, as a user's upgrade does).  ``--new-scale-home HOME2`` gives
the new tree the index its own ingest built of the same corpus (before / after, ingest included).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, statistics, sys, time
from pathlib import Path
from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.fusion import fuse
from services.workspace.manager import Workspace

root, queries_file, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
queries = json.loads(queries_file.read_text())
workspace = Workspace(root, "bench")
workspace.ensure_layout()
settings = RetrievalSettings.from_env()
with RetrievalEngine(workspace, settings) as engine:
    indexes = getattr(engine, "indexes", None)
    store = indexes.store(name) if indexes else engine._store(name)
    embedder = indexes.check_model(store) if indexes else engine._check_model(store)
    manifest = getattr(store, "manifest", store)
    for text in queries:
        engine.query(text, k=10, index=name)
    total, stages = [], {k: [] for k in ("embed", "bm25", "dense", "fuse", "chunks", "audit")}
    for text in queries:
        began = time.perf_counter()
        result = engine.query(text, k=10, index=name)
        total.append((time.perf_counter() - began) * 1000)
    def timed(stage, call):
        began = time.perf_counter()
        value = call()
        stages[stage].append(time.perf_counter() - began)
        return value
    for text in queries:
        vector = timed("embed", lambda: embedder.embed_query(text))
        with store.reading():
            bm25 = timed("bm25", lambda: store.bm25(text, 200))
            dense = timed("dense", lambda: store.dense(vector, 200))
        fused = timed("fuse", lambda: fuse(bm25, dense, settings.fusion))
        timed("chunks", lambda: manifest.get_chunks([f.chunk_id for f in fused[:20]]))
        rows = [hit.to_dict(with_text=False) for hit in result.hits]
        record = engine.audit.record
        timed("audit", lambda: record(query=text, index=name, embedding_model="b", params={}, hits=rows))
print(json.dumps({"total": total, "stages": {k: [v * 1000 for v in vs] for k, vs in stages.items()}}))
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]


def rounds(
    args: argparse.Namespace, trees: dict[str, Path], roots: dict[str, Path], name: str, queries: Path, work: Path
) -> dict[str, Any] | None:
    """``args.rounds`` rounds, the trees taking turns, each in a fresh process: the summary (or None)."""
    total: dict[str, list[float]] = {label: [] for label in trees}
    stages: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
    loads: list[float] = []
    for number in range(args.rounds):
        for label, tree in trees.items() if number % 2 == 0 else reversed(trees.items()):
            loads.append(os.getloadavg()[0])
            env = dict(os.environ, PYTHONPATH=str(tree), ARIES_HOME=str(work / "home"))
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(roots[label]), str(queries), name],
                env=env,
                capture_output=True,
                text=True,
                cwd=tree,
            )
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return None
            result = json.loads(done.stdout.strip().splitlines()[-1])
            total[label] += result["total"]
            for stage, values in result["stages"].items():
                stages[label].setdefault(stage, []).extend(values)
            print(
                f"round {number + 1} {label}: p50 {statistics.median(result['total']):.2f} ms, "
                f"p95 {_pct(result['total'], 0.95):.2f} ms (load {loads[-1]:.1f})",
                file=sys.stderr,
            )
    summary: dict[str, Any] = {
        "rounds": args.rounds,
        "embedder": args.embedder,
        "load": [round(min(loads), 2), round(max(loads), 2)],
    }
    for label in trees:
        summary[label] = {
            "p50": round(statistics.median(total[label]), 2),
            "p95": round(_pct(total[label], 0.95), 2),
            "stages_p50": {stage: round(statistics.median(values), 3) for stage, values in stages[label].items()},
        }
    summary["ratio_p50"] = round(summary["new"]["p50"] / summary["old"]["p50"], 3)
    summary["ratio_p95"] = round(summary["new"]["p95"] / summary["old"]["p95"], 3)
    return summary


def report(summary: dict[str, Any]) -> None:
    print(json.dumps(summary, indent=2))
    print("\n| stage (p50 ms) | old | new | new / old |\n| --- | --- | --- | --- |")
    old, new = summary["old"]["stages_p50"], summary["new"]["stages_p50"]
    for stage in new:
        ratio = f"{new[stage] / old[stage]:.2f}" if old.get(stage) else "—"
        print(f"| {stage} | {old.get(stage)} | {new[stage]} | {ratio} |")
    print(
        f"| **query, whole** (p50 / p95) | {summary['old']['p50']} / {summary['old']['p95']} "
        f"| {summary['new']['p50']} / {summary['new']['p95']} | {summary['ratio_p50']} / {summary['ratio_p95']} |"
    )


def compare_scale(args: argparse.Namespace) -> int:
    """The comparison on an index of ``bench/scale.py --keep`` (see the module docstring)."""
    home: Path = args.scale_home.resolve()
    size = home.name.split("-")[1]
    source = home / "workspaces" / "scale" / "indexes" / "corpus"
    pairs = json.loads((home.parent / f"queries-{size}.json").read_text(encoding="utf-8"))
    os.environ["AXIOMME_EMBEDDER"] = args.embedder
    work = Path(tempfile.mkdtemp(prefix="aries-query-compare-", dir=args.cache))
    queries = work / "queries.json"
    queries.write_text(json.dumps([text for text, _ in pairs]))
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    roots: dict[str, Path] = {}
    sources = {"old": source, "new": source}
    if args.new_scale_home:  # each tree on the index its own ingest built
        sources["new"] = args.new_scale_home.resolve() / "workspaces" / "scale" / "indexes" / "corpus"
    for label in trees:
        root = work / f"ws-{label}"
        (root / "indexes").mkdir(parents=True)
        shutil.copytree(sources[label], root / "indexes" / "corpus")
        roots[label] = root
    try:
        summary = rounds(args, trees, roots, "corpus", queries, work)
        if summary is None:
            return 1
        summary.update(scale_home=str(home), new_scale_home=str(sources["new"]), queries=len(pairs))
        report(summary)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", type=Path, required=True, help="the source tree to compare with (a worktree)")
    parser.add_argument("--new", type=Path, default=REPO)
    parser.add_argument("--dataset", type=Path, default=REPO.parent / "shared" / "eval" / "scifact")
    parser.add_argument("--limit-docs", type=int)
    parser.add_argument("--embedder", default="sentence-transformers")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--cache", type=Path, help="where the index is built once (default: a temporary folder)")
    parser.add_argument("--scale-home", type=Path, help="compare on the index of a bench/scale.py --keep run")
    parser.add_argument(
        "--new-scale-home", type=Path, help="the new tree's own index of the same corpus (default: --scale-home's)"
    )
    args = parser.parse_args()
    if args.scale_home:
        return compare_scale(args)

    os.environ["AXIOMME_EMBEDDER"] = args.embedder
    sys.path.insert(0, str(args.new))
    from services.retrieval.chunking import ChunkConfig
    from services.retrieval.embedders import cache_tag, create_embedder, preload
    from services.retrieval.evaluation import build_index, index_key, load_beir, select_subset
    from services.retrieval.settings import RetrievalSettings

    embedder = create_embedder(RetrievalSettings.from_env())
    preload(embedder)
    data = load_beir(args.dataset)
    if args.limit_docs:
        data = select_subset(data, args.limit_docs)
    work = Path(tempfile.mkdtemp(prefix="aries-query-compare-"))
    cache = args.cache or work / "cache"
    directory = cache / index_key(data, cache_tag(embedder), ChunkConfig())
    began = time.perf_counter()
    store = build_index(data, directory, embedder)
    chunks = store.manifest.counts()[1]
    store.close()
    elapsed = time.perf_counter() - began
    print(f"index: {len(data.corpus)} documents, {chunks} chunks ({elapsed:.0f} s)", file=sys.stderr)
    queries = work / "queries.json"
    queries.write_text(json.dumps(list(data.queries.values())))
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    roots: dict[str, Path] = {}
    for label in trees:
        root = work / f"ws-{label}"
        (root / "indexes").mkdir(parents=True)
        shutil.copytree(directory, root / "indexes" / "scifact")
        roots[label] = root
    summary = rounds(args, trees, roots, "scifact", queries, work)
    if summary is None:
        return 1
    summary.update(documents=len(data.corpus), chunks=chunks, queries=len(data.queries))
    report(summary)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
