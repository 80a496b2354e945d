"""Keywords first: time until a new folder is searchable, time until it is complete, and the quality at the end.

    .venv/bin/python bench/keywords_first.py [--old /tmp/aries-base] [--limit-docs 1000] [--dataset DIR]
                                             [--embedder sentence-transformers] [--cache DIR] [--json FILE]

Writes N SciFact abstracts (every judged one, then the others in file order; ``--limit-docs 0``:
all 5,183) as Markdown files into a temporary folder and, for each tree (this one, and ``--old``:
e.g. ``git archive b4552bb | tar -x -C /tmp/aries-base``, the code before keywords first), runs
in a fresh process of that tree (``PYTHONPATH``) ``RetrievalEngine.index_add`` on the folder
with the default encoder, and reports:

* **first searchable**: seconds from the start of ``index_add`` until the first batch is committed
  (the first ``commit`` progress event: from then on a query finds something);
* **keyword-searchable**: until every document is searchable by keyword (this tree: the
  ``keywords`` event; the old tree has no such moment before it is complete).  At that moment a
  SciFact query is run and its top hit, BM25 rank and dense share are reported (the answer during
  the vector phase);
* **complete**: until ``index_add`` returns (every vector written);
* **nDCG@10** of every SciFact query with a judged document in the subset, over the index as the
  tree left it, through ``RetrievalEngine.query(text, k=10)`` (documents in hit order, repeats
  dropped).  Both trees read the same ONNX export (``--cache``, built once).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, math, sys, time
from pathlib import Path
from services.retrieval import RetrievalEngine, RetrievalSettings
from services.workspace.manager import Workspace

corpus, home, queries_file = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
queries = json.loads(queries_file.read_text())
probe = queries[0]
workspace = Workspace(home / "ws", "bench")
workspace.ensure_layout()
out = {"first_commit_s": None, "keywords_s": None, "probe": None}
with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
    engine.preload()  # the model is loaded before the clock starts (both trees alike)
    started = time.perf_counter()
    def progress(event):
        now = time.perf_counter() - started
        if event.stage == "commit" and out["first_commit_s"] is None:
            out["first_commit_s"] = round(now, 2)
        if event.stage == "keywords" and out["keywords_s"] is None:
            out["keywords_s"] = round(now, 2)
            result = engine.query(probe["text"], k=10, index="bench")
            top = result.hits[0] if result.hits else None
            out["probe"] = {
                "query": probe["text"][:80], "ms": result.elapsed_ms, "mode": result.mode,
                "dense_share": getattr(result, "dense_share", None),
                "top": top.source_path if top else None, "top_bm25_rank": top.bm25_rank if top else None,
                "top_dense_rank": top.dense_rank if top else None,
                "judged_in_top10": sum(h.source_path.removesuffix(".md") in probe["relevant"] for h in result.hits),
            }
    report = engine.index_add(corpus, "bench", progress=progress)
    out["complete_s"] = round(time.perf_counter() - started, 2)
    out["chunks"] = report.chunks_added
    scores = []
    for query in queries:
        result = engine.query(query["text"], k=10, index="bench")
        ranking = list(dict.fromkeys(h.source_path.removesuffix(".md") for h in result.hits))[:10]
        gains = query["relevant"]
        dcg = sum(gains.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranking))
        ideal = sorted(gains.values(), reverse=True)[:10]
        idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
        scores.append(dcg / idcg if idcg else 0.0)
    out["ndcg10"] = round(sum(scores) / len(scores), 4)
    out["queries"] = len(scores)
    out["dense_share_end"] = getattr(result, "dense_share", 1.0)
print(json.dumps(out))
"""


def _qrels_file(dataset: Path) -> Path:
    return dataset / "qrels.tsv" if (dataset / "qrels.tsv").exists() else dataset / "qrels" / "test.tsv"


def _judged_docs(dataset: Path) -> set[str]:
    docs: set[str] = set()
    for line in _qrels_file(dataset).read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2].strip().isdigit() and int(parts[2]) > 0:
            docs.add(parts[1])
    return docs


def _write_corpus(dataset: Path, root: Path, limit: int) -> set[str]:
    """The subset: every judged document, then the others in file order up to ``limit`` (0: all)."""
    root.mkdir(parents=True)
    judged = _judged_docs(dataset)
    rows = [json.loads(line) for line in (dataset / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    others = max(0, limit - len(judged)) if limit else len(rows)
    ids: set[str] = set()
    for row in rows:
        doc = str(row["_id"])
        if doc not in judged:
            if others <= 0:
                continue
            others -= 1
        (root / f"{doc}.md").write_text(f"# {row['title']}\n\n{row['text']}\n", encoding="utf-8")
        ids.add(doc)
    return ids


def _queries(dataset: Path, ids: set[str]) -> list[dict[str, Any]]:
    """The queries with at least one judged document among ``ids`` (their judgements restricted to them)."""
    texts = {}
    with (dataset / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            texts[str(row["_id"])] = row["text"]
    judged: dict[str, dict[str, int]] = {}
    for line in _qrels_file(dataset).read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or not parts[2].strip().lstrip("-").isdigit():
            continue
        query, doc, score = parts[0], parts[1], int(parts[2])
        if doc in ids and score > 0 and query in texts:
            judged.setdefault(query, {})[doc] = score
    return [{"id": q, "text": texts[q], "relevant": judged[q]} for q in sorted(judged, key=str)]


def run_tree(tree: Path, corpus: Path, queries: Path, home: Path, env: dict[str, str]) -> dict[str, Any]:
    child_env = {**env, "PYTHONPATH": str(tree), "ARIES_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(corpus), str(home), str(queries)],
        env=child_env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the run failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=REPO.parent / "shared" / "eval" / "scifact")
    parser.add_argument("--limit-docs", type=int, default=1000, help="0: the whole collection")
    parser.add_argument("--embedder", default="sentence-transformers")
    parser.add_argument("--old", type=Path, help="the tree before keywords first (compared side by side)")
    parser.add_argument("--cache", type=Path, help="ONNX export cache shared by both trees")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    env = {key: value for key, value in os.environ.items() if not key.startswith("AXIOMME_")}
    env["AXIOMME_EMBEDDER"] = args.embedder
    with tempfile.TemporaryDirectory(prefix="aries-bench-kwfirst-") as tmp:
        base = Path(tmp)
        cache = args.cache or base / "onnx-cache"
        env["AXIOMME_EMBEDDER_CACHE"] = str(cache)
        ids = _write_corpus(args.dataset, base / "corpus", args.limit_docs)
        queries = _queries(args.dataset, ids)
        queries_file = base / "queries.json"
        queries_file.write_text(json.dumps(queries), encoding="utf-8")
        trees = [("now", REPO)] + ([("old", args.old.resolve())] if args.old else [])
        results: dict[str, Any] = {"docs": len(ids), "queries": len(queries), "embedder": args.embedder}
        for label, tree in trees:
            results[label] = run_tree(tree, base / "corpus", queries_file, base / f"home-{label}", env)
            print(f"{label}: {json.dumps(results[label])}", flush=True)
    if args.old:
        delta = results["now"]["ndcg10"] - results["old"]["ndcg10"]
        results["ndcg10_delta"] = round(delta, 4)
        print(f"nDCG@10 now - old: {delta:+.4f} (|delta| <= 0.001: {math.isclose(delta, 0, abs_tol=0.001)})")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
