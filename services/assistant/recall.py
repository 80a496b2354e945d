"""Earlier turns brought back: for one turn, the left-out turns most relevant to its message.

The turn loop makes one :class:`TurnRecall` per turn (:meth:`~services.assistant.loop.TurnLoop._begin`).
When a fitted request leaves turns out that were never searched (``Fitted.wants_recall``), the loop
calls :meth:`TurnRecall.find` in a thread and hands the hits to the fitter
(:meth:`~services.assistant.context.ContextFitter.bring_back`), which sends the best of them beside
the passages, inside the same untrusted delimiters, with their handles ``turn:<conversation>:<n>``.

How they are found (:mod:`services.history_search.turns`): BM25 over the conversation index, plus,
where the workspace has an embedder, the message's vector against each left-out turn's stored
vector. The message is encoded once: the vector the retrieval of this turn made is reused when it is
in the workspace's default space (:attr:`TurnRecall.vector`), else it is made here — and either way
it is kept as this turn's own vector (:meth:`TurnRecall.keep_own`), so that later turns find this
one by meaning without encoding it again. The index is kept current off the request's path: after a
turn that searched (:meth:`TurnRecall.after_turn`, when it lacks a turn the next search may reach —
a Tantivy commit costs ~0.2 s), and before a search only when it lacks the newest turn searched. Turns from
before vectors were kept get theirs when first searched (:data:`BACKFILL` a turn at most).
``ARIES_RECALL=keyword`` searches by keywords only (the bench compares the two); a failing embedder
falls back to keywords, said once in ``warnings``.

Turns rewound away (issue 30 item 4) are never brought back: :func:`rewound_away` is the one filter.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.errors import AriesError
from services.history_search.documents import turn_number

if TYPE_CHECKING:
    from services.assistant.context import HistoryTurn
    from services.conversation import Conversation
    from services.history_search.turns import FoundTurn
    from services.retrieval.embedders import Embedder
    from services.retrieval.models import ChunkView
    from services.session.session import Session

CATCH_UP_BUDGET_S = 0.25
"""The conversation index is caught up for at most this long at a time."""
CATCH_UP_LAG = 8
"""After a turn that searched earlier turns, the index is caught up when it lacks the turn this many
turns past the newest one searched (:meth:`TurnRecall.after_turn`): the turns about to be left out
are indexed before a search needs them, with one commit every few turns in a large window."""
BACKFILL = 32
"""Vectors made at most per turn for earlier turns that have none (a conversation from before)."""
FOUND = 6
"""Candidates handed to the fitter (it sends at most ``MAX_BROUGHT_BACK`` of those left out)."""
TURN_CHARS = 1_500
"""Characters of each message of a brought-back turn (a longer one is cut, and says so)."""


def rewound_away(conversation: Conversation) -> frozenset[int]:
    """The turns of ``conversation`` that a rewind put away: never brought back (the rewind entries
    of the transcript say which, :attr:`services.conversation.timeline.Timeline.away`)."""
    return conversation.timeline().away


@dataclass
class TurnRecall:
    """The search for earlier turns of one turn's message (``text``), in ``session``'s conversation."""

    session: Session
    text: str
    turn: int  # this turn's number
    vector: tuple[str, list[float]] | None = None  # the message's vector and space, made by the retrieval
    dense: bool = True  # False: keywords only (``ARIES_RECALL=keyword``, or the embedder failed)
    elapsed_ms: float = 0.0  # time spent finding turns in this turn (the bench's latency)
    warnings: list[str] = field(default_factory=list)
    searched: bool = False  # whether this turn searched earlier turns
    through: int = 0  # the newest turn searched
    _kept: bool = False

    @property
    def conversation_id(self) -> str:
        return self.session.conversation.conversation_id

    def find(self, history: Sequence[HistoryTurn], left_out: int) -> list[dict[str, Any]]:
        """The most relevant of the ``left_out`` oldest turns of ``history``, best first, as hits for
        the fitter and the Context pane (``handle``, ``turn_id``, ``text``, ``rank``, scores)."""
        from services.history_search.store import HistoryIndex
        from services.history_search.turns import fuse, keyword_turns

        started = time.perf_counter()
        self.searched = True
        searched = {turn_number(turn.turn_id): turn for turn in history[:left_out]}
        searched.pop(0, None)
        through = max(searched, default=0)
        self.through = max(self.through, through)
        index = HistoryIndex.for_workspace(self.session.workspace)
        keyword: list[tuple[int, float]] = []
        if through and self._current(index, through):
            keyword = [found for found in self._keywords(index, keyword_turns, through) if found[0] in searched]
        dense = self._meaning(index, searched) if through and self.dense else []
        found = fuse(keyword, dense, excluded=rewound_away(self.session.conversation))
        hits = [self._hit(rank, item, searched[item.turn]) for rank, item in enumerate(found[:FOUND], 1)]
        self.elapsed_ms += (time.perf_counter() - started) * 1000
        return hits

    def _current(self, index: Any, turn: int) -> bool:
        """Whether the index holds ``turn`` of this conversation, caught up first when it does not;
        False when it cannot be read or written (found by meaning only, then)."""
        from services.history_search.store import is_damage
        from services.history_search.turns import catch_up_quietly, holds_turn

        try:
            return holds_turn(index, self.conversation_id, turn) or catch_up_quietly(index, CATCH_UP_BUDGET_S)
        except BaseException as exc:
            if not is_damage(exc):
                raise
            return False

    def after_turn(self) -> None:
        """After a turn that searched earlier turns: the index caught up (off the next request's path)
        when it lacks a turn the next searches may reach — :data:`CATCH_UP_LAG` past the newest turn
        searched now, or this turn: in a large window every few turns, in a small one each turn."""
        from services.history_search.store import HistoryIndex

        if self.searched:
            needed = min(self.turn, self.through + CATCH_UP_LAG)
            self._current(HistoryIndex.for_workspace(self.session.workspace), needed)

    def _keywords(self, index: Any, keyword_turns: Any, through: int) -> list[tuple[int, float]]:
        from services.history_search.store import is_damage

        try:
            return list(keyword_turns(index, self.conversation_id, through, self.text))
        except BaseException as exc:  # a damaged segment: the next search rebuilds; meaning only now
            if not is_damage(exc):
                raise
            return []

    # -- meaning ---------------------------------------------------------------------------------
    def embedder(self) -> Embedder | None:
        """The workspace's default embedder (that of new indexes); None when it cannot be had."""
        try:
            return self.session.engine().spaces.default
        except AriesError as exc:
            self._warn(f"earlier turns are searched by keywords only: {exc.message}")
            return None

    def query_vector(self) -> tuple[str, Sequence[float]] | None:
        """The message's vector in the default space: the retrieval's, or made now (once a turn)."""
        from services.retrieval.embedders import vector_space

        embedder = self.embedder()
        if embedder is None:
            return None
        space = vector_space(embedder)
        if self.vector is None or self.vector[0] != space:
            try:
                self.vector = (space, embedder.embed_query(self.text))
            except (AriesError, OSError) as exc:
                self._warn(f"earlier turns are searched by keywords only: the embedder failed: {exc}")
                self.dense = False
                return None
        return self.vector

    def keep_own(self) -> None:
        """Keep this turn's message vector (when one was made) for the turns after it; once."""
        from services.history_search.store import HistoryIndex
        from services.history_search.turns import TurnVectors
        from services.retrieval.embedders import vector_space

        if self._kept or self.vector is None or not self.dense:
            return
        embedder = self.embedder()
        if embedder is None or vector_space(embedder) != self.vector[0]:
            return
        self._kept = True
        space, vector = self.vector
        TurnVectors(HistoryIndex.for_workspace(self.session.workspace), self.conversation_id).add(
            space, {self.turn: vector}
        )

    def _meaning(self, index: Any, searched: dict[int, HistoryTurn]) -> list[tuple[int, float]]:
        from services.history_search.turns import TurnVectors, dense_turns

        query = self.query_vector()
        if query is None:
            return []
        space, vector = query
        store = TurnVectors(index, self.conversation_id)
        vectors = dict(store.load(space))
        missing = sorted(n for n in searched if n not in vectors)[:BACKFILL]
        if missing:
            made = self._encode([_operator_text(searched[n]) for n in missing])
            if made:
                new = dict(zip(missing, made, strict=True))
                store.add(space, new)
                vectors.update(new)
        self.keep_own()
        return dense_turns(vectors, vector, searched)

    def _encode(self, texts: list[str]) -> list[list[float]]:
        embedder = self.embedder()
        if embedder is None:
            return []
        try:
            return embedder.embed(texts)
        except (AriesError, OSError) as exc:
            self._warn(f"earlier turns are searched by keywords only: the embedder failed: {exc}")
            return []

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    # -- the hits ---------------------------------------------------------------------------------
    def _hit(self, rank: int, found: FoundTurn, turn: HistoryTurn) -> dict[str, Any]:
        from services.history_search.turns import turn_handle

        return {
            "handle": turn_handle(self.conversation_id, found.turn),
            "turn_id": turn.turn_id,
            "rank": rank,
            "score": found.score,
            "bm25_rank": found.bm25_rank,
            "bm25_score": found.bm25_score,
            "dense_rank": found.dense_rank,
            "dense_score": found.dense_score,
            "source_path": f"turn {found.turn} of this conversation",
            "text": turn_text(turn),
        }


def _operator_text(turn: HistoryTurn) -> str:
    return next((str(m.content) for m in turn.messages if m.role == "user"), "")


def turn_text(turn: HistoryTurn) -> str:
    """A turn as it is brought back: each message on its own, by role, cut at :data:`TURN_CHARS`."""
    lines = []
    for message in turn.messages:
        content = str(message.content)
        if len(content) > TURN_CHARS:
            content = content[:TURN_CHARS] + f"… [cut at {TURN_CHARS} characters]"
        who = "operator" if message.role == "user" else message.role
        lines.append(f"{who}: {content}")
    return "\n".join(lines)


def show_turn(session: Session, handle: str) -> ChunkView | None:
    """The turn behind ``turn:<conversation>:<n>`` as the chunk viewer shows a passage (None when
    ``handle`` is not a turn's: the caller shows a chunk). Only the conversation open has its turns
    here; another's is one line saying so."""
    from services.assistant.context import history_from_entries
    from services.hashing import sha256_hex
    from services.history_search.turns import parse_turn_handle
    from services.retrieval.errors import HandleNotFound
    from services.retrieval.models import ChunkView

    parsed = parse_turn_handle(handle)
    if parsed is None:
        return None
    conversation, n = parsed
    if conversation != session.conversation.conversation_id:
        raise HandleNotFound(f"{handle}: a turn of another conversation; open it with /resume {conversation}")
    turns = [t for t in history_from_entries(session.conversation.dialogue(), "") if turn_number(t.turn_id) == n]
    if not turns:
        raise HandleNotFound(f"{handle}: this conversation has no turn {n}")
    text = turn_text(turns[0])
    return ChunkView(
        handle=handle,
        index="turn",
        chunk_id=str(n),
        text=text,
        context="",
        source_path=f"conversation {conversation}, turn {n}",
        root="",
        content_type="text/x-aries-turn",
        last_modified=None,
        page=None,
        section=None,
        start_offset=0,
        end_offset=len(text),
        hash=sha256_hex(text),
        embedding_model="",
        ordinal=n,
    )


__all__ = [
    "BACKFILL",
    "CATCH_UP_BUDGET_S",
    "CATCH_UP_LAG",
    "FOUND",
    "TURN_CHARS",
    "TurnRecall",
    "rewound_away",
    "turn_text",
]
