"""Combining the BM25 and dense rankings into one.

``rrf``: weighted reciprocal rank fusion, ``score(d) = Σ w_r / (k + rank_r(d))`` over the
retrievers that returned ``d`` (ranks start at 1).  Ties are broken by the better single
rank and then by chunk id, so the order is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.errors import ConfigError
from services.retrieval.settings import FusionSettings

METHODS = ("rrf", "bm25", "dense")


@dataclass(frozen=True)
class Fused:
    chunk_id: str
    score: float
    bm25_rank: int | None = None
    bm25_score: float | None = None
    dense_rank: int | None = None
    dense_score: float | None = None


def _ranks(hits: Sequence[tuple[str, float]]) -> dict[str, tuple[int, float]]:
    ranks: dict[str, tuple[int, float]] = {}
    for position, (chunk_id, score) in enumerate(hits, start=1):
        ranks.setdefault(chunk_id, (position, score))
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
    scored: list[tuple[float, int, str]] = []
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
            score = (settings.bm25_weight / (k + b[0]) if b else 0.0) + (
                settings.dense_weight / (k + d[0]) if d else 0.0
            )
        best = min(b[0] if b else 1 << 30, d[0] if d else 1 << 30)
        scored.append((-score, best, chunk_id))
    scored.sort()
    fused: list[Fused] = []
    for negative, _, chunk_id in scored:
        b = lexical.get(chunk_id)
        d = semantic.get(chunk_id)
        fused.append(
            Fused(
                chunk_id=chunk_id,
                score=-negative,
                bm25_rank=b[0] if b else None,
                bm25_score=b[1] if b else None,
                dense_rank=d[0] if d else None,
                dense_score=d[1] if d else None,
            )
        )
    return fused
