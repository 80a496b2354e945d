"""The ``offline`` provider: answers with the retrieved passages and their citation handles.

It needs no model. Its answer is clearly labelled, quotes each passage (cut to a readable
length) under its handle, and is deterministic: the same hits give the same text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


def _where(hit: dict[str, Any]) -> str:
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


def offline_answer(question: str, index: str | None, hits: list[dict[str, Any]]) -> Answer:
    """What the offline provider says for ``question`` given the retrieved ``hits`` (best first)."""
    if index is None:
        return Answer(NO_INDEX_REPLY, "offline", "local")
    if not hits:
        text = f"{OFFLINE_LABEL}: nothing in index {index} matches this question."
        return Answer(text, "offline", "local")
    lines = [f"{OFFLINE_LABEL}: the {len(hits)} best passages in index {index}; open one with /rag show HANDLE."]
    for hit in hits:
        lines.append("")
        lines.append(f"[{hit['rank']}] {hit['handle']}  ({_where(hit)})")
        lines.append(f"    {_cut(str(hit.get('text', '')))}")
    return Answer("\n".join(lines), "offline", "local", [str(hit["handle"]) for hit in hits])
