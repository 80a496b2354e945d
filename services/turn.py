"""A turn of the conversation, headless: the one place where a message becomes an answer.

Today's turn: record the operator's message, retrieve from the index in use (audited by the
engine), record the injected set, and answer with the ``offline`` provider (the retrieved
passages under their citation handles). The TUI, ``aries ask`` and replay all call this; they
differ only in how they show the entries the conversation hands them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.conversation import AssistantAnswer, RetrievalSet, UserMessage

if TYPE_CHECKING:
    from services.session import Session

MESSAGE_K = 5


@dataclass
class TurnOutcome:
    turn_id: str
    index: str | None
    hits: list[dict[str, Any]] = field(default_factory=list)
    answer: str = ""


def run_offline_turn(session: Session, text: str, *, k: int = MESSAGE_K) -> TurnOutcome:
    """One turn with the offline provider (blocking: retrieval runs Tantivy, Chroma and the embedder)."""
    from services.answers import offline_answer

    conversation = session.conversation
    turn_id = conversation.new_turn()
    conversation.record(UserMessage(text=text, turn_id=turn_id, step=0))
    engine = session.engine()
    index = engine.active_index
    hits: list[dict[str, Any]] = []
    if index is not None:
        result = engine.query(text, k=k)
        hits = [hit.to_dict() for hit in result.hits]
    if index is not None:  # the injected set (the engine audited the query already)
        handles = [str(h.get("handle")) for h in hits]
        conversation.record(RetrievalSet(query=text, index=index, handles=handles, turn_id=turn_id, step=1))
    answer = offline_answer(text, index, hits)
    conversation.record(
        AssistantAnswer(
            text=answer.text,
            provider=answer.provider,
            provenance=answer.provenance,
            citations=answer.citations,
            turn_id=turn_id,
            step=2,
        )
    )
    return TurnOutcome(turn_id, index, hits, answer.text)
