"""Retrieval quality on all SciFact queries, and warm hybrid query latency through the engine.

    .venv/bin/python bench/retrieval_query.py [--dataset DIR] [--cache DIR] [--limit-docs N] [--embedder NAME]

1. Builds (or reuses from the eval cache: ``$ARIES_HOME/cache/eval`` or ``--cache``) the index of
   the collection, exactly as ``aries eval rag`` does, and prints nDCG@10, Recall@10/100,
   MRR@10 and P@10 for bm25, dense and hybrid (document level).
2. Copies that index into a temporary workspace and times ``RetrievalEngine.query(text, k=10)``
   for every query, after one warm-up pass: p50/p95/mean/max in ms (target p95 ≤ 50 ms).
   Each query embeds the text, searches Tantivy and Chroma, fuses, reads the chunks and
   writes the audit row.
3. Prints the peak RSS of the process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=REPO.parent / "shared" / "eval" / "scifact")
    parser.add_argument("--cache", type=Path, help="eval index cache (default: $ARIES_HOME/cache/eval)")
    parser.add_argument("--limit-docs", type=int)
    parser.add_argument("--embedder", default="sentence-transformers")
    args = parser.parse_args()

    os.environ["AXIOMME_EMBEDDER"] = args.embedder
    from services.retrieval import RetrievalEngine, RetrievalSettings
    from services.retrieval.chunking import ChunkConfig
    from services.retrieval.embedders import create_embedder, preload
    from services.retrieval.evaluation import (
        build_index,
        default_cache_dir,
        index_key,
        load_beir,
        run_queries,
        select_subset,
    )
    from services.workspace.manager import Workspace

    settings = RetrievalSettings.from_env()
    embedder = create_embedder(settings)
    preload(embedder)
    data = load_beir(args.dataset)
    if args.limit_docs:
        data = select_subset(data, args.limit_docs)
    cache = args.cache or default_cache_dir()
    directory = cache / index_key(data, embedder.model_id, ChunkConfig())
    started = time.perf_counter()
    store = build_index(
        data, directory, embedder, progress=lambda d, n: print(f"\rindexing {d}/{n}", end="", file=sys.stderr)
    )
    print(f"\rindex ready in {time.perf_counter() - started:.1f} s ({directory})", file=sys.stderr)
    quality = run_queries(store, data, embedder, settings.fusion, top_n=max(settings.top_n, 200))
    files, chunks = store.manifest.counts()
    store.close()

    with tempfile.TemporaryDirectory(prefix="aries-bench-query-") as tmp:
        workspace = Workspace(Path(tmp) / "ws", "bench")
        workspace.ensure_layout()
        shutil.copytree(directory, workspace.indexes_dir / "scifact")
        queries = list(data.queries.values())
        with RetrievalEngine(workspace, settings, embedder=embedder) as engine:
            engine.index_use("scifact")
            for text in queries:  # warm-up pass
                engine.query(text, k=10)
            timings = []
            for text in queries:
                began = time.perf_counter()
                engine.query(text, k=10)
                timings.append((time.perf_counter() - began) * 1000)
    timings.sort()
    p95_index = max(0, int(round(0.95 * len(timings))) - 1)
    result = {
        "embedder": embedder.model_id,
        "documents": len(data.corpus),
        "files": files,
        "chunks": chunks,
        "fusion": {"method": settings.fusion.method, "rrf_k": settings.fusion.rrf_k, "top_n": settings.top_n},
        "quality": quality,
        "latency_ms": {
            "queries": len(timings),
            "p50": round(statistics.median(timings), 2),
            "p95": round(timings[p95_index], 2),
            "mean": round(statistics.fmean(timings), 2),
            "max": round(timings[-1], 2),
        },
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
