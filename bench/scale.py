"""Retrieval at scale: the growth curve of ingest, queries, memory and disk from 5,000 to 100,000 documents.

    .venv/bin/python bench/scale.py [--sizes 5000,20000,50000,100000] [--embedder hash]
                                    [--real-up-to 20000] [--chroma-server 50000] [--queries 200]
                                    [--work DIR] [--out results.json] [--plot docs/scale.png]

For each size, in one run, from a deterministic generated corpus (:func:`generate`, seed
:data:`SEED`: Markdown with headings, lists and code, ~1 % HTML and ~0.5 % PDF files, a log-normal
length distribution, topic vocabularies over a Zipf-distributed word list, nested folders):

* **ingest** — ``RetrievalEngine.index_add`` of the whole folder in a fresh process: wall and CPU
  time (user + system of that process, from ``wait4``), chunks/s, peak RSS (``ru_maxrss``), and the
  index's size on disk per 1,000 chunks;
* **queries** — a fresh process opens the workspace and answers one query (the **cold first
  query**: process start to answer, as ``aries rag query`` is), then ``--queries`` known-item
  queries after a warm-up pass, four ways: ``hybrid`` (``engine.query``: embed, BM25, dense, fusion,
  chunk reads, the audit row), ``bm25`` only, ``dense`` only (embed + Chroma) and ``hybrid`` with
  its stage breakdown; p50 / p95 / p99, hit@10 of the known item, and that process's peak RSS;
* **re-ingest of 1 % changed files** — ``index_add`` of the whole folder again after 1 % of the
  files changed (the incremental scan hashes every file, re-embeds only the changed ones);
* **save → reindex** — a real ``ViewerServer`` (``aries serve``) on 127.0.0.1: ten saves through
  its HTTP API (GET for the etag, PUT with ``If-Match``); the server's ``reindex_ms`` p50 / max.

``--embedder`` names the embedder of every size; ``--real-up-to N`` measures the sizes up to N again
with all-MiniLM-L6-v2 (``sentence-transformers``, the *auto* fp32 ONNX backend) — the issue allows
the hash embedder to stand in for the encoder above 20,000 documents, and the report says which
embedder each row used.  ``--chroma-server N`` measures size N again with Chroma in server mode
(``chroma run`` on 127.0.0.1, a free port, started and stopped here; its own RSS is reported
beside).  Everything generated goes under ``--work`` (default: a temporary folder, removed at the
end unless ``--keep``).  The table is printed as Markdown; ``--plot`` writes the curve (matplotlib).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEED = 2222
TOPICS = 60
QUERY_SEED = 77

# -- the corpus ---------------------------------------------------------------------------------

_SYLLABLES = (
    "ka lo mi ra te su no vi an el or ut ba de fi go hu ja ke li mo ne pa qui ro sa ti ve wu xa "
    "yo ze bri cla dro fle gra pli tro spa ste qua"
).split()


def _vocabulary(size: int, rng: random.Random) -> list[str]:
    words: set[str] = set()
    out: list[str] = []
    while len(out) < size:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((2, 2, 3, 3, 3, 4))))
        if word not in words:
            words.add(word)
            out.append(word)
    return out


class Corpus:
    """A seedable document generator: the same ``(seed, n)`` gives the same files, byte for byte."""

    def __init__(self, seed: int = SEED) -> None:
        rng = random.Random(seed)
        self.seed = seed
        self.common = _vocabulary(40_000, rng)
        # Zipf weights over the common vocabulary: a few words everywhere, a long tail of rare ones
        self.weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(self.common))]
        self.cumulative: list[float] = []
        total = 0.0
        for weight in self.weights:
            total += weight
            self.cumulative.append(total)
        self.topics = [_vocabulary(150, random.Random(seed * 1000 + t)) for t in range(TOPICS)]

    def _words(self, rng: random.Random, topic: list[str], count: int) -> list[str]:
        common = rng.choices(self.common, cum_weights=self.cumulative, k=count)
        return [rng.choice(topic) if rng.random() < 0.25 else word for word in common]

    def _paragraph(self, rng: random.Random, topic: list[str]) -> str:
        words = self._words(rng, topic, rng.randint(25, 110))
        sentences: list[str] = []
        while words:
            size = rng.randint(6, 18)
            sentences.append(" ".join(words[:size]).capitalize() + ".")
            words = words[size:]
        return " ".join(sentences)

    def markdown(self, number: int) -> tuple[str, list[str]]:
        """A document's Markdown and its paragraphs (to draw known-item queries from)."""
        rng = random.Random(self.seed * 7_919 + number)
        topic = self.topics[number % TOPICS]
        paragraphs = max(1, min(60, int(round(rng.lognormvariate(1.2, 0.8)))))
        title = " ".join(self._words(rng, topic, rng.randint(2, 6))).title()
        parts = [f"# {title}", ""]
        texts: list[str] = []
        for index in range(paragraphs):
            if index and rng.random() < 0.3:
                parts += [f"## {' '.join(self._words(rng, topic, rng.randint(1, 4))).title()}", ""]
            text = self._paragraph(rng, topic)
            texts.append(text)
            parts += [text, ""]
            roll = rng.random()
            if roll < 0.12:
                parts += [f"- {' '.join(self._words(rng, topic, rng.randint(2, 8)))}" for _ in range(rng.randint(2, 6))]
                parts.append("")
            elif roll < 0.18:
                name = rng.choice(topic)
                parts += ["```python", f"def {name}(value):", f"    return value * {rng.randint(2, 99)}", "```", ""]
        return "\n".join(parts), texts

    def write(self, root: Path, count: int) -> dict[str, Any]:
        """Write ``count`` documents under ``root`` (100 per folder, two levels); returns a summary."""
        from tests.retrieval.builders import make_pdf

        root.mkdir(parents=True, exist_ok=True)
        sizes = {"md": 0, "html": 0, "pdf": 0}
        total_bytes = 0
        for number in range(count):
            folder = root / f"area{number // 10_000:02d}" / f"part{(number // 100) % 100:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            text, paragraphs = self.markdown(number)
            if number % 200 == 199:  # ~0.5 % PDF
                data = make_pdf([p[:90] for p in paragraphs[:3]] or ["empty"], title=f"Document {number}")
                path = folder / f"doc{number:06d}.pdf"
                path.write_bytes(data)
                sizes["pdf"] += 1
            elif number % 100 == 41:  # ~1 % HTML
                body = "".join(f"<p>{p}</p>" for p in paragraphs)
                data = f"<html><head><title>Document {number}</title></head><body>{body}</body></html>".encode()
                path = folder / f"doc{number:06d}.html"
                path.write_bytes(data)
                sizes["html"] += 1
            else:
                data = text.encode("utf-8")
                path = folder / f"doc{number:06d}.md"
                path.write_bytes(data)
                sizes["md"] += 1
            total_bytes += len(data)
        return {"documents": count, "bytes": total_bytes, **sizes}

    def queries(self, count: int, documents: int) -> list[tuple[str, str]]:
        """``count`` known-item queries: (words from one paragraph of one Markdown document, its path)."""
        rng = random.Random(QUERY_SEED)
        out: list[tuple[str, str]] = []
        while len(out) < count:
            number = rng.randrange(documents)
            if number % 200 == 199 or number % 100 == 41:
                continue
            _, paragraphs = self.markdown(number)
            words = [w for w in paragraphs[rng.randrange(len(paragraphs))].rstrip(".").split() if len(w) > 3]
            if len(words) < 4:
                continue
            start = rng.randrange(max(1, len(words) - 6))
            text = " ".join(words[start : start + rng.randint(3, 6)]).lower().replace(".", "")
            rel = f"area{number // 10_000:02d}/part{(number // 100) % 100:02d}/doc{number:06d}.md"
            out.append((text, rel))
        return out


# -- the phases (each in a process of its own) ------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(math.ceil(q * len(ordered))) - 1))]


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 2),
        "p95": round(_pct(values, 0.95), 2),
        "p99": round(_pct(values, 0.99), 2),
        "max": round(max(values), 2),
    }


def _engine(home: Path, chroma_url: str | None) -> Any:
    from services.retrieval import RetrievalEngine, RetrievalSettings
    from services.workspace.manager import WorkspaceManager

    os.environ["ARIES_HOME"] = str(home)
    manager = WorkspaceManager()
    try:
        workspace, _ = manager.open("scale")
    except Exception:
        workspace, _ = manager.create("scale")
    settings = RetrievalSettings.from_env()
    return workspace, RetrievalEngine(workspace, settings, chroma_url=chroma_url)


def phase_ingest(home: Path, corpus: Path, chroma_url: str | None) -> dict[str, Any]:
    workspace, engine = _engine(home, chroma_url)
    with engine:
        engine.preload()
        started = time.perf_counter()
        report = engine.index_add(corpus, "corpus")
        wall = time.perf_counter() - started
        files, chunks = engine.indexes.store("corpus").manifest.counts()
    workspace.close()
    return {"ingest_s": round(wall, 2), "files": files, "chunks": chunks, "errors": len(report.errors)}


def phase_query(home: Path, queries: list[tuple[str, str]], chroma_url: str | None, spawned: float) -> dict[str, Any]:
    workspace, engine = _engine(home, chroma_url)
    result: dict[str, Any] = {}
    with engine:
        first = engine.query(queries[0][0], k=10, index="corpus")
        result["cold_first_query_s"] = round(time.time() - spawned, 3)
        del first
        store = engine.indexes.store("corpus")
        embedder = engine.indexes.check_model(store)
        for text, _ in queries:  # warm-up: every query once, hybrid
            engine.query(text, k=10, index="corpus")
        timings: dict[str, list[float]] = {"hybrid": [], "bm25": [], "dense": []}
        found = 0
        for text, rel in queries:
            began = time.perf_counter()
            hits = engine.query(text, k=10, index="corpus").hits
            timings["hybrid"].append((time.perf_counter() - began) * 1000)
            found += any(hit.source_path == rel for hit in hits)
            began = time.perf_counter()
            with store.reading():
                store.bm25(text, 200)
            timings["bm25"].append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            vector = embedder.embed_query(text)
            with store.reading():
                store.dense(vector, 200)
            timings["dense"].append((time.perf_counter() - began) * 1000)
        result["query_ms"] = {mode: _summary(values) for mode, values in timings.items()}
        result["hit@10"] = round(found / len(queries), 4)
        stages = getattr(engine, "stage_totals", None)
        if callable(stages):
            result["stages_ms"] = stages()
    workspace.close()
    return result


def phase_update(home: Path, corpus: Path, chroma_url: str | None, share: float) -> dict[str, Any]:
    files = sorted(p for p in corpus.rglob("*.md"))
    rng = random.Random(SEED + 1)
    changed = rng.sample(files, max(1, int(len(files) * share)))
    for number, path in enumerate(changed):
        path.write_text(path.read_text(encoding="utf-8") + f"\n\nEdited paragraph {number} of the run.\n")
    workspace, engine = _engine(home, chroma_url)
    with engine:
        engine.preload()
        started = time.perf_counter()
        report = engine.index_add(corpus, "corpus")
        wall = time.perf_counter() - started
    workspace.close()
    return {"changed": len(changed), "updated": len(report.updated), "reingest_s": round(wall, 2)}


def phase_save(home: Path, corpus: Path, saves: int) -> dict[str, Any]:
    import urllib.parse

    from bench.web import _call

    os.environ["ARIES_HOME"] = str(home)
    from services.web.viewer import ViewerServer

    server = ViewerServer(home / "workspaces" / "scale")
    server.start()
    base, token = f"http://127.0.0.1:{server.port}", server.token
    rng = random.Random(SEED + 2)
    names = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*.md"))
    picks = rng.sample(names, saves + 1)
    reindex: list[float] = []
    try:
        for number, rel in enumerate(picks):
            doc_id = urllib.parse.quote(f"rag/corpus/{rel}", safe="")
            status, loaded = _call(f"{base}/api/doc?id={doc_id}", token)
            if status != 200:
                return {"save_error": f"GET {status}: {loaded}"}
            content = loaded["content"] + f"\nSaved paragraph {number}.\n"
            status, saved = _call(
                f"{base}/api/doc?id={doc_id}", token, "PUT", {"content": content}, If_Match=f'"{loaded["etag"]}"'
            )
            if status != 200:
                return {"save_error": f"PUT {status}: {saved}"}
            if number:  # the first one warms up
                reindex.append(float(saved["reindex_ms"]))
    finally:
        server.stop()
    return {"save_reindex_ms": {"p50": round(statistics.median(reindex), 1), "max": round(max(reindex), 1)}}


# -- the driver ---------------------------------------------------------------------------------


def _child(args: list[str], env: dict[str, str]) -> tuple[dict[str, Any], dict[str, float]]:
    """Run a phase in a fresh process: (its JSON answer, its wall / CPU / peak RSS from wait4)."""
    started = time.perf_counter()
    spawned = time.time()
    command = [sys.executable, __file__, "--phase", *args, "--spawned", repr(spawned)]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=err, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, problems = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise RuntimeError(f"phase {args[0]} failed ({proc.returncode}):\n{problems[-3000:]}")
    lines = [line for line in text.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]), {
        "wall_s": round(time.perf_counter() - started, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
    }


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ChromaServer:
    """``chroma run`` on 127.0.0.1 and a free port, with its data in ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ChromaServer:
        chroma = Path(sys.executable).with_name("chroma")
        self.proc = subprocess.Popen(
            [str(chroma), "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("chroma run did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rss_mb(self) -> float:
        import psutil

        assert self.proc is not None
        return round(psutil.Process(self.proc.pid).memory_info().rss / 2**20, 1)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)


def measure(
    size: int, embedder: str, work: Path, corpus_root: Path, queries: int, chroma: ChromaServer | None
) -> dict[str, Any]:
    home = work / f"home-{size}-{embedder}{'-server' if chroma else ''}"
    shutil.rmtree(home, ignore_errors=True)
    corpus = work / f"corpus-{size}-{embedder}{'-server' if chroma else ''}"
    shutil.rmtree(corpus, ignore_errors=True)
    shutil.copytree(corpus_root, corpus)
    env = dict(os.environ, AXIOMME_EMBEDDER=embedder, ARIES_HOME=str(home), PYTHONPATH=str(REPO))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    url = ["--chroma-url", chroma.url] if chroma else []
    row: dict[str, Any] = {
        "documents": size,
        "embedder": embedder,
        "chroma": "server" if chroma else "embedded",
        "load_before": round(os.getloadavg()[0], 2),
    }
    print(f"[{size} {embedder} {row['chroma']}] ingest (load {row['load_before']})", file=sys.stderr, flush=True)
    answer, usage = _child(["ingest", "--home", str(home), "--corpus", str(corpus), *url], env)
    row.update(answer)
    row["ingest_cpu_s"] = usage["cpu_s"]
    row["ingest_peak_rss_mb"] = usage["peak_rss_mb"]
    print(f"[{size}] ingest: {json.dumps(answer)} {json.dumps(usage)}", file=sys.stderr, flush=True)
    row["chunks_per_s"] = round(answer["chunks"] / answer["ingest_s"], 1)
    index_dir = home / "workspaces" / "scale" / "indexes" / "corpus"
    disk = _du(index_dir) + (_du(chroma.path) if chroma else 0)
    row["disk_mb"] = round(disk / 2**20, 1)
    row["disk_mb_per_1000_chunks"] = round(disk / 2**20 / answer["chunks"] * 1000, 2)
    if chroma:
        row["chroma_server_rss_mb"] = chroma.rss_mb()
    print(f"[{size}] queries", file=sys.stderr, flush=True)
    qfile = work / f"queries-{size}.json"
    answer, usage = _child(["query", "--home", str(home), "--queries-file", str(qfile), *url], env)
    row.update(answer)
    row["query_peak_rss_mb"] = usage["peak_rss_mb"]
    print(f"[{size}] queries: {json.dumps(answer)} {json.dumps(usage)}", file=sys.stderr, flush=True)
    print(f"[{size}] re-ingest of 1 %", file=sys.stderr, flush=True)
    answer, _ = _child(["update", "--home", str(home), "--corpus", str(corpus), *url], env)
    row.update(answer)
    if not chroma:
        print(f"[{size}] saves through aries serve", file=sys.stderr, flush=True)
        answer, _ = _child(["save", "--home", str(home), "--corpus", str(corpus)], env)
        row.update(answer)
    row["load_after"] = round(os.getloadavg()[0], 2)
    shutil.rmtree(corpus, ignore_errors=True)
    return row


def growth(rows: list[dict[str, Any]], key: str) -> str:
    """The log-log slope of ``key`` against documents between the smallest and largest size."""
    points = [(r["documents"], r[key]) for r in rows if isinstance(r.get(key), int | float) and r[key] > 0]
    if len(points) < 2:
        return "—"
    (x0, y0), (x1, y1) = points[0], points[-1]
    slope = math.log(y1 / y0) / math.log(x1 / x0)
    kind = "linear" if 0.85 <= slope <= 1.15 else ("sub-linear" if slope < 0.85 else "super-linear")
    return f"{slope:.2f} ({kind})"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| documents | embedder | Chroma | chunks | ingest s | CPU s | chunks/s | ingest peak RSS MB "
        "| disk MB / 1k chunks "
        "| hybrid p50 / p95 / p99 ms | bm25 p95 | dense p95 | hit@10 | cold first query s | query peak RSS MB "
        "| re-ingest 1 % s | save→reindex p50 ms | load |"
    )
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        q = r.get("query_ms", {})
        hybrid = q.get("hybrid", {})
        save = r.get("save_reindex_ms", {})
        lines.append(
            f"| {r['documents']:,} | {r['embedder']} | {r['chroma']} | {r['chunks']:,} | {r['ingest_s']} | "
            f"{r['ingest_cpu_s']} | {r['chunks_per_s']} | {r['ingest_peak_rss_mb']} | {r['disk_mb_per_1000_chunks']} | "
            f"{hybrid.get('p50')} / {hybrid.get('p95')} / {hybrid.get('p99')} | {q.get('bm25', {}).get('p95')} | "
            f"{q.get('dense', {}).get('p95')} | {r.get('hit@10')} | {r.get('cold_first_query_s')} | "
            f"{r.get('query_peak_rss_mb')} | {r.get('reingest_s')} | {save.get('p50', '—')} | "
            f"{r['load_before']}–{r['load_after']} |"
        )
    return "\n".join(lines)


def _p95(row: dict[str, Any], mode: str) -> float | None:
    value = row.get("query_ms", {}).get(mode, {}).get("p95")
    return float(value) if value is not None else None


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    series: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        label = r.get("series") or f"{r['embedder']}{' (Chroma server)' if r['chroma'] == 'server' else ''}"
        series.setdefault(label, []).append(r)

    def draw(ax: Any, points: list[dict[str, Any]], value: Any, style: str, label: str) -> None:
        pairs = [(p["documents"], value(p)) for p in points if value(p) is not None]
        if pairs:
            ax.plot([x for x, _ in pairs], [y for _, y in pairs], style, label=label)

    for label, points in series.items():
        draw(axes[0][0], points, lambda p: p.get("ingest_s"), "o-", f"{label}: wall")
        draw(axes[0][0], points, lambda p: p.get("ingest_cpu_s"), "x--", f"{label}: CPU")
        draw(axes[0][1], points, lambda p: _p95(p, "hybrid"), "o-", f"{label}: hybrid p95")
        draw(axes[0][1], points, lambda p: _p95(p, "bm25"), "x--", f"{label}: bm25 p95")
        draw(axes[1][0], points, lambda p: p.get("ingest_peak_rss_mb"), "o-", f"{label}: ingest")
        draw(axes[1][0], points, lambda p: p.get("query_peak_rss_mb"), "x--", f"{label}: query process")
        draw(axes[1][1], points, lambda p: p.get("disk_mb"), "o-", label)
    titles = [
        ("ingest: wall and CPU time (s)", axes[0][0]),
        ("warm query latency p95 (ms)", axes[0][1]),
        ("peak RSS (MB)", axes[1][0]),
        ("index size on disk (MB)", axes[1][1]),
    ]
    for title, ax in titles:
        ax.set_title(title)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Aries retrieval at scale (bench/scale.py)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="5000,20000,50000,100000")
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--real-up-to", type=int, default=20_000, help="also with all-MiniLM-L6-v2 up to this size")
    parser.add_argument("--chroma-server", type=int, default=50_000, help="this size again with a Chroma server")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument(
        "--plot-from",
        type=Path,
        nargs="+",
        help="draw --plot from saved --out files instead of measuring (a row's optional 'series' names its line)",
    )
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--queries-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--chroma-url", help=argparse.SUPPRESS)
    parser.add_argument("--spawned", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase:
        if args.phase == "ingest":
            answer = phase_ingest(args.home, args.corpus, args.chroma_url)
        elif args.phase == "query":
            pairs = [tuple(pair) for pair in json.loads(args.queries_file.read_text())]
            answer = phase_query(args.home, pairs, args.chroma_url, args.spawned)
        elif args.phase == "update":
            answer = phase_update(args.home, args.corpus, args.chroma_url, 0.01)
        else:
            answer = phase_save(args.home, args.corpus, 10)
        print(json.dumps(answer), flush=True)
        return 0

    if args.plot_from:
        saved = [row for path in args.plot_from for row in json.loads(path.read_text(encoding="utf-8"))]
        plot(saved, args.plot or Path("scale.png"))
        print(f"plot: {args.plot or 'scale.png'} ({len(saved)} rows)")
        return 0

    sizes = [int(size) for size in args.sizes.split(",") if size]
    work = args.work or Path(tempfile.mkdtemp(prefix="aries-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.embedder != "hash" or args.real_up_to:
        from services.retrieval.embedders import minilm_path
        from services.retrieval.embedders_onnx import ensure_onnx_models

        ensure_onnx_models(minilm_path())  # the one-time export, before any clock starts
    corpus = Corpus()
    rows: list[dict[str, Any]] = []
    plan: list[tuple[int, str, bool]] = [(size, args.embedder, False) for size in sizes]
    plan += [(size, "sentence-transformers", False) for size in sizes if size <= args.real_up_to]
    plan += [(size, args.embedder, True) for size in sizes if size == args.chroma_server]
    try:
        for size, embedder, server in plan:
            source = work / f"source-{size}"
            if not source.exists():
                began = time.perf_counter()
                made = corpus.write(source, size)
                print(f"[{size}] corpus written in {time.perf_counter() - began:.0f} s: {made}", file=sys.stderr)
                (work / f"queries-{size}.json").write_text(json.dumps(corpus.queries(args.queries, size)))
            if server:
                with ChromaServer(work / f"chroma-server-{size}") as chroma:
                    row = measure(size, embedder, work, source, args.queries, chroma)
            else:
                row = measure(size, embedder, work, source, args.queries, None)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if args.out:
                args.out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(table(rows))
    main_rows = [r for r in rows if r["embedder"] == args.embedder and r["chroma"] == "embedded"]
    print()
    for key in ("ingest_s", "ingest_peak_rss_mb", "disk_mb", "query_peak_rss_mb", "reingest_s"):
        print(f"growth of {key} ({args.embedder}, log-log slope): {growth(main_rows, key)}")
    hybrid = [dict(r, hybrid_p95=r["query_ms"]["hybrid"]["p95"]) for r in main_rows]
    print(f"growth of hybrid p95: {growth(hybrid, 'hybrid_p95')}")
    if args.plot:
        plot(rows, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
