"""Web viewer: the latency of a save (write + synchronous reindex) against a whole-folder re-scan.

    .venv/bin/python bench/web.py [--docs 1000] [--saves 40] [--embedder hash|sentence-transformers]

Generates ``--docs`` Markdown files (fixed seed) in a temporary workspace, indexes the folder as
``docs``, starts a real ``ViewerServer`` on 127.0.0.1 and saves ``--saves`` documents through its HTTP
API (GET for the etag, then PUT with ``If-Match``), one after another, each with one new paragraph.
It prints p50/p95/max of the server's ``save_ms``, ``reindex_ms`` and ``total_ms`` and of the client's
round trip, then the baseline measured in the same run: the same one-file change picked up by
``index_add`` of the whole folder (the incremental scan that hashes every file), the way a save
would cost without ``index_update``; the ratio says how much the one-file update saves.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEED = 1414
WORDS = (
    "river delta silt basin glacier moraine fjord valley estuary tide current reef lagoon dune "
    "granite basalt quartz magma crust fault ridge plateau canyon mesa butte spring aquifer"
).split()


def _paragraph(rng: random.Random, words: int = 60) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _line(name: str, values: list[float]) -> str:
    return (
        f"  {name:<14} p50 {statistics.median(values):8.1f} ms   p95 {_pct(values, 0.95):8.1f} ms"
        f"   max {max(values):8.1f} ms"
    )


def _call(url: str, token: str, method: str = "GET", body: Any = None, **headers: str) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("X-Aries-Token", token)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    for key, value in headers.items():
        request.add_header(key.replace("_", "-"), value)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--saves", type=int, default=40)
    parser.add_argument("--baseline-runs", type=int, default=8)
    parser.add_argument("--embedder", default="hash")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="aries-bench-web-"))
    os.environ["ARIES_HOME"] = str(home)
    os.environ["AXIOMME_EMBEDDER"] = args.embedder
    os.environ.pop("ARIES_WEB_REINDEX_DELAY", None)

    from services.retrieval import RetrievalEngine
    from services.retrieval.settings import RetrievalSettings
    from services.web.viewer import ViewerServer
    from services.workspace.manager import WorkspaceManager

    rng = random.Random(SEED)
    docs = home / "docs"
    for number in range(args.docs):
        folder = docs / f"part{number % 20:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        text = f"# Note {number}\n\n" + "\n\n".join(_paragraph(rng) for _ in range(4)) + "\n"
        (folder / f"note{number:05d}.md").write_text(text, encoding="utf-8")
    workspace, _ = WorkspaceManager().create("bench")
    engine = RetrievalEngine(workspace, RetrievalSettings.from_env(os.environ))
    started = time.perf_counter()
    engine.index_add(docs, "docs")
    build_s = time.perf_counter() - started
    engine.close()
    workspace.close()
    print(f"{args.docs} documents indexed in {build_s:.1f} s ({args.embedder} embedder)")

    server = ViewerServer(home / "workspaces" / "bench")
    server.start()
    base, token = f"http://127.0.0.1:{server.port}", server.token
    names = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md"))
    picks = rng.sample(names, min(args.saves + 2, len(names)))
    server_ms: dict[str, list[float]] = {"save_ms": [], "reindex_ms": [], "total_ms": []}
    client_ms: list[float] = []
    try:
        for number, rel in enumerate(picks):
            doc_id = urllib.parse.quote(f"rag/docs/{rel}", safe="")
            status, loaded = _call(f"{base}/api/doc?id={doc_id}", token)
            assert status == 200, (status, loaded)
            content = loaded["content"] + f"\nAdded paragraph {number}: " + _paragraph(rng, 20) + "\n"
            t0 = time.perf_counter()
            status, saved = _call(
                f"{base}/api/doc?id={doc_id}", token, "PUT", {"content": content}, If_Match=f'"{loaded["etag"]}"'
            )
            elapsed = (time.perf_counter() - t0) * 1000
            assert status == 200, (status, saved)
            if number < 2:  # warm-up
                continue
            client_ms.append(elapsed)
            for key in server_ms:
                server_ms[key].append(float(saved[key]))
    finally:
        server.stop()

    print(f"\n{len(client_ms)} saves through the viewer's API (one document each, write + reindex):")
    for key, values in server_ms.items():
        print(_line(key, values))
    print(_line("round trip", client_ms))

    workspace, _ = WorkspaceManager().open("bench")
    engine = RetrievalEngine(workspace, RetrievalSettings.from_env(os.environ))
    baseline: list[float] = []
    try:
        for number in range(args.baseline_runs):
            path = docs / picks[number % len(picks)]
            path.write_text(path.read_text(encoding="utf-8") + f"\nBaseline {number}.\n", encoding="utf-8")
            t0 = time.perf_counter()
            engine.index_add(docs, "docs")
            baseline.append((time.perf_counter() - t0) * 1000)
    finally:
        engine.close()
        workspace.close()
    print(f"\nbaseline: the same one-file change through index_add of the whole folder ({len(baseline)} runs):")
    print(_line("index_add", baseline))
    ratio = statistics.median(baseline) / statistics.median(server_ms["reindex_ms"])
    print(f"\nreindex of one saved document vs whole-folder re-scan (p50): {ratio:.1f}x faster")
    print(f"load average: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
