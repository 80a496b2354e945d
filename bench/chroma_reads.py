"""Does a Chroma query wait for a write?  Query latency alone and beside a writer, no Aries lock involved.

    .venv/bin/python bench/chroma_reads.py [--vectors 5000] [--batches 30] [--server]

One process, one collection of ``--vectors`` random unit vectors (384 dimensions, the index's HNSW
settings).  Phase 1: 200 queries (200 results, distances) one after another.  Phase 2: two threads
query in a loop while the main thread upserts ``--batches`` batches of 1,000 new vectors (and
deletes 500 of the batch before), the shape of an ingest's batch writes.  p50 / p95 / max of each
phase.  ``--server`` does the same against ``chroma run`` on 127.0.0.1 (an HTTP client, the
server's own concurrency) instead of the embedded ``PersistentClient``.

This is the question behind "Chroma reads do not wait on a writer's lock" (issue 22): the engine's
queries and an ingest's batches in one process take the index's store lock in turn; lifting that
lock only helps if Chroma itself answers a query while it is writing.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HNSW = {"space": "cosine", "ef_construction": 200, "ef_search": 200, "max_neighbors": 16}


def _stats(values: list[float]) -> str:
    ordered = sorted(values)
    if not ordered:
        return "no queries"
    return (
        f"p50 {ordered[len(ordered) // 2]:.2f} / p95 {ordered[int(len(ordered) * 0.95)]:.2f} / "
        f"max {ordered[-1]:.2f} ms ({len(ordered)} queries)"
    )


def _server(path: Path) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    chroma = Path(sys.executable).with_name("chroma")
    proc = subprocess.Popen(
        [str(chroma), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("chroma run did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--server", action="store_true")
    args = parser.parse_args()

    import chromadb
    import numpy as np
    from chromadb.config import Settings

    rng = np.random.default_rng(22)

    def unit(n: int) -> Any:
        v = rng.standard_normal((n, 384)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    work = Path(tempfile.mkdtemp(prefix="aries-chroma-reads-"))
    settings = Settings(anonymized_telemetry=False)
    proc = None
    if args.server:
        proc, port = _server(work / "server")
        client: Any = chromadb.HttpClient(host="127.0.0.1", port=port, settings=settings)
    else:
        client = chromadb.PersistentClient(path=str(work / "embedded"), settings=settings)
    try:
        collection = client.get_or_create_collection(
            "reads",
            embedding_function=None,
            configuration={"hnsw": HNSW},
        )
        for start in range(0, args.vectors, 1000):
            size = min(1000, args.vectors - start)
            collection.upsert(ids=[f"a{start + i}" for i in range(size)], embeddings=unit(size))
        queries = unit(200).tolist()
        for vector in queries[:20]:
            collection.query(query_embeddings=[vector], n_results=200, include=["distances"])
        alone: list[float] = []
        for vector in queries:
            began = time.perf_counter()
            collection.query(query_embeddings=[vector], n_results=200, include=["distances"])
            alone.append((time.perf_counter() - began) * 1000)

        beside: list[float] = []
        stop = threading.Event()
        errors: list[str] = []

        def reader() -> None:
            position = 0
            while not stop.is_set():
                began = time.perf_counter()
                try:
                    collection.query(query_embeddings=[queries[position % 200]], n_results=200, include=["distances"])
                except Exception as exc:  # reported below
                    errors.append(repr(exc)[:200])
                beside.append((time.perf_counter() - began) * 1000)
                position += 1

        threads = [threading.Thread(target=reader) for _ in range(2)]
        for thread in threads:
            thread.start()
        began = time.perf_counter()
        for batch in range(args.batches):
            collection.upsert(
                ids=[f"b{batch}_{i}" for i in range(1000)],
                embeddings=unit(1000),
                metadatas=[{"source_path": f"f{batch}"}] * 1000,
            )
            if batch:
                collection.delete(ids=[f"b{batch - 1}_{i}" for i in range(500)])
        writes = time.perf_counter() - began
        stop.set()
        for thread in threads:
            thread.join()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    mode = "server (chroma run, HTTP)" if args.server else "embedded (PersistentClient)"
    print(f"Chroma {chromadb.__version__}, {mode}, {args.vectors} vectors + {args.batches} batches of 1,000")
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print(f"queries alone:         {_stats(alone)}")
    print(f"queries beside writes: {_stats(beside)}; the writes took {writes:.1f} s; errors: {len(errors)}")
    for error in sorted(set(errors))[:3]:
        print(f"  error: {error}")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
