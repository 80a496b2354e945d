"""A warm query taken apart, stage by stage, in one process, on an index that ``bench/scale.py --keep`` built.

    PYTHONPATH=TREE .venv/bin/python bench/query_stages.py HOME [--queries 200]

``HOME`` is a ``home-<size>-<embedder>`` folder of ``bench/scale.py --keep`` (workspace ``scale``,
index ``corpus``; its queries in ``queries-<size>.json`` beside it).  After a warm-up pass, each
query is answered whole (``engine.query``) and then part by part under the store lock: query
analysis, Tantivy's ``reload()``, the Tantivy search of 200 hits, ``store.bm25`` whole (search and
chunk ids), the query embedding, the Chroma search, fusion, the keyword weights (document
frequencies), the manifest rows of 20 fused hits and the keyword share of 10 hits.  p50 / p95 in
ms, with the load average.  Run it with ``PYTHONPATH`` set to another worktree to profile that
tree's code (``bench/query_compare.py`` compares two trees' whole queries in turns).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("home", type=Path)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    home: Path = args.home.resolve()
    size = home.name.split("-")[1]
    pairs = json.loads((home.parent / f"queries-{size}.json").read_text(encoding="utf-8"))
    queries = [text for text, _ in pairs][: args.queries]
    os.environ["ARIES_HOME"] = str(home)
    os.environ.setdefault("AXIOMME_EMBEDDER", "hash")  # set it for an index of another embedder

    import tantivy

    from services.retrieval import RetrievalEngine, RetrievalSettings
    from services.retrieval.fusion import fuse
    from services.retrieval.store_lexical import FIELD_BOOSTS
    from services.workspace.manager import WorkspaceManager

    workspace, _ = WorkspaceManager().open("scale")
    engine = RetrievalEngine(workspace, RetrievalSettings.from_env())
    store = engine.indexes.store("corpus")
    embedder = engine.indexes.check_model(store)
    for text in queries:
        engine.query(text, k=10, index="corpus")
    stages: dict[str, list[float]] = {}

    @contextlib.contextmanager
    def stage(name: str) -> Iterator[None]:
        began = time.perf_counter()
        yield
        stages.setdefault(name, []).append((time.perf_counter() - began) * 1000)

    for text in queries:
        with stage("query, whole"):
            engine.query(text, k=10, index="corpus")
        with stage("analysis"):
            terms = store.query_terms(text)
        with store.reading():
            index = store.lexical
            with stage("reload"):
                index.reload()
            clauses = []
            for term in terms:
                for field, boost in FIELD_BOOSTS.items():
                    query = tantivy.Query.term_query(index.schema, field, term)
                    if boost != 1.0:
                        query = tantivy.Query.boost_query(query, boost)
                    clauses.append((tantivy.Occur.Should, query))
            searcher = index.searcher()
            combined = tantivy.Query.boolean_query(clauses)
            with stage("tantivy search (200)"):
                searcher.search(combined, limit=200, count=False)
            with stage("bm25 whole (+ chunk ids)"):
                bm25 = store.bm25(text, 200)
            with stage("embed"):
                vector = embedder.embed_query(text)
            with stage("dense (200)"):
                dense = store.dense(vector, 200)
            with stage("fuse"):
                fused = fuse(bm25, dense, engine.settings.fusion)
            with stage("keyword weights"):
                store.keyword_weights(text)
            with stage("manifest rows (20)"):
                live = store.manifest.get_chunks([item.chunk_id for item in fused[:20]])
            with stage("keyword share (10)"):
                for row in list(live.values())[:10]:
                    store.terms(f"{row.chunk.context}\n{row.chunk.text}")
    files, chunks = store.manifest.counts()
    segments = store.lexical.searcher().num_segments
    print(f"{files} files, {chunks} chunks, {segments} Tantivy segments, load {os.getloadavg()[0]:.2f}")
    for name, values in stages.items():
        ordered = sorted(values)
        p95 = ordered[max(0, int(0.95 * len(ordered)) - 1)]
        print(f"{name:28s} p50 {statistics.median(ordered):8.3f}  p95 {p95:8.3f}")
    engine.close()
    workspace.close()
    return 0


if __name__ == "__main__":
    if not os.environ.get("PYTHONPATH"):  # else the tree named there
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())
