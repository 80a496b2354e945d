"""The ``offline`` provider: answers with the retrieved passages and their citation handles.

It needs no model. Its answer is clearly labelled, quotes each passage (cut to a readable
length) under its handle, and is deterministic: the same hits give the same text.

Only *relevant* passages are quoted: the relevance threshold is
:mod:`services.retrieval.relevance` (the same one the engine records with every query).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.retrieval.relevance import Relevance, relevance_for

if TYPE_CHECKING:
    from services.retrieval.engine import RetrievalEngine
    from services.retrieval.models import QueryResult

OFFLINE_LABEL = "offline (no model)"
PASSAGE_CHARS = 480
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
    result = engine.query(question, k=k, relevance=relevance)  # the relevant ones first, then the cut
    hits = [hit.to_dict() for hit in result.hits]
    kept = relevance.filter(hits)
    if result.audit_id is not None:
        engine.audit.record_threshold(result.audit_id, relevance.to_dict(kept))
    return result, offline_answer(question, result.index, hits, relevance=relevance)
