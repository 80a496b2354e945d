"""The citation checker on the labelled set: quality of "unsupported" and cost per answer.

    .venv/bin/python bench/citations.py [--pairs FILE] [--embedders hash,minilm] [--dataset DIR]

1. **Quality** on tests/fixtures/citation_pairs.jsonl (bench/citation_set.py: SciFact claims against
   their judged abstracts = supported, against the top BM25 abstract not judged relevant =
   unsupported). Each pair is checked as a one-sentence answer citing its chunk; printed: precision
   and recall of "unsupported" (the issue's bar: ≥ 0.9 and ≥ 0.8), the share marked weak, the
   ranking power of the raw score (AUC), for the whole set and each half (even / odd query id).
   Paths: overlap only; overlap + vectors for each embedder of ``--embedders`` (the chunk's
   "stored" vector is the embedder's vector of the chunk text, as an index would hold).
2. **A diagnostic, not the acceptance set**: the same claims against an *off-topic* abstract (a
   fixed pseudo-random one of the collection, never a judged one), when ``--dataset`` is there —
   how well a citation of the wrong passage altogether is caught.
3. **Cost** per answer of 10 sentences (10 consecutive pairs, each sentence citing its chunk), the
   prepared chunks forgotten before each answer (the word → stem memo kept warm, as in a running
   session; ``cold words`` clears it too): median and p95 ms, for the overlap path and each
   embedding path (one batched encode of the 10 sentences + stored vectors), and the batched
   encode alone.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.citation_set import DEFAULT_DATASET, with_texts  # noqa: E402
from services.assistant.citations import check_answer, clear_caches  # noqa: E402

PAIRS = REPO / "tests" / "fixtures" / "citation_pairs.jsonl"
HANDLE = "scifact:{:016x}"

Encode = Callable[[list[str]], Sequence[Sequence[float]]]


def load_pairs(path: Path = PAIRS, dataset: Path = DEFAULT_DATASET) -> list[dict[str, Any]]:
    """The committed ids and labels, with the texts joined from the SciFact collection."""
    with path.open(encoding="utf-8") as handle:
        return with_texts([json.loads(line) for line in handle if line.strip()], dataset)


def handle_of(text: str) -> str:
    """A stable handle for a chunk text (the pairs carry none)."""
    import hashlib

    return HANDLE.format(int(hashlib.sha256(text.encode()).hexdigest()[:16], 16))


def judge(
    pairs: list[dict[str, Any]], encode: Encode | None = None, vectors: dict[str, Sequence[float]] | None = None
) -> list[tuple[str, str, float]]:
    """``(label, verdict, score)`` per pair; the score ranks support (overlap, + cosine with vectors)."""
    out = []
    for pair in pairs:
        handle = handle_of(pair["chunk"])
        kwargs: dict[str, Any] = {}
        if encode is not None and vectors is not None:
            kwargs = {"encode": encode, "vectors_of": lambda hs: {h: vectors[h] for h in hs}}
        report = check_answer(f"{pair['sentence']} [{handle}]", {handle: pair["chunk"]}, **kwargs)
        cited = [sentence for sentence in report.sentences if sentence.checks][-1]  # a claim may be 2 sentences
        check = cited.checks[0]
        score = (check.overlap or 0.0) + (check.cosine or 0.0)
        out.append((pair["label"], cited.verdict, score))
    return out


def quality(rows: list[tuple[str, str, float]]) -> dict[str, Any]:
    predicted = [label for label, verdict, _ in rows if verdict == "unsupported"]
    truly = sum(1 for label, _, _ in rows if label == "unsupported")
    hits = sum(1 for label in predicted if label == "unsupported")
    pos = [score for label, _, score in rows if label == "supported"]
    neg = [score for label, _, score in rows if label == "unsupported"]
    auc = sum((n < p) + 0.5 * (n == p) for p in pos for n in neg) / (len(pos) * len(neg)) if pos and neg else 0.0
    return {
        "pairs": len(rows),
        "precision": round(hits / len(predicted), 3) if predicted else 0.0,
        "recall": round(hits / truly, 3) if truly else 0.0,
        "weak_share": round(sum(1 for _, verdict, _ in rows if verdict == "weak") / len(rows), 3),
        "auc": round(auc, 3),
    }


def report_quality(name: str, pairs: list[dict[str, Any]], encode: Encode | None, vectors: Any) -> None:
    rows = judge(pairs, encode, vectors)
    halves = {
        "all": rows,
        "even": [row for row, pair in zip(rows, pairs, strict=True) if int(pair["query_id"]) % 2 == 0],
        "odd": [row for row, pair in zip(rows, pairs, strict=True) if int(pair["query_id"]) % 2 == 1],
    }
    for part, part_rows in halves.items():
        q = quality(part_rows)
        bar = "meets" if q["precision"] >= 0.9 and q["recall"] >= 0.8 else "BELOW"
        print(
            f"  {name:<16} {part:<4} n={q['pairs']:<4} unsupported P={q['precision']:.3f} R={q['recall']:.3f} "
            f"weak={q['weak_share']:.3f} AUC={q['auc']:.3f}  ({bar} the 0.9/0.8 bar)"
        )


def off_topic(pairs: list[dict[str, Any]], dataset: Path) -> list[dict[str, Any]]:
    """Each claim's supported pair, plus the claim against a fixed pseudo-random abstract of the collection."""
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as handle:
        corpus = [json.loads(line) for line in handle if line.strip()]
    judged = {pair["doc_id"] for pair in pairs if pair["label"] == "supported"}
    pool = sorted((doc for doc in corpus if doc["_id"] not in judged), key=lambda doc: int(doc["_id"]))
    chooser = random.Random(33)
    out = [pair for pair in pairs if pair["label"] == "supported"]
    for claim in sorted({(pair["query_id"], pair["sentence"]) for pair in pairs}, key=lambda c: int(c[0])):
        doc = chooser.choice(pool)
        chunk = " ".join(str(doc["text"]).split())
        out.append({"query_id": claim[0], "sentence": claim[1], "chunk": chunk, "label": "unsupported"})
    return out


def embedder(name: str) -> Any:
    from services.retrieval.embedders import HashEmbedder, create_minilm
    from services.retrieval.settings import RetrievalSettings

    if name == "hash":
        return HashEmbedder()
    return create_minilm("onnx", RetrievalSettings.from_env())


def cost(
    pairs: list[dict[str, Any]], encode: Encode | None, vectors: Any, *, cold_words: bool = False
) -> tuple[float, float]:
    """Median and p95 ms of one answer of 10 sentences, each citing its chunk, prepared chunks forgotten."""
    timings = []
    for start in range(0, len(pairs) - 9, 10):
        group = pairs[start : start + 10]
        chunks = {handle_of(pair["chunk"]): pair["chunk"] for pair in group}
        answer = " ".join(f"{pair['sentence'].rstrip('.')} [{handle_of(pair['chunk'])}]." for pair in group)
        kwargs: dict[str, Any] = {}
        if encode is not None:
            kwargs = {"encode": encode, "vectors_of": lambda hs: {h: vectors[h] for h in hs}}
        clear_caches(words=cold_words)
        began = time.perf_counter()
        report = check_answer(answer, chunks, **kwargs)
        timings.append((time.perf_counter() - began) * 1000)
        assert sum(1 for sentence in report.sentences if sentence.checks) == 10
    ordered = sorted(timings)
    return statistics.median(ordered), ordered[max(0, round(0.95 * len(ordered)) - 1)]


def encode_cost(pairs: list[dict[str, Any]], encode: Encode) -> tuple[float, float]:
    """Median and p95 ms of the one batched encode of an answer's 10 sentences, alone."""
    timings = []
    for start in range(0, len(pairs) - 9, 10):
        batch = [pair["sentence"] for pair in pairs[start : start + 10]]
        began = time.perf_counter()
        encode(batch)
        timings.append((time.perf_counter() - began) * 1000)
    ordered = sorted(timings)
    return statistics.median(ordered), ordered[max(0, round(0.95 * len(ordered)) - 1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--embedders", default="hash,minilm", help="comma-separated: hash, minilm (ONNX); '' for none")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    args = parser.parse_args(argv)
    pairs = load_pairs(args.pairs)
    diagnostic = off_topic(pairs, args.dataset) if (args.dataset / "corpus.jsonl").is_file() else None
    paths: list[tuple[str, Encode | None, Any]] = [("overlap", None, None)]
    for name in [n for n in args.embedders.split(",") if n]:
        model = embedder(name)
        texts = sorted({pair["chunk"] for pair in pairs + (diagnostic or [])})
        began = time.perf_counter()
        stored = dict(zip(map(handle_of, texts), model.embed(texts), strict=True))
        print(f"({name}: {len(texts)} chunk vectors in {time.perf_counter() - began:.1f} s, as an index holds them)")
        paths.append((f"overlap+{name}", model.embed, stored))
    print(f"labelled set {args.pairs.name}: {len(pairs)} pairs")
    for name, encode, vectors in paths:
        report_quality(name, pairs, encode, vectors)
    if diagnostic is not None:
        print("diagnostic (not the acceptance set): claims against an off-topic abstract")
        for name, encode, vectors in paths:
            q = quality(judge(diagnostic, encode, vectors))
            print(f"  {name:<16} unsupported P={q['precision']:.3f} R={q['recall']:.3f} weak={q['weak_share']:.3f}")
    print("cost per answer of 10 cited sentences (bar: overlap ≤ 5 ms, embedding ≤ 40 ms)")
    median, p95 = cost(pairs, None, None, cold_words=True)
    print(f"  {'overlap, cold words':<24} median {median:.2f} ms  p95 {p95:.2f} ms")
    for name, encode, vectors in paths:
        if encode is not None:
            encode(["warm-up"])
        median, p95 = cost(pairs, encode, vectors)
        print(f"  {name:<24} median {median:.2f} ms  p95 {p95:.2f} ms")
        if encode is not None:
            median, p95 = encode_cost(pairs, encode)
            print(f"  {'  of which ' + name.split('+')[1] + ' encode':<24} median {median:.2f} ms  p95 {p95:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
