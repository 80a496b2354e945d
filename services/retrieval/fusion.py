"""Combining the BM25 and dense rankings into one.

``rrf``: weighted reciprocal rank fusion, ``score(d) = Σ w_r / (k + rank_r(d))`` over the
retrievers that returned ``d`` (ranks start at 1).  Ties are broken by the better single
rank and then by chunk id, so the order is deterministic.

A query fuses two lists of ~200 candidates and reads ~20 of the result, so the entries are
named tuples (a frozen dataclass costs several times more to build, ~400 of them per query).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from services.errors import ConfigError
from services.retrieval.settings import FusionSettings

METHODS = ("rrf", "bm25", "dense")
_NONE = 1 << 30
"""The rank of a retriever that did not return the chunk (only ever compared)."""


class Fused(NamedTuple):
    chunk_id: str
    score: float
    bm25_rank: int | None = None
    bm25_score: float | None = None
    dense_rank: int | None = None
    dense_score: float | None = None


def _ranks(hits: Sequence[tuple[str, float]]) -> dict[str, tuple[int, float]]:
    ranks: dict[str, tuple[int, float]] = {}
    for position, (chunk_id, score) in enumerate(hits, start=1):
        if chunk_id not in ranks:
            ranks[chunk_id] = (position, score)
    return ranks


def fuse(
    bm25: Sequence[tuple[str, float]],
    dense: Sequence[tuple[str, float]],
    settings: FusionSettings | None = None,
) -> list[Fused]:
    """One list, best first, with each retriever's rank and score kept for inspection."""
    settings = settings or FusionSettings()
    if settings.method not in METHODS:
        raise ConfigError(f"unknown fusion method {settings.method!r}; use one of: {', '.join(METHODS)}")
    if settings.rrf_k <= 0:
        raise ConfigError("rrf_k must be positive")
    lexical, semantic = _ranks(bm25), _ranks(dense)
    method, k = settings.method, settings.rrf_k
    w_bm25, w_dense = settings.bm25_weight, settings.dense_weight
    scored: list[tuple[float, int, str, tuple[int, float] | None, tuple[int, float] | None]] = []
    for chunk_id in {**lexical, **semantic}:
        b = lexical.get(chunk_id)
        d = semantic.get(chunk_id)
        if method == "bm25":
            if b is None:
                continue
            score = b[1]
        elif method == "dense":
            if d is None:
                continue
            score = d[1]
        else:
            score = (w_bm25 / (k + b[0]) if b else 0.0) + (w_dense / (k + d[0]) if d else 0.0)
        best = min(b[0] if b else _NONE, d[0] if d else _NONE)
        scored.append((-score, best, chunk_id, b, d))
    scored.sort()  # chunk ids are unique: the comparison never reaches the rank tuples
    return [
        Fused(
            chunk_id,
            -negative,
            b[0] if b else None,
            b[1] if b else None,
            d[0] if d else None,
            d[1] if d else None,
        )
        for negative, _, chunk_id, b, d in scored
    ]
