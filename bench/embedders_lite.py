"""semantic-lite beside hash and all-MiniLM-L6-v2 (torch): retrieval quality and encode speed.

    .venv/bin/python bench/embedders_lite.py [--embedders hash,semantic-lite,sentence-transformers]
        [--limit-docs N] [--dataset DIR] [--run-file FILE] [--gate-profile NAME]

For each embedder, in a fresh process of its own (so one's imports and threads do not slow the next):

1. quality: ``evaluate_run`` — the pipeline of ``aries eval rag`` (chunk, embed, Tantivy + Chroma,
   document-level nDCG@10 of bm25, dense and hybrid), index built from scratch in a temporary cache;
2. encode speed: ``embed`` over every corpus text (title + text, batches of 32) in documents/s,
   and ``embed_query`` over every query (p50/p95 ms), after a warm-up (the model loaded).

Each run carries its run environment (``embedding_provider``, ``embedding_strict_error``, see
``services.retrieval.eval_run``); ``--run-file`` writes them all as JSON, ``--gate-profile`` gates them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(round(q * len(ordered))) - 1)]


def run_one(name: str, dataset: Path, limit_docs: int | None, gate_profile: str | None) -> dict[str, Any]:
    os.environ["AXIOMME_EMBEDDER"] = name
    from services.retrieval.embedders import create_embedder, preload
    from services.retrieval.eval_run import evaluate_run
    from services.retrieval.evaluation import load_beir, select_subset
    from services.retrieval.settings import RetrievalSettings

    settings = RetrievalSettings.from_env()
    embedder = create_embedder(settings)
    preload(embedder)
    data = load_beir(dataset)
    if limit_docs:
        data = select_subset(data, limit_docs)
    texts = [f"{title}\n{text}".strip() for title, text in data.corpus.values()]
    queries = list(data.queries.values())
    embedder.embed(texts[:32])  # warm-up
    began = time.perf_counter()
    for start in range(0, len(texts), 32):
        embedder.embed(texts[start : start + 32])
    encode_s = time.perf_counter() - began
    timings: list[float] = []
    for text in queries:
        start_q = time.perf_counter()
        embedder.embed_query(text)
        timings.append((time.perf_counter() - start_q) * 1000)
    with tempfile.TemporaryDirectory(prefix="bench-lite-") as cache:
        began = time.perf_counter()
        run = evaluate_run(
            dataset,
            settings=settings,
            embedder=embedder,
            limit_docs=limit_docs,
            cache_dir=Path(cache),
            gate_profile=gate_profile,
        )
        eval_s = time.perf_counter() - began
    return {
        "embedder": name,
        "model_id": embedder.model_id,
        "documents": len(data.corpus),
        "queries": run["queries"],
        "ndcg@10": {m: v["ndcg@10"] for m, v in run["methods"].items()},
        "recall@100": {m: v["recall@100"] for m, v in run["methods"].items()},
        "encode_docs_per_s": round(len(texts) / encode_s, 1),
        "query_encode_ms": {"p50": round(statistics.median(timings), 2), "p95": round(_percentile(timings, 0.95), 2)},
        "index_and_eval_s": round(eval_s, 1),
        "environment": run["environment"],
        "gate": run.get("gate"),
        "ok": run["ok"],
        "load_average": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedders", default="hash,semantic-lite,sentence-transformers")
    parser.add_argument("--limit-docs", type=int, default=400)
    parser.add_argument("--dataset", default=str(REPO.parent / "shared" / "eval" / "scifact"))
    parser.add_argument("--run-file")
    parser.add_argument("--gate-profile")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    limit = args.limit_docs or None
    if args.one:
        print(json.dumps(run_one(args.one, Path(args.dataset), limit, args.gate_profile)))
        return 0
    results = []
    for name in args.embedders.split(","):
        command = [
            sys.executable,
            __file__,
            "--one",
            name,
            "--limit-docs",
            str(args.limit_docs),
            "--dataset",
            args.dataset,
        ]
        if args.gate_profile:
            command += ["--gate-profile", args.gate_profile]
        done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        result = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(result)
        print(
            f"{name:<22} dense {result['ndcg@10']['dense']:.4f}  hybrid {result['ndcg@10']['hybrid']:.4f}  "
            f"bm25 {result['ndcg@10']['bm25']:.4f}  encode {result['encode_docs_per_s']:>7.1f} docs/s  "
            f"query p50 {result['query_encode_ms']['p50']:.2f} ms  (load {result['load_average']})",
            flush=True,
        )
    if args.run_file:
        from services.files.atomic import atomic_write_text

        atomic_write_text(Path(args.run_file), json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
