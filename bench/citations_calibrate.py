"""Could a better score or a calibrated threshold reach the citation bar? (issue 33 item 4)

    .venv/bin/python bench/citations_calibrate.py [--pairs FILE] [--embedder minilm|hash|none]

On tests/fixtures/citation_pairs.jsonl (bench/citation_set.py; never changed here), each pair's
support is scored five ways:

* ``overlap``: the checker's word overlap with the chunk's best window (services/assistant/citations.py);
* ``cosine chunk``: the sentence's vector against the whole chunk's vector (what an index stores);
* ``cosine window``: the best cosine of the sentence against each window of one or two of the chunk's
  sentences (would need the chunk's sentences encoded: not stored by an index today);
* ``overlap + cosine chunk`` and ``overlap + cosine window``: the sums.

For each, the ranking power (AUC: the chance a supported pair scores above an unsupported one), and a
threshold **chosen on the even query ids** — the highest-recall cut whose "unsupported" precision is
≥ 0.9 there (else the best F1) — **tested on the odd ids**, and the other way round. Then the arithmetic
of the bar: the best recall at precision ≥ 0.9 on the whole set, an upper bound no threshold can beat.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.citations import PAIRS, embedder, load_pairs  # noqa: E402
from services.assistant.citations import overlap_score, split_sentences  # noqa: E402

Row = tuple[str, int, float]  # label, query id, score


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def windows(chunk: str) -> list[str]:
    """The chunk's windows of one or two adjacent sentences, as the overlap path reads them."""
    sentences = [chunk[s.start : s.end] for s in split_sentences(chunk)]
    return sentences + [f"{a} {b}" for a, b in zip(sentences, sentences[1:], strict=False)] or [chunk]


def scores(pairs: list[dict[str, Any]], model: Any) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"overlap": [overlap_score(p["sentence"], p["chunk"])[0] for p in pairs]}
    if model is None:
        return out
    began = time.perf_counter()
    claims = sorted({p["sentence"] for p in pairs})
    chunks = sorted({p["chunk"] for p in pairs})
    claim_vec = dict(zip(claims, model.embed(claims), strict=True))
    chunk_vec = dict(zip(chunks, model.embed(chunks), strict=True))
    pieces = sorted({w for chunk in chunks for w in windows(chunk)})
    piece_vec = dict(zip(pieces, model.embed(pieces), strict=True))
    took = time.perf_counter() - began
    print(f"(encoded {len(claims)} claims, {len(chunks)} chunks, {len(pieces)} windows in {took:.0f} s)")
    out["cosine chunk"] = [_cos(claim_vec[p["sentence"]], chunk_vec[p["chunk"]]) for p in pairs]
    out["cosine window"] = [
        max(_cos(claim_vec[p["sentence"]], piece_vec[w]) for w in windows(p["chunk"])) for p in pairs
    ]
    out["overlap + cosine chunk"] = [a + b for a, b in zip(out["overlap"], out["cosine chunk"], strict=True)]
    out["overlap + cosine window"] = [a + b for a, b in zip(out["overlap"], out["cosine window"], strict=True)]
    return out


def auc(rows: list[Row]) -> float:
    pos = [s for label, _, s in rows if label == "supported"]
    neg = [s for label, _, s in rows if label == "unsupported"]
    return sum((n < p) + 0.5 * (n == p) for p in pos for n in neg) / (len(pos) * len(neg))


def at(rows: list[Row], cut: float) -> tuple[float, float]:
    """Precision and recall of "unsupported" = score below ``cut``."""
    flagged = [label for label, _, s in rows if s < cut]
    hits = sum(1 for label in flagged if label == "unsupported")
    truly = sum(1 for label, _, _ in rows if label == "unsupported")
    return (hits / len(flagged) if flagged else 1.0), hits / truly


def choose(rows: list[Row]) -> float:
    """The highest-recall cut with precision ≥ 0.9 on ``rows``; if none, the best F1."""
    cuts = sorted({s for _, _, s in rows}) + [math.inf]
    fine = [(at(rows, c)[1], c) for c in cuts if at(rows, c)[0] >= 0.9 and at(rows, c)[1] > 0]
    if fine:
        return max(fine)[1]

    def f1(c: float) -> float:
        p, r = at(rows, c)
        return 2 * p * r / (p + r) if p + r else 0.0

    return max(cuts, key=f1)


def best_recall_at_precision(rows: list[Row], precision: float = 0.9) -> float:
    cuts = sorted({s for _, _, s in rows}) + [math.inf]
    return max((at(rows, c)[1] for c in cuts if at(rows, c)[0] >= precision), default=0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--embedder", default="minilm", help="minilm (ONNX), hash, or none")
    args = parser.parse_args(argv)
    pairs = load_pairs(args.pairs)
    model = None if args.embedder == "none" else embedder(args.embedder)
    print(f"labelled set {args.pairs.name}: {len(pairs)} pairs; embedder {args.embedder}")
    for name, values in scores(pairs, model).items():
        rows = [(p["label"], int(p["query_id"]), v) for p, v in zip(pairs, values, strict=True)]
        even = [r for r in rows if r[1] % 2 == 0]
        odd = [r for r in rows if r[1] % 2 == 1]
        held = []
        for fit, test, label in ((even, odd, "even→odd"), (odd, even, "odd→even")):
            cut = choose(fit)
            p, r = at(test, cut)
            held.append(f"{label} cut {cut:.3f}: P={p:.3f} R={r:.3f}")
        print(
            f"  {name:<24} AUC={auc(rows):.3f}  best R at P≥0.9 (whole set, an upper bound)="
            f"{best_recall_at_precision(rows):.3f}  |  " + "  ".join(held)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
