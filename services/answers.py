"""The ``offline`` provider: answers with the retrieved passages and their citation handles.

It needs no model. Its answer is clearly labelled, quotes each passage (cut to a readable
length) under its handle, and is deterministic: the same hits give the same text.

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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.retrieval import RetrievalEngine
    from services.retrieval.models import QueryResult
    from services.workspaces import Workspace

OFFLINE_LABEL = "offline (no model)"
PASSAGE_CHARS = 480
DEFAULT_MIN_SCORE = 0.30
"""Minimum dense (cosine) similarity for a passage to count as relevant."""
DEFAULT_MIN_BM25 = 1.0
"""Minimum BM25 score for a keyword match to count as relevant on its own."""
NO_INDEX_REPLY = (
    f"{OFFLINE_LABEL}: no index is in use, so there is nothing to answer from yet. "
    "Add documents with /rag index add PATH; your message is kept in the transcript."
)


@dataclass(frozen=True)
class Answer:
    text: str
    provider: str
    provenance: str  # "local" or "cloud"
    citations: list[str] = field(default_factory=list)


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


def _where(hit: Mapping[str, Any]) -> str:
    if hit.get("page") is not None:
        return f"{hit.get('source_path', '')}, p. {hit['page']}"
    section = hit.get("section")
    return f"{hit.get('source_path', '')} § {section}" if section else str(hit.get("source_path", ""))


def _cut(text: str, limit: int = PASSAGE_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return f"{cut} …"


def offline_answer(
    question: str,
    index: str | None,
    hits: Sequence[Mapping[str, Any]],
    *,
    relevance: Relevance | None = None,
) -> Answer:
    """What the offline provider says for ``question`` given the retrieved ``hits`` (best first).

    Only hits that pass ``relevance`` (default: :class:`Relevance` defaults) are quoted; when
    none does, the answer says so plainly.
    """
    if index is None:
        return Answer(NO_INDEX_REPLY, "offline", "local")
    if not hits:
        text = f"{OFFLINE_LABEL}: nothing in index {index} matches this question."
        return Answer(text, "offline", "local")
    relevance = relevance or Relevance()
    kept = relevance.filter(hits)
    if not kept:
        text = (
            f"{OFFLINE_LABEL}: no passage in index {index} is relevant enough to answer this "
            f"({len(hits)} retrieved, none with {relevance.describe()}). "
            "Try other words, or /rag query to see the closest passages."
        )
        return Answer(text, "offline", "local")
    noun = "passage" if len(kept) == 1 else "passages"
    lines = [f"{OFFLINE_LABEL}: the {len(kept)} relevant {noun} in index {index}; open one with /rag show HANDLE."]
    for hit in kept:
        lines.append("")
        lines.append(f"[{hit['rank']}] {hit['handle']}  ({_where(hit)})")
        lines.append(f"    {_cut(str(hit.get('text', '')))}")
    return Answer("\n".join(lines), "offline", "local", [str(hit["handle"]) for hit in kept])


def answer_from_index(
    engine: RetrievalEngine,
    question: str,
    *,
    k: int = 5,
    relevance: Relevance | None = None,
) -> tuple[QueryResult | None, Answer]:
    """Retrieve for ``question`` from the index in use and answer offline.

    The threshold applied is recorded in the retrieval's audit row.  Returns the query
    result (all hits, for the Context pane) and the answer (only the relevant ones).
    """
    index = engine.active_index
    if index is None:
        return None, offline_answer(question, None, [])
    relevance = relevance or relevance_for(engine.workspace)
    result = engine.query(question, k=k)
    hits = [hit.to_dict() for hit in result.hits]
    kept = relevance.filter(hits)
    if result.audit_id is not None:
        engine.audit.record_threshold(result.audit_id, relevance.to_dict(kept))
    return result, offline_answer(question, result.index, hits, relevance=relevance)
