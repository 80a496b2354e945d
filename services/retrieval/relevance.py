"""The relevance threshold: which retrieved passages count as relevant to a question.

Used by the offline answer (:mod:`services.models.answers`), the turn loop (what is injected) and
``confidence.local``; the engine ranks the passages that pass it first before it cuts at ``k``
(:mod:`services.retrieval.cut`) and records the threshold in force with every query
(``params.threshold`` of the retrieval audit row).

Why these signals: the fused score is reciprocal-rank fusion, so it depends only on ranks — the
best passage of an unrelated query gets the same fused score as the best passage of a perfect one,
and no threshold on it can tell them apart.  Two absolute signals are used instead:

* **dense similarity** (cosine, -1…1) is comparable across queries and corpora: with
  all-MiniLM-L6-v2, passages that answer a question score about 0.45–0.7 and unrelated ones
  below 0.15 (measured on small mixed-topic sets);
* **keyword share** (``Hit.keyword_score``, 0…1): the share of the question's keyword weight that
  the passage holds.  The question's terms are analysed like the index (stemmed; stop words and
  question words dropped), each weighted by :func:`term_weight` — an IDF smoothed by a
  background of :data:`BACKGROUND_DOCS` documents, so that in a corpus of one document every
  term weighs about the same (nothing says one is more distinctive than another), while in a
  corpus of 100,000 a word found in half of the documents weighs a fraction of a rare one.
  The raw BM25 score is *not* used: it grows with the corpus (its IDF is ``ln(N/n)``-like), so a
  fixed floor of 1.0 rejected an exact question against a one-document index (BM25 0.69) and
  admitted any shared word in a large one.

A passage is kept when *either* signal vouches for it: ``dense_score >= min_score`` or
``keyword_score >= min_keyword``.  The keyword side is what keeps the no-model ``hash`` embedder
useful (its similarity is a bag-of-words hash, not meaning).  Defaults: ``min_score``
:data:`DEFAULT_MIN_SCORE`, ``min_keyword`` :data:`DEFAULT_MIN_KEYWORD`; set them per workspace in
``workspace.yaml`` (``settings.retrieval.min_score`` / ``min_keyword``) or for the process with
``AXIOMME_MIN_SCORE`` (which wins).  Hits recorded without a keyword share (before it existed)
are judged by their BM25 score against ``min_bm25`` (:data:`DEFAULT_MIN_BM25`), as they were.
The threshold used is recorded in the retrieval audit row (``params.threshold``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.workspace.manager import Workspace

DEFAULT_MIN_SCORE = 0.30
"""Minimum dense (cosine) similarity for a passage to count as relevant."""
DEFAULT_MIN_KEYWORD = 0.4
"""Minimum keyword share (0…1) for a keyword match to count as relevant on its own.  0.4, not 0.5:
SciFact's claims are long, and with the hash embedder at 0.5 half of the questions found no relevant
passage even in an index holding their abstracts (``bench/ask_confidence.py``: 0.4 gives confidence
higher with the abstracts than without for 60 % of the questions, 0.5 for 48 %)."""
DEFAULT_MIN_BM25 = 1.0
"""For hits recorded without a keyword share: the minimum BM25 score (the rule before it existed)."""
BACKGROUND_DOCS = 100
"""Documents of the imagined background corpus that smooths :func:`term_weight`."""
BACKGROUND_SHARE = 0.05
"""The share of the background documents that hold any given term."""
QUESTION_WORDS = (
    "what which who whom whose when where why how do does did done doing has have had having can could "
    "would should shall may might must am were been being about i me my you your we our us he she his "
    "her its them any some all also than so very just there here"
)
"""Words of a question that say nothing about its subject: left out of the keyword share (the
index's stop words are left out of every query already)."""


def term_weight(documents: int, containing: int) -> float:
    """The weight of a query term found in ``containing`` of ``documents`` indexed chunks.

    ``ln(1 + (N + B) / (n + B·s))``: the BM25-style IDF of the corpus joined with a background of
    ``B`` = :data:`BACKGROUND_DOCS` documents, ``s`` = :data:`BACKGROUND_SHARE` of which hold the
    term.  With N = 1 a term in the document and one absent weigh 2.93 and 3.05; with N = 100,000
    a term in 10 documents weighs 8.8, one in half of them 1.1.
    """
    background = BACKGROUND_DOCS * BACKGROUND_SHARE
    return math.log(1.0 + (documents + BACKGROUND_DOCS) / (containing + background))


def keyword_share(weights: Mapping[str, float], terms: Collection[str]) -> float:
    """The share (0…1) of the query terms' total ``weights`` held by a passage with ``terms``."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(weight for term, weight in weights.items() if term in terms) / total


@dataclass(frozen=True)
class Relevance:
    """The relevance threshold of the offline answer (see the module docstring)."""

    min_score: float = DEFAULT_MIN_SCORE
    min_keyword: float = DEFAULT_MIN_KEYWORD
    min_bm25: float = DEFAULT_MIN_BM25
    """Only for hits without a ``keyword_score`` (recorded before it existed)."""

    def admits(self, hit: Mapping[str, Any]) -> bool:
        dense = hit.get("dense_score")
        if dense is not None and float(dense) >= self.min_score:
            return True
        share = hit.get("keyword_score")
        if share is not None:
            return float(share) >= self.min_keyword
        bm25 = hit.get("bm25_score")
        return bm25 is not None and float(bm25) >= self.min_bm25

    def filter(self, hits: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The relevant hits, in their order, with their original ranks."""
        return [dict(hit) for hit in hits if self.admits(hit)]

    def describe(self) -> str:
        return f"similarity ≥ {self.min_score:g} or keyword share ≥ {self.min_keyword:g}"

    def to_dict(self, kept: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {"min_score": self.min_score, "min_keyword": self.min_keyword, "min_bm25": self.min_bm25}
        if kept is not None:
            data["kept"] = [str(hit.get("handle")) for hit in kept]
        return data


def relevance_for(workspace: Workspace | None = None, environ: Mapping[str, str] | None = None) -> Relevance:
    """The threshold in force: ``AXIOMME_MIN_SCORE``, else the workspace setting, else the default.

    A bad value raises :class:`~services.errors.ConfigError` naming the variable or file:line.
    """
    from services.settings.config import env_settings

    min_score: float | None = env_settings(environ).min_score
    min_keyword: float | None = None
    min_bm25: float | None = None
    if workspace is not None:
        retrieval = workspace.config.settings.retrieval
        min_score = retrieval.min_score if min_score is None else min_score
        min_keyword = retrieval.min_keyword
        min_bm25 = retrieval.min_bm25
    return Relevance(
        DEFAULT_MIN_SCORE if min_score is None else min_score,
        DEFAULT_MIN_KEYWORD if min_keyword is None else min_keyword,
        DEFAULT_MIN_BM25 if min_bm25 is None else min_bm25,
    )
