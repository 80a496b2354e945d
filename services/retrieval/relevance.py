"""The relevance threshold: which retrieved passages count as relevant to a question.

Used by the offline answer (:mod:`services.answers`), the turn loop (what is injected) and
``confidence.local``; the engine records the threshold in force with every query
(``params.threshold`` of the retrieval audit row).

Only *relevant* passages are quoted (:class:`Relevance`).  Why this signal: the fused score
is reciprocal-rank fusion, so it depends only on ranks — the best passage of an unrelated
query gets the same fused score as the best passage of a perfect one, and no threshold on it
can tell them apart.  The two retrievers' own scores are absolute:

* **dense similarity** (cosine, -1…1) is comparable across queries and corpora: with
  all-MiniLM-L6-v2, passages that answer a question score about 0.45–0.7 and unrelated ones
  below 0.15 (measured on small mixed-topic sets);
* **BM25** is not normalised, but a score of at least 1 means at least one distinctive term
  matched; matches on common words only ("what is the …") stay well below it.

A passage is kept when *either* retriever vouches for it: ``dense_score >= min_score`` or
``bm25_score >= min_bm25``.  The keyword side is what keeps the no-model ``hash`` embedder
useful (its similarity is a bag-of-words hash, not meaning).  Defaults: ``min_score``
:data:`DEFAULT_MIN_SCORE`, ``min_bm25`` :data:`DEFAULT_MIN_BM25`; set them per workspace in
``workspace.yaml`` (``settings.retrieval.min_score`` / ``min_bm25``) or for the process with
``AXIOMME_MIN_SCORE`` (which wins).  The threshold used is recorded in the retrieval audit row
(``params.threshold``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.workspaces import Workspace

DEFAULT_MIN_SCORE = 0.30
"""Minimum dense (cosine) similarity for a passage to count as relevant."""
DEFAULT_MIN_BM25 = 1.0
"""Minimum BM25 score for a keyword match to count as relevant on its own."""


@dataclass(frozen=True)
class Relevance:
    """The relevance threshold of the offline answer (see the module docstring)."""

    min_score: float = DEFAULT_MIN_SCORE
    min_bm25: float = DEFAULT_MIN_BM25

    def admits(self, hit: Mapping[str, Any]) -> bool:
        dense = hit.get("dense_score")
        bm25 = hit.get("bm25_score")
        return (dense is not None and float(dense) >= self.min_score) or (
            bm25 is not None and float(bm25) >= self.min_bm25
        )

    def filter(self, hits: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The relevant hits, in their order, with their original ranks."""
        return [dict(hit) for hit in hits if self.admits(hit)]

    def describe(self) -> str:
        return f"similarity ≥ {self.min_score:g} or keyword score ≥ {self.min_bm25:g}"

    def to_dict(self, kept: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {"min_score": self.min_score, "min_bm25": self.min_bm25}
        if kept is not None:
            data["kept"] = [str(hit.get("handle")) for hit in kept]
        return data


def relevance_for(workspace: Workspace | None = None, environ: Mapping[str, str] | None = None) -> Relevance:
    """The threshold in force: ``AXIOMME_MIN_SCORE``, else the workspace setting, else the default.

    A bad value raises :class:`~services.errors.ConfigError` naming the variable or file:line.
    """
    from services.config import env_settings

    min_score: float | None = env_settings(environ).min_score
    min_bm25: float | None = None
    if workspace is not None:
        retrieval = workspace.config.settings.retrieval
        min_score = retrieval.min_score if min_score is None else min_score
        min_bm25 = retrieval.min_bm25
    return Relevance(
        DEFAULT_MIN_SCORE if min_score is None else min_score,
        DEFAULT_MIN_BM25 if min_bm25 is None else min_bm25,
    )
