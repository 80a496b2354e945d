"""The encoder backends side by side: torch vs ONNX fp32 vs ONNX int8, measured in the same run.

    .venv/bin/python bench/embedders.py [--backends torch,onnx,onnx-int8] [--limit-docs N] [--dataset DIR]

Each backend runs in a fresh process of its own (so peak RSS and start-up are its own):

1. ingest: builds the SciFact index from scratch (chunk, embed, Tantivy + Chroma + manifest
   writes: ``evaluation.build_index``, the pipeline of ``aries eval rag``) and reports chunks/s;
2. quality: nDCG@10 of bm25, dense and hybrid on all the shared queries;
3. warm hybrid query latency: ``RetrievalEngine.query(text, k=10)`` for every query after a
   warm-up pass (embed, Tantivy, Chroma, fusion, chunk reads, audit row): p50/p95;
4. cold first query: a new Python process that imports the engine, opens the index and answers
   one query (wall time of the whole process, as a user running ``aries rag query`` sees it);
5. peak RSS of the process of steps 1–3.

``--encoder-only`` times just the query encoder (``embed_query``) of the three backends taking
turns query by query in one process, so that a shared machine's load weighs on each alike.

The ONNX models are exported (once, cached) before any clock starts.  The machine may be shared:
the load average is printed with each backend, and every figure is also given as a ratio to the
torch figure of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

COLD = """
import sys, time
from pathlib import Path
from services.retrieval import RetrievalEngine, RetrievalSettings
from services.workspace.manager import Workspace
ws = Workspace(Path(sys.argv[1]), "bench")
with RetrievalEngine(ws, RetrievalSettings.from_env()) as engine:
    hits = engine.query(sys.argv[2], k=10, index="scifact").hits
print(len(hits), "torch" in sys.modules)
"""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(round(q * len(ordered))) - 1)]


def run_one(backend: str, dataset: Path, limit_docs: int | None, work: Path) -> dict[str, Any]:
    os.environ["AXIOMME_EMBEDDER"] = "sentence-transformers"
    os.environ["AXIOMME_EMBEDDER_BACKEND"] = backend
    from services.retrieval import RetrievalEngine, RetrievalSettings
    from services.retrieval.chunking import ChunkConfig
    from services.retrieval.embedders import cache_tag, create_embedder, preload
    from services.retrieval.evaluation import build_index, index_key, load_beir, run_queries, select_subset
    from services.workspace.manager import Workspace

    load_1 = os.getloadavg()[0]
    settings = RetrievalSettings.from_env()
    embedder = create_embedder(settings)
    began = time.perf_counter()
    preload(embedder)
    load_s = time.perf_counter() - began
    data = load_beir(dataset)
    if limit_docs:
        data = select_subset(data, limit_docs)
    directory = work / index_key(data, cache_tag(embedder), ChunkConfig())
    shutil.rmtree(directory, ignore_errors=True)
    began, cpu = time.perf_counter(), time.process_time()
    store = build_index(data, directory, embedder)
    ingest_s, ingest_cpu = time.perf_counter() - began, time.process_time() - cpu
    files, chunks = store.manifest.counts()
    quality = run_queries(store, data, embedder, settings.fusion, top_n=max(settings.top_n, 200))
    store.close()

    workspace = Workspace(work / f"ws-{backend}", "bench")
    workspace.ensure_layout()
    shutil.copytree(directory, workspace.indexes_dir / "scifact")
    queries = list(data.queries.values())
    timings: list[float] = []
    with RetrievalEngine(workspace, settings, embedder=embedder) as engine:
        for text in queries:  # warm-up pass
            engine.query(text, k=10, index="scifact")
        for text in queries:
            start = time.perf_counter()
            engine.query(text, k=10, index="scifact")
            timings.append((time.perf_counter() - start) * 1000)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    cold: list[float] = []
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for _ in range(3):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", COLD, str(workspace.root), queries[0]],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        cold.append(time.perf_counter() - start)
    return {
        "backend": backend,
        "documents": len(data.corpus),
        "files": files,
        "chunks": chunks,
        "model_load_s": round(load_s, 2),
        "ingest_s": round(ingest_s, 1),
        "ingest_cpu_s": round(ingest_cpu, 1),
        "ingest_chunks_per_s": round(chunks / ingest_s, 2),
        "ndcg@10": {method: quality["methods"][method]["ndcg@10"] for method in ("bm25", "dense", "hybrid")},
        "query_ms": {
            "queries": len(timings),
            "p50": round(statistics.median(timings), 2),
            "p95": round(_percentile(timings, 0.95), 2),
            "max": round(max(timings), 2),
        },
        "cold_first_query_s": round(statistics.median(cold), 2),
        "cold_imports_torch": done.stdout.split()[-1] == "True",
        "peak_rss_mb": round(peak, 1),
        "load_average": [round(load_1, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
    }


def interleaved(dataset: Path) -> dict[str, Any]:
    """The query encoder alone, the three backends taking turns query by query (same load for each)."""
    os.environ["AXIOMME_EMBEDDER"] = "sentence-transformers"
    from services.retrieval import RetrievalSettings
    from services.retrieval.embedders import create_embedder, preload
    from services.retrieval.evaluation import load_beir

    embedders = {b: create_embedder(RetrievalSettings(embedder_backend=b)) for b in ("torch", "onnx", "onnx-int8")}
    for embedder in embedders.values():
        preload(embedder)
    queries = list(load_beir(dataset).queries.values())
    wall: dict[str, list[float]] = {b: [] for b in embedders}
    cpu: dict[str, float] = dict.fromkeys(embedders, 0.0)
    for rounds in range(2):  # the first round warms up
        for text in queries:
            for backend, embedder in embedders.items():
                start, began = time.perf_counter(), time.process_time()
                embedder.embed_query(text)
                if rounds:
                    wall[backend].append((time.perf_counter() - start) * 1000)
                    cpu[backend] += time.process_time() - began
    return {
        backend: {
            "p50_ms": round(statistics.median(values), 2),
            "p95_ms": round(_percentile(values, 0.95), 2),
            "cpu_ms_per_query": round(cpu[backend] * 1000 / len(values), 2),
        }
        for backend, values in wall.items()
    } | {"load_average": round(os.getloadavg()[0], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=REPO.parent / "shared" / "eval" / "scifact")
    parser.add_argument("--backends", default="torch,onnx,onnx-int8")
    parser.add_argument("--limit-docs", type=int)
    parser.add_argument("--out", type=Path, help="also write the results (JSON) here")
    parser.add_argument("--encoder-only", action="store_true", help="only the interleaved query-encoder timing")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.encoder_only:
        print(json.dumps(interleaved(args.dataset), indent=2))
        return 0
    if args.one:
        print(json.dumps(run_one(args.one, args.dataset, args.limit_docs, args.work)))
        return 0

    from services.retrieval.embedders import minilm_path
    from services.retrieval.embedders_onnx import ensure_onnx_models

    ensure_onnx_models(minilm_path())  # the one-time export, before any clock starts
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="aries-bench-embedders-") as tmp:
        for backend in args.backends.split(","):
            command = [sys.executable, __file__, "--one", backend, "--dataset", str(args.dataset), "--work", tmp]
            if args.limit_docs:
                command += ["--limit-docs", str(args.limit_docs)]
            print(f"{backend}: running (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            result = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps(result), file=sys.stderr, flush=True)
            results.append(result)
            if args.out:
                args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    torch = next((r for r in results if r["backend"] == "torch"), None)
    print(
        "| backend | nDCG@10 hybrid (dense) | Δ vs torch | query p50 / p95 ms | ingest chunks/s | "
        "× torch | cold first query s | peak RSS MB | load |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        hybrid, dense = r["ndcg@10"]["hybrid"], r["ndcg@10"]["dense"]
        delta = f"{hybrid - torch['ndcg@10']['hybrid']:+.4f}" if torch else "—"
        speed = f"{r['ingest_chunks_per_s'] / torch['ingest_chunks_per_s']:.2f}" if torch else "—"
        latency = f"{r['query_ms']['p50']} / {r['query_ms']['p95']}"
        print(
            f"| {r['backend']} | {hybrid:.4f} ({dense:.4f}) | {delta} | {latency} | "
            f"{r['ingest_chunks_per_s']} | {speed} | {r['cold_first_query_s']} | {r['peak_rss_mb']} | "
            f"{r['load_average'][0]}–{r['load_average'][1]} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
