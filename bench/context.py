"""Context find/search latency on a generated 5,000-document tree (warm index).

    .venv/bin/python bench/context.py [--docs 5000] [--queries 200] [--embedder hash|sentence-transformers]

Generates a deterministic nested tree under ``axiom://resources`` (seed fixed): topics → subtopics
→ Markdown files with a heading and a few paragraphs of text drawn from per-topic vocabularies, so
the folders differ in what they are about.  Builds the L0/L1 tier files (``synthesize_tiers``) and
the context index (``sync_index``) once, then runs ~200 queries (two to four words from one
subtopic's vocabulary, fixed seed) through ``find`` and ``search`` (limit 10, default budget) after
one warm-up pass, and prints p50/p95/max of each, their ratio to the targets (find ≤ 60 ms, search
≤ 120 ms), the build times and the machine load.

Then ``commit`` (target p95 ≤ 150 ms): ``--commits`` sessions (default 50) of ten mixed messages
(user preferences, decisions, tasks and facts, assistant answers, a short ``key: value`` tool output;
fixed seed) are created and filled, and each ``ContextService.session_commit`` (offline extraction,
journal, history, memory files under ``user``/``agent``, meta, active list, and the ``commit-index``
job enqueued for the memory files) is timed after two warm-up commits.  The queue's index job itself
(tiers of the memory folders, then ``sync_index`` of the tree) runs asynchronously in the worker and
is timed separately (``--index-jobs`` runs, default 3).  ``--embedder`` defaults to ``hash``; pass
``sentence-transformers`` for the real model (the index build then takes much longer).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEED = 1313
TARGETS = {"find": 60.0, "search": 120.0, "commit": 150.0}
SESSION_LINES = (
    ("user", "I prefer {w} over {v} for the {t} notes."),
    ("assistant", "Noted: {w} it is. The {t} folder has {n} notes on {v}."),
    ("user", "We decided to keep the {t} archive in {w} format."),
    ("assistant", "Understood, the archive stays in {w}."),
    ("user", "TODO: review the {v} section of {t} before Friday."),
    ("tool", "status: ok\nnotes: {n}\nformat: {w}"),
    ("user", "Remember that my {t} project is called {w}-{n}."),
    ("assistant", "I will remember the project name {w}-{n}."),
    ("user", "I need to compare {v} and {w} next week."),
    ("assistant", "Here is a short comparison of {v} and {w} for {t}."),
)
TOPICS = {
    "astronomy": "star galaxy orbit telescope nebula planet comet light spectrum gravity eclipse moon",
    "botany": "leaf root seed flower soil photosynthesis pollen stem moss fern bloom chlorophyll",
    "cooking": "dough oven simmer spice broth knead roast sauce garlic onion butter flour",
    "databases": "index query table transaction schema replica shard cursor join commit lock page",
    "geology": "rock magma fault sediment basalt granite erosion mineral crust quartz volcano layer",
    "music": "chord melody tempo rhythm scale harmony violin piano octave rest measure cadence",
    "networking": "packet router latency socket bandwidth protocol header switch route frame mtu dns",
    "sailing": "hull mast keel tack jib anchor harbor wind tide rudder halyard mooring",
    "medicine": "dose symptom clinic vaccine therapy tissue pulse diagnosis fever immune trial lesion",
    "finance": "bond equity yield ledger audit margin dividend asset hedge credit liquidity coupon",
}
COMMON = "the a of and to in is that for with as on by this from are it be at or can which each"


def vocabulary(topic: str, sub: int) -> list[str]:
    base = TOPICS[topic].split()
    rng = random.Random(f"{SEED}-{topic}-{sub}")
    extra = [f"{topic[:4]}{sub}{word}" for word in ("alpha", "beta", "gamma", "delta")]
    return rng.sample(base, 6) + extra


def document(rng: random.Random, words: list[str], title: str) -> str:
    common = COMMON.split()
    paragraphs = []
    for _ in range(rng.randint(2, 4)):
        sentences = []
        for _ in range(rng.randint(3, 6)):
            body = [rng.choice(words if rng.random() < 0.45 else common) for _ in range(rng.randint(8, 16))]
            sentences.append(" ".join(body).capitalize() + ".")
        paragraphs.append(" ".join(sentences))
    return f"# {title}\n\n" + "\n\n".join(paragraphs) + "\n"


def generate(tree: object, docs: int) -> list[tuple[str, int]]:
    from services.context.tree import ContextTree
    from services.context.uri import AxiomUri

    assert isinstance(tree, ContextTree)
    rng = random.Random(SEED)
    topics = sorted(TOPICS)
    subs = 10
    per = max(1, docs // (len(topics) * subs))
    made: list[tuple[str, int]] = []
    root = AxiomUri.root("resources")
    for topic in topics:
        for sub in range(subs):
            words = vocabulary(topic, sub)
            for number in range(per):
                title = f"{topic.title()} note {sub}-{number}: {' '.join(rng.sample(words, 3))}"
                rel = f"{topic}/sub{sub:02d}/note{number:03d}.md"
                tree.write_text(root.join(rel), document(rng, words, title), actor="user")
            made.append((topic, sub))
    return made


def bench_commits(
    workspace: object, engine: object, commits: int, index_jobs: int
) -> tuple[list[float], list[float], int]:
    """Commit ``commits`` sessions of ten messages each (after 2 warm-up ones); time the index job too."""
    from services.context.service import ContextService

    rng = random.Random(SEED + 2)
    service = ContextService(workspace, engine_factory=lambda: engine)  # type: ignore[arg-type]
    timings: list[float] = []
    index_ms: list[float] = []
    memories = 0
    try:
        for number in range(commits + 2):
            topic = rng.choice(sorted(TOPICS))
            words = TOPICS[topic].split()
            session = service.session_new(f"bench-{number:04d}")
            for role, text in SESSION_LINES:
                fields = {"t": topic, "w": rng.choice(words), "v": rng.choice(words), "n": rng.randint(2, 99)}
                session.append(role, text.format(**fields), tool_name="fs" if role == "tool" else None)
            begun = time.perf_counter()
            report = service.session_commit(session.session_id)
            elapsed = (time.perf_counter() - begun) * 1000
            if number >= 2:
                timings.append(elapsed)
                memories += len(report.memories)
            if len(index_ms) < index_jobs:
                begun = time.perf_counter()
                service.process_queue()
                index_ms.append((time.perf_counter() - begun) * 1000)
    finally:
        service.close()
    return timings, index_ms, memories


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--index-jobs", type=int, default=3)
    args = parser.parse_args()
    os.environ["AXIOMME_EMBEDDER"] = args.embedder

    from services.context.index import sync_index
    from services.context.search import ContextRetriever
    from services.context.settings import ContextSettings
    from services.context.tiers import synthesize_tiers
    from services.context.tree import ContextTree
    from services.context.uri import AxiomUri
    from services.retrieval import RetrievalEngine, RetrievalSettings
    from services.workspace.manager import Workspace

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="aries-bench-context-") as tmp:
        workspace = Workspace(Path(tmp) / "ws", "bench")
        workspace.ensure_layout()
        tree = ContextTree(workspace.root / "context")
        started = time.perf_counter()
        subtopics = generate(tree, args.docs)
        generated_s = time.perf_counter() - started
        started = time.perf_counter()
        synthesize_tiers(tree, AxiomUri.root("resources"))
        tiers_s = time.perf_counter() - started
        with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
            engine.preload()
            started = time.perf_counter()
            report = sync_index(tree, engine)
            index_s = time.perf_counter() - started
            started = time.perf_counter()
            again = sync_index(tree, engine)
            resync_s = time.perf_counter() - started
            retriever = ContextRetriever(tree, engine, settings=ContextSettings.from_env({}))
            rng = random.Random(SEED + 1)
            queries = []
            for _ in range(args.queries):
                topic, sub = rng.choice(subtopics)
                queries.append(" ".join(rng.sample(vocabulary(topic, sub), rng.randint(2, 4))))
            for query in queries[:20]:  # warm-up
                retriever.find(query)
                retriever.search(query)
            timings: dict[str, list[float]] = {"find": [], "search": []}
            reasons: dict[str, int] = {}
            for query in queries:
                for kind in ("find", "search"):
                    call = retriever.find if kind == "find" else retriever.search
                    begun = time.perf_counter()
                    result = call(query)
                    timings[kind].append((time.perf_counter() - begun) * 1000)
                    if kind == "search":
                        reasons[result.trace.stop_reason] = reasons.get(result.trace.stop_reason, 0) + 1
            retriever.close()
            commit_ms, index_ms, memories = bench_commits(workspace, engine, args.commits, args.index_jobs)
            timings["commit"] = commit_ms
    load_after = os.getloadavg()
    print(f"documents: {args.docs} in {len(subtopics)} subtopics; embedder {args.embedder}")
    print(f"generate {generated_s:.1f} s, tiers {tiers_s:.1f} s, index {index_s:.1f} s ({report.summary()})")
    print(f"re-sync (nothing changed) {resync_s:.1f} s, {again.chunks_added} chunks embedded")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; cpus {os.cpu_count()}")
    for kind, values in timings.items():
        p50, p95 = statistics.median(values), percentile(values, 0.95)
        target = TARGETS[kind]
        print(
            f"{kind:<6} n={len(values)} p50 {p50:.1f} ms  p95 {p95:.1f} ms  max {max(values):.1f} ms  "
            f"target p95 ≤ {target:.0f} ms: ratio {p95 / target:.2f}"
        )
    print(f"search stop reasons: {reasons}")
    print(f"commit: {memories} memories written in {len(commit_ms)} timed commits")
    if index_ms:
        print(f"index job (queue worker, after a commit): {', '.join(f'{v:.0f}' for v in index_ms)} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
