"""``confidence.local``: how well the local retrieval supports an answer, in 0…1.

The inputs are the passages the turn injected (those that passed the relevance threshold,
``services.models.answers.Relevance``) and the answer's use of them::

    strength(h) = max(dense(h), keyword(h))
        dense(h)   = clamp(dense_score, 0, 1)           if dense_score   >= min_score,   else 0
        keyword(h) = KEYWORD_CAP * keyword_score        if keyword_score >= min_keyword, else 0
                     (a hit recorded without keyword_score: bm25 / (bm25 + BM25_HALF) if bm25_score >= min_bm25)
    top        = max strength over the injected passages (0 when none passed the threshold)
    cited      = share of the injected passages whose handle the answer cites
    confidence.local = round(top * (0.5 + 0.5 * cited), 4)

Why: the fused score is rank-only (reciprocal-rank fusion) and says nothing about absolute
relevance; the dense cosine is absolute, and so is the keyword share (0…1, the share of the
question's keyword weight the passage holds; see :mod:`services.retrieval.relevance`). The best
passage carries the answer; an answer that cites none of what was retrieved keeps only half of
that support. No passage over the threshold — an empty index, or a question the documents do not
cover — gives 0.

Checked against the shared SciFact set (``bench/ask_confidence.py``, and a smaller run in
``tests/pipe/test_confidence_eval.py``): the mean is higher for questions whose relevant
abstracts are in the index than for the same questions against an index without them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.retrieval.relevance import DEFAULT_MIN_BM25, DEFAULT_MIN_KEYWORD

KEYWORD_CAP = 0.7
"""A keyword match, however complete, is weaker evidence than meaning: its strength is at most this."""
BM25_HALF = 10.0
"""The BM25 score that counts as a keyword strength of 0.5."""


def strength(
    hit: Mapping[str, Any],
    min_score: float,
    min_keyword: float = DEFAULT_MIN_KEYWORD,
    min_bm25: float = DEFAULT_MIN_BM25,
) -> float:
    """One passage's support, 0…1 (see the module docstring)."""
    dense = hit.get("dense_score")
    share = hit.get("keyword_score")
    bm25 = hit.get("bm25_score")
    dense_part = min(1.0, max(0.0, float(dense))) if dense is not None and float(dense) >= min_score else 0.0
    keyword_part = 0.0
    if share is not None:
        keyword_part = KEYWORD_CAP * float(share) if float(share) >= min_keyword else 0.0
    elif bm25 is not None and float(bm25) >= min_bm25 and float(bm25) > 0:
        keyword_part = float(bm25) / (float(bm25) + BM25_HALF)
    return max(dense_part, keyword_part)


def local_confidence(
    hits: Sequence[Mapping[str, Any]],
    citations: Sequence[str],
    *,
    min_score: float,
    min_keyword: float = DEFAULT_MIN_KEYWORD,
    min_bm25: float = DEFAULT_MIN_BM25,
) -> tuple[float, dict[str, Any]]:
    """``(confidence.local, its inputs)`` for the injected ``hits`` and the answer's ``citations``."""
    strengths = [strength(hit, min_score, min_keyword, min_bm25) for hit in hits]
    top = max(strengths, default=0.0)
    handles = [str(hit.get("handle")) for hit in hits]
    cited_count = sum(1 for handle in handles if handle in set(citations))
    cited = cited_count / len(handles) if handles else 0.0
    value = round(top * (0.5 + 0.5 * cited), 4) if handles else 0.0
    inputs = {
        "passages": len(handles),
        "top_strength": round(top, 4),
        "cited_share": round(cited, 4),
        "threshold": {"min_score": min_score, "min_keyword": min_keyword, "min_bm25": min_bm25},
        "formula": "top_strength * (0.5 + 0.5 * cited_share)",
    }
    return value, inputs


__all__ = ["BM25_HALF", "KEYWORD_CAP", "local_confidence", "strength"]
