"""A workspace's conversations: list them, find one, fork one from an earlier turn.

Reopening is :meth:`services.session.session.Session.open_conversation`: the writer reads the transcript
once (its turns and their dialogue), so the model sees the earlier turns (within its context
window, see :mod:`services.assistant.context`) and new turns continue the same ids
(``<conversation>-t<N+1>``, message ids ``<conversation>-<seq+1>``).

"The last conversation" is the one written to most recently (the file's modification time; the id,
which sorts by creation time, breaks ties), so that a conversation resumed yesterday is the one
``--continue`` reopens today.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.conversation.timeline import Timeline, timeline_of, turn_number
from services.errors import InvalidInput, NotFound
from services.workspace.transcripts import ENTRY_FIELDS, SUFFIX, Transcript, by_recency, read_transcript

if TYPE_CHECKING:
    from services.workspace.manager import Workspace

FIRST_PROMPT_CHARS = 200
LAST = "last"


@dataclass(frozen=True)
class ConversationSummary:
    """One conversation in a line (``aries history``, ``/history``)."""

    conversation_id: str
    started_at: str | None  # the first entry's timestamp
    updated_at: str | None  # the last entry's timestamp
    turns: int  # operator messages
    first_prompt: str  # the first operator message, cut at FIRST_PROMPT_CHARS
    model: str | None  # the model of the last local answer
    entries: int
    problems: int  # unreadable lines (reported on reopen)
    forked_from: dict[str, str] | None
    path: str
    checkpoints: list[str] = field(default_factory=list)  # ``NAME@N``, by turn
    rewound: list[int] = field(default_factory=list)  # turns a rewind put away (kept; /rewind N brings them back)

    def marks(self) -> str:
        """The checkpoints and the rewound turns in a few words ("" when there are none)."""
        parts = [f"checkpoints {', '.join(self.checkpoints)}"] if self.checkpoints else []
        if self.rewound:
            parts.append(f"turns {_span(self.rewound)} rewound away (/rewind {max(self.rewound)} brings them back)")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(path: Path) -> ConversationSummary:
    result = read_transcript(path)
    entries = result.entries
    first = next((str(e.get("content", "")) for e in entries if e.get("role") == "user"), "")
    answers = [e for e in entries if e.get("role") == "assistant" and e.get("provenance") != "cloud"]
    fork = next((e.get("forked_from") for e in entries if isinstance(e.get("forked_from"), dict)), None)
    timeline = timeline_of(entries)
    return ConversationSummary(
        conversation_id=Path(path).name.removesuffix(SUFFIX),
        started_at=entries[0].get("timestamp") if entries else None,
        updated_at=entries[-1].get("timestamp") if entries else None,
        turns=len({e.get("turn_id") for e in entries if e.get("role") == "user" and e.get("turn_id")}),
        first_prompt=first[:FIRST_PROMPT_CHARS],
        model=str(answers[-1].get("model") or answers[-1].get("provider")) if answers else None,
        entries=len(entries),
        problems=len(result.problems),
        forked_from=fork,
        path=str(path),
        checkpoints=[f"{c.name}@{c.turn}" for c in sorted(timeline.checkpoints.values(), key=lambda c: c.turn)],
        rewound=sorted(timeline.away),
    )


def list_summaries(workspace: Workspace) -> list[ConversationSummary]:
    """Every conversation of the workspace, least recently written first (the last is the newest)."""
    return [summarize(path) for path in by_recency(workspace.transcripts_dir)]


def resolve(workspace: Workspace, reference: str) -> str:
    """The conversation id for ``reference``: ``last``, an id, or a unique start of one."""
    paths = by_recency(workspace.transcripts_dir)
    ids = [path.name.removesuffix(SUFFIX) for path in paths]
    if reference == LAST:
        if not ids:
            raise NotFound(f"workspace {workspace.name} has no conversation yet")
        return ids[-1]
    if reference in ids:
        return reference
    matches = [cid for cid in ids if cid.startswith(reference)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise NotFound(
            f"no conversation {reference!r} in workspace {workspace.name}; "
            "the list: aries history (in the workbench: /history)"
        )
    raise InvalidInput(
        f"{reference!r} names {len(matches)} conversations; give more of the id "
        "(aries history, or /history in the workbench)"
    )


MARKS = ("pin", "unpin", "checkpoint", "rewind")


def fork(workspace: Workspace, reference: str, through_turn: int | None = None) -> Transcript:
    """A new conversation holding turn ``through_turn`` of ``reference`` and the turns before it that were
    in force when it was made (one a rewind put away too: that branch is readable as a fork), or the turns
    in force (None), every entry copied with the new conversation's ids (``turn_id`` renumbered in the
    same scheme) and ``forked_from`` naming where it came from. The source is left as it was."""
    source_id = resolve(workspace, reference)
    entries = read_transcript(workspace.transcripts_dir / f"{source_id}{SUFFIX}").entries
    timeline = timeline_of(entries)  # the turns in force: a rewind's away turns are not copied
    numbers = sorted(turn_number(turn) for turn in timeline.turns)  # a turn a rewind put away too
    if through_turn is not None and through_turn not in numbers:
        raise InvalidInput(
            f"conversation {source_id} has {len(numbers)} turn(s) ({', '.join(map(str, numbers)) or 'none'}); "
            f"cannot fork after turn {through_turn}"
        )
    keep = timeline.lineage if through_turn is None else timeline.chain(timeline.turn_id(through_turn))
    target = workspace.new_transcript()
    renamed = {old: f"{target.conversation_id}-t{n:04d}" for n, old in enumerate(keep, start=1)}
    origin = {"conversation_id": source_id, "turn_id": keep[-1] if keep else ""}
    reserved = set(ENTRY_FIELDS)
    last = max((n for n, e in enumerate(entries) if e.get("turn_id") in renamed), default=-1)
    for entry in entries[: last + 1]:
        turn = entry.get("turn_id")
        if entry.get("kind") in MARKS:
            mark = _mark_for_fork(entry, renamed, timeline)
            if mark is not None:
                extra = {key: value for key, value in mark.items() if key not in reserved}
                target.append("notice", str(entry.get("content", "")), timestamp=entry.get("timestamp"), **extra)
            continue
        if turn and turn not in renamed:
            continue  # a turn not kept
        extra = {key: value for key, value in entry.items() if key not in reserved}
        if turn:
            extra["turn_id"] = renamed[str(turn)]
        extra["copied_from"] = entry.get("message_id")
        extra["forked_from"] = origin
        target.append(str(entry["role"]), str(entry["content"]), timestamp=entry.get("timestamp"), **extra)
    turns = len(keep)
    target.append(
        "notice",
        f"Forked from conversation {source_id} after its turn {turns}: the {turns} turn(s) above are copies; "
        "what follows is new.",
        level="info",
        title="fork",
        forked_from=origin,
    )
    return target


def _mark_for_fork(entry: dict[str, Any], renamed: dict[str, str], timeline: Timeline) -> dict[str, Any] | None:
    """A pin, unpin or checkpoint of a kept turn, made while a kept turn was the head, renumbered for the
    fork (so the fork has the pins and checkpoints its turns had); None for the rest — a rewind, or a
    mark of a turn or a branch that was not kept."""
    kind = entry.get("kind")
    head = entry.get("at")
    if kind == "rewind" or str(head) not in renamed:
        return None
    if kind == "checkpoint":
        turn = str(entry.get("turn_id"))
    else:
        try:
            turn = timeline.turn_id(int(entry.get("turn", 0)))
        except (NotFound, TypeError, ValueError):
            return None
    if turn not in renamed:
        return None
    mark = {**entry, "turn": turn_number(renamed[turn]), "at": renamed[str(head)]}
    own = entry.get("turn_id")
    if own is not None:
        mark["turn_id"] = renamed.get(str(own))
        if mark["turn_id"] is None:
            del mark["turn_id"]
    return mark


def _span(numbers: list[int]) -> str:
    """``4–10`` for a run, else the numbers."""
    if numbers == list(range(numbers[0], numbers[-1] + 1)) and len(numbers) > 2:
        return f"{numbers[0]}–{numbers[-1]}"
    return ", ".join(map(str, numbers))


__all__ = ["LAST", "ConversationSummary", "by_recency", "fork", "list_summaries", "resolve", "summarize"]
