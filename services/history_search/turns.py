"""Earlier turns of one conversation, found again: which left-out turns are most relevant to a message.

When a request leaves the oldest turns out (:class:`services.assistant.context.ContextFitter`), the
turn loop asks this module for the left-out turns most relevant to the new message and sends them
back beside the passages (:mod:`services.assistant.recall`). Deterministic, no model call:

- **keywords**: BM25 over the conversation index (:class:`~services.history_search.store.HistoryIndex`,
  the one shared with ``/history search``: one writer lock across processes), the messages (operator
  and answer) of this conversation's turns 1..N only;
- **meaning**, where the workspace has an embedder: the cosine of the message's vector with each
  left-out turn's stored vector (:class:`TurnVectors`: the vector of the turn's own message, kept when
  that turn was asked — the query's vector, made once, is the turn's vector);
- the two ranked lists fused by reciprocal rank (:data:`RRF_K`); ties go to the closer meaning, then
  to the older turn.

A turn is a candidate when a keyword of the message is in it or its similarity reaches
:data:`MIN_DENSE`; turns ``excluded`` (rewound away) never are. Handles are ``turn:<conversation>:<n>``:
the ``turn`` prefix is reserved (no index may take that name: :mod:`services.text.names`).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from services.history_search.store import HistoryIndex, is_damage

if TYPE_CHECKING:
    import tantivy

TURN_PREFIX = "turn"
RRF_K = 60
MIN_DENSE = 0.20
"""Similarity (cosine) at which a turn is a candidate on meaning alone (all-MiniLM-L6-v2's scale:
unrelated sentences score about 0.0–0.15; the 20 facts of ``bench/long_conversation.py`` and their
questions in other words 0.24–0.69)."""
CANDIDATES = 12
"""Turns taken from each ranked list before they are fused."""
VECTORS_DIR = "turn-vectors"
VECTORS_FORMAT = 1
_WORD = re.compile(r"\w+", re.UNICODE)
STOP_WORDS = frozenset(
    """a about after again all also am an and any are as ask at be been before being but by can could did do
    does doing done for from had has have having he her here hers him his how i if in into is it its just
    me more most my no not now of off on once only or other our ours out over please say said she should
    so some such tell than that the their them then there these they this those through to too under up
    us very was we were what when where which while who whom whose why will with would yes you your""".split()
)
"""Words left out of the keyword query: they are in most turns, and their matches would crowd out a
turn that shares one rare word with the message."""
_HANDLE = re.compile(r"turn:([A-Za-z0-9_-]{1,80}):([1-9][0-9]{0,6})")


def turn_handle(conversation_id: str, turn: int) -> str:
    """``turn:<conversation>:<n>``: an earlier turn, as it is cited."""
    return f"{TURN_PREFIX}:{conversation_id}:{turn}"


def parse_turn_handle(handle: str) -> tuple[str, int] | None:
    """``(conversation, n)`` of a turn handle; None for anything else (a passage's handle)."""
    found = _HANDLE.fullmatch(handle.strip())
    return (found.group(1), int(found.group(2))) if found else None


@dataclass(frozen=True)
class FoundTurn:
    """A left-out turn that is relevant to the message, with what each signal said of it."""

    turn: int
    score: float  # fused (reciprocal rank)
    bm25_rank: int | None = None
    bm25_score: float | None = None
    dense_rank: int | None = None
    dense_score: float | None = None


# -- keywords ---------------------------------------------------------------------------------------
def keyword_turns(
    index: HistoryIndex, conversation_id: str, through: int, text: str, *, limit: int = CANDIDATES
) -> list[tuple[int, float]]:
    """``(turn, BM25 score)`` of the best turns 1..``through`` of the conversation for ``text`` (a
    turn's score is its best message's), best first, ties to the older turn. What the index holds
    is what is searched: the caller catches it up first."""
    words = sorted({word.lower() for word in _WORD.findall(text)} - STOP_WORDS)
    if not words or through < 1:
        return []
    opened = index.searcher()
    if opened is None:
        return []
    tantivy_index, searcher = opened
    try:
        query = _query(tantivy_index, " ".join(words), conversation_id, through)
    except ValueError:  # a word the query parser cannot take: nothing found by keywords
        return []
    best: dict[int, float] = {}
    for score, address in searcher.search(query, limit=limit * 3, count=False).hits:
        turn = int(searcher.doc(address)["turn"][0])
        best[turn] = max(best.get(turn, 0.0), float(score))
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:limit]


def holds_turn(index: HistoryIndex, conversation_id: str, turn: int) -> bool:
    """Whether the index holds turn ``turn`` of the conversation (a message of it) already."""
    import tantivy

    opened = index.searcher()
    if opened is None:
        return False
    tantivy_index, searcher = opened
    schema = tantivy_index.schema
    query = tantivy.Query.boolean_query(
        [
            (tantivy.Occur.Must, tantivy.Query.term_query(schema, "conversation", conversation_id)),
            (tantivy.Occur.Must, tantivy.Query.range_query(schema, "turn", tantivy.FieldType.Integer, turn, turn)),
        ]
    )
    return bool(searcher.search(query, limit=1, count=False).hits)


def _query(index: tantivy.Index, words: str, conversation_id: str, through: int) -> tantivy.Query:
    import tantivy

    schema = index.schema
    clauses = [(tantivy.Occur.Must, index.parse_query(words, ["text"]))]
    for name, value in (("conversation", conversation_id), ("kind", "message")):
        term = tantivy.Query.term_query(schema, name, value)
        clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(term, 0.0)))
    span = tantivy.Query.range_query(schema, "turn", tantivy.FieldType.Integer, 1, through)
    clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(span, 0.0)))
    return tantivy.Query.boolean_query(clauses)


# -- meaning ----------------------------------------------------------------------------------------
def dense_turns(
    vectors: Mapping[int, Sequence[float]], query: Sequence[float], turns: Collection[int], *, limit: int = CANDIDATES
) -> list[tuple[int, float]]:
    """``(turn, cosine)`` of the best ``turns`` by their stored vectors (unit length, as embedders
    make them), best first, ties to the older turn; turns without a vector are not ranked."""
    import numpy as np

    ranked = sorted(t for t in turns if t in vectors and len(vectors[t]) == len(query))
    if not ranked:
        return []
    scores = np.asarray([vectors[t] for t in ranked], dtype=np.float32) @ np.asarray(query, dtype=np.float32)
    scored = sorted(zip(ranked, scores.tolist(), strict=True), key=lambda item: (-item[1], item[0]))
    return [(turn, round(float(score), 6)) for turn, score in scored[:limit]]


def fuse(
    keyword: Sequence[tuple[int, float]],
    dense: Sequence[tuple[int, float]],
    *,
    excluded: Collection[int] = (),
    min_dense: float = MIN_DENSE,
) -> list[FoundTurn]:
    """The two ranked lists fused by reciprocal rank: every keyword match, and the turns similar
    enough on meaning alone; best first, ties to the closer meaning, then to the older turn."""
    found: dict[int, dict[str, float | int]] = {}
    for rank, (turn, score) in enumerate(keyword, 1):
        found.setdefault(turn, {})
        found[turn].update(bm25_rank=rank, bm25_score=score)
    for rank, (turn, score) in enumerate(dense, 1):
        if turn in found or score >= min_dense:
            found.setdefault(turn, {})
            found[turn].update(dense_rank=rank, dense_score=score)
    turns = []
    for turn, said in found.items():
        if turn in excluded:
            continue
        fused = sum(1.0 / (RRF_K + int(said[key])) for key in ("bm25_rank", "dense_rank") if key in said)
        turns.append(
            FoundTurn(
                turn,
                round(fused, 6),
                bm25_rank=_int(said.get("bm25_rank")),
                bm25_score=said.get("bm25_score"),
                dense_rank=_int(said.get("dense_rank")),
                dense_score=said.get("dense_score"),
            )
        )
    # a tie (a keyword-only and a meaning-only candidate, each first in its list) goes to meaning:
    # one shared word ("last", "like") says less than a close paraphrase; then to the older turn
    return sorted(turns, key=lambda t: (-t.score, -(t.dense_score if t.dense_score is not None else -1.0), t.turn))


def _int(value: float | int | None) -> int | None:
    return None if value is None else int(value)


# -- the stored vectors -----------------------------------------------------------------------------
class TurnVectorLine(BaseModel):
    """One line of a conversation's turn vectors: the vector of turn ``turn``'s message (float32,
    little-endian, base64) in ``space`` (the embedder's :func:`~services.retrieval.embedders.vector_space`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[1] = 1  # VECTORS_FORMAT
    turn: int
    space: str
    vector: str


class TurnVectors:
    """The vectors of one conversation's turn messages: ``cache/conversations/turn-vectors/<id>.ndjson``.

    Derived data beside the conversation index (a bundle never carries ``cache/``): one line per
    turn, appended (one ``write`` of a whole line under ``O_APPEND``) by the conversation's one
    writer (:mod:`services.conversation.hold`). A line that does not read — a torn last line, another
    format — is skipped, and a turn found twice keeps its last vector; a turn without a vector is
    found by keywords only.
    """

    def __init__(self, index: HistoryIndex, conversation_id: str) -> None:
        self.path = index.directory / VECTORS_DIR / f"{conversation_id}.ndjson"

    def load(self, space: str) -> dict[int, Sequence[float]]:
        """The stored vectors of ``space``, by turn (what was read before is not read again: the file
        only grows while its one writer appends)."""
        import numpy as np

        try:
            with self.path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                cached = _READ.get(self.path)
                if cached is None or cached[0] != (stat.st_ino, space) or cached[1] > stat.st_size:
                    cached = ((stat.st_ino, space), 0, {})
                handle.seek(cached[1])
                raw = handle.read()
        except OSError:
            return {}
        vectors = cached[2]
        whole = raw[: raw.rfind(b"\n") + 1]  # a line still being written is read next time
        for line in whole.splitlines():
            try:
                item = TurnVectorLine.model_validate_json(line)
                if item.space == space:
                    vectors[item.turn] = np.frombuffer(base64.b64decode(item.vector, validate=True), dtype="<f4")
            except (ValidationError, ValueError):
                continue
        _READ[self.path] = (cached[0], cached[1] + len(whole), vectors)
        return dict(vectors)

    def add(self, space: str, vectors: Mapping[int, Sequence[float]]) -> None:
        """Append the vectors of these turns (one line each, in turn order)."""
        import numpy as np

        if not vectors:
            return
        lines = []
        for turn in sorted(vectors):
            packed = base64.b64encode(np.asarray(vectors[turn], dtype="<f4").tobytes()).decode("ascii")
            lines.append(TurnVectorLine(turn=turn, space=space, vector=packed).model_dump_json())
        data = ("\n".join(lines) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _append(self.path, data)


_READ: dict[Path, tuple[tuple[int, str], int, dict[int, Any]]] = {}
"""Per vectors file: (inode, space), the bytes read so far and what they held (a process reads each
line once)."""


def _append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def catch_up_quietly(index: HistoryIndex, budget_s: float) -> bool:
    """Catch the index up for at most ``budget_s``; False when it cannot be read or written (a full or
    read-only disk): the turns are then found by meaning only."""
    try:
        index.catch_up(budget_s=budget_s)
    except BaseException as exc:
        if not is_damage(exc):
            raise
        return False
    return True


__all__ = [
    "CANDIDATES",
    "MIN_DENSE",
    "RRF_K",
    "STOP_WORDS",
    "TURN_PREFIX",
    "FoundTurn",
    "TurnVectorLine",
    "TurnVectors",
    "catch_up_quietly",
    "dense_turns",
    "holds_turn",
    "fuse",
    "keyword_turns",
    "parse_turn_handle",
    "turn_handle",
]
