"""Relevance before the cut (issue 32, item 5): what the engine returns, before and after, on SciFact.

    .venv/bin/python bench/relevance_cut.py [--embedders hash,semantic-lite,sentence-transformers]
        [--limit-docs 400] [--dataset ../shared/eval/scifact] [--json]

The quality harness (``aries eval rag``) scores the fused ranking to depth 100; it does not see
the cut at ``k`` (nor the relevance threshold), so it cannot move with this change.  This bench
takes the harness's own candidates (BM25 and the exact dense ranking, ``top_n`` 200, fused with
the default RRF) and scores what a query returns at ``k``:

* ``cut@k nDCG@10``: the document-level nDCG@10 of the ``k`` hits — ``before``: the first ``k``
  fused (the old cut), ``after``: :func:`services.retrieval.cut.cut` with the default threshold
  (the relevant passages first);
* ``cut ms``: the time of the cut itself (the keyword screen, reading the candidates' chunks and
  their keyword share), p50 and p95 over the questions;
* ``kept``: what the answer and the turn loop keep of those ``k`` (the threshold's filter) — the
  mean number of passages kept, the share of questions with nothing kept ("nothing matches"),
  and the share of questions whose kept passages include a judged-relevant document.

Same input, same output: the index is built afresh in a temporary folder, the dense side is exact.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

if TYPE_CHECKING:
    from services.retrieval.models import Hit
    from services.retrieval.relevance import Relevance


def doc_ranking(hits: list[Hit], doc_of: dict[str, str]) -> list[str]:
    """Documents in the order of their best hit."""
    return list(dict.fromkeys(doc_of[hit.chunk_id] for hit in hits if hit.chunk_id in doc_of))


def score_cut(
    hits: list[Hit], judged: dict[str, int], doc_of: dict[str, str], relevance: Relevance
) -> dict[str, float]:
    """nDCG@10 of the cut, and what the threshold keeps of it."""
    from services.retrieval.evaluation import score_ranking

    kept = [hit for hit in hits if relevance.admits(hit.to_dict(with_text=False))]
    return {
        "ndcg@10": score_ranking(doc_ranking(hits, doc_of), judged)["ndcg@10"],
        "kept": float(len(kept)),
        "nothing kept": 0.0 if kept else 1.0,
        "judged doc kept": 1.0 if set(doc_ranking(kept, doc_of)) & set(judged) else 0.0,
    }


def measure(name: str, dataset: Path, limit_docs: int, ks: tuple[int, ...]) -> dict[str, Any]:
    from services.retrieval.chunking import ChunkConfig
    from services.retrieval.cut import cut, keyword_screen, live_reader
    from services.retrieval.embedders import create_embedder
    from services.retrieval.evaluation import ExactDense, build_index, load_beir, select_subset
    from services.retrieval.fusion import fuse
    from services.retrieval.relevance import Relevance
    from services.retrieval.settings import RetrievalSettings

    settings = RetrievalSettings(embedder=name)
    embedder = create_embedder(settings)
    relevance = Relevance()
    top_n = settings.top_n
    data = select_subset(load_beir(dataset), limit_docs)
    with tempfile.TemporaryDirectory() as folder:
        store = build_index(data, Path(folder) / "index", embedder, ChunkConfig())
        try:
            doc_of = dict(store.manifest.query("SELECT chunk_id, source_path FROM chunks"))
            exact = ExactDense(store)
            qids = list(data.queries)
            vectors = embedder.embed([data.queries[qid] for qid in qids])
            totals: dict[str, float] = {}
            timings: dict[str, list[float]] = {}
            for qid, vector in zip(qids, vectors, strict=True):
                text = data.queries[qid]
                with store.reading():
                    fused = fuse(store.bm25(text, top_n), exact.search(vector, top_n), settings.fusion)
                    weights = store.keyword_weights(text)
                    read = live_reader(store, "eval", weights)
                    for k in ks:
                        for when, rule in (("before", None), ("after", relevance)):
                            began = time.perf_counter()
                            screen = keyword_screen(store, weights, relevance.min_keyword) if rule else None
                            hits = cut(fused, k, read, rule, screen)
                            timings.setdefault(f"k{k} {when}", []).append((time.perf_counter() - began) * 1000)
                            scores = score_cut(hits, data.qrels[qid], doc_of, relevance)
                            for key, value in scores.items():
                                label = f"k{k} {when} {key}"
                                totals[label] = totals.get(label, 0.0) + value
        finally:
            store.close()
    means = {key: round(value / len(qids), 4) for key, value in totals.items()}
    for label, values in timings.items():
        ordered = sorted(values)
        means[f"{label} cut ms p50"] = round(ordered[len(ordered) // 2], 2)
        means[f"{label} cut ms p95"] = round(ordered[max(0, round(0.95 * len(ordered)) - 1)], 2)
    return {"embedder": name, "queries": len(qids)} | means


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedders", default="hash,semantic-lite")
    parser.add_argument("--limit-docs", type=int, default=400)
    parser.add_argument("--dataset", type=Path, default=REPO.parent / "shared" / "eval" / "scifact")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not (args.dataset / "corpus.jsonl").is_file():
        print(f"relevance_cut: no BEIR collection at {args.dataset} (pass --dataset)", file=sys.stderr)
        return 2
    results = [measure(name, args.dataset, args.limit_docs, (5, 10)) for name in args.embedders.split(",")]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for result in results:
        print(f"{result['embedder']} ({result['queries']} questions, {args.limit_docs} documents)")
        for key, value in result.items():
            if key not in ("embedder", "queries"):
                print(f"  {key:32} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
