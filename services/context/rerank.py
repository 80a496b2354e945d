"""Post-retrieval reranking of find/search (``AXIOMME_RERANKER=doc-aware-v1|off``).

``doc-aware-v1`` multiplies each hit's score by a document-type weight and a directory boost::

    score' = score × type_weight(hit) × (DIR_BOOST if the hit is an L2 file whose directory's
                                         .abstract.md is among the candidates, else 1)

    type_weight:  L2 Markdown or text (.md .markdown .mdown .txt .rst)   1.00
                  other L2 (HTML, PDF, EPUB, ...)                        0.95
                  L1 tier file (.overview.md)                            0.85
                  L0 tier file (.abstract.md)                            0.80
    DIR_BOOST = 1.10

``off`` leaves scores as they are.  Either way hits are then ordered by score (rounded to 9
decimals, descending) and then by URI, so the order is a pure function of the candidates.
"""

from __future__ import annotations

from collections.abc import Iterable

TEXT_SUFFIXES: tuple[str, ...] = (".md", ".markdown", ".mdown", ".txt", ".rst")
TYPE_WEIGHTS: dict[str, float] = {"L2-text": 1.0, "L2-other": 0.95, "L1": 0.85, "L0": 0.80}
DIR_BOOST = 1.10


def type_weight(level: str, name: str) -> float:
    if level == "L2":
        return TYPE_WEIGHTS["L2-text"] if name.lower().endswith(TEXT_SUFFIXES) else TYPE_WEIGHTS["L2-other"]
    return TYPE_WEIGHTS[level]


def rerank_factor(profile: str, level: str, name: str, directory: str, abstract_dirs: Iterable[str]) -> float:
    """The factor ``profile`` applies to one hit (``directory`` is the hit's parent URI)."""
    if profile == "off":
        return 1.0
    factor = type_weight(level, name)
    if level == "L2" and directory in abstract_dirs:
        factor *= DIR_BOOST
    return factor


def order_key(score: float, uri: str) -> tuple[float, str]:
    return (-round(score, 9), uri)
