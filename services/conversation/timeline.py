"""A conversation's turns as a tree: which are in force after rewinds, which are pinned, the checkpoints.

The transcript stays append-only. Every turn's parent is the turn that was the *head* when it began;
a ``rewind`` entry moves the head back to an earlier turn (or forward again, to a turn a rewind put
away: the rewind of a rewind). The turns in force are the head and its ancestors (:attr:`Timeline.lineage`);
every other turn was put away by a rewind — readable, never sent to a model, never brought back.

One numbering: a turn's number is the one in its id (``<conversation>-t0007`` is turn 7), shown on
screen for pins, forks, rewinds and checkpoints. After a rewind to turn 3 of ten, the next turn is 11.

Pins (``pin``/``unpin`` entries) record the head they were made at (``at``): a pin made after turn N
is in force only while that turn is, so it goes with those turns on a rewind and comes back with them.
Checkpoints (``checkpoint``) name a turn for good: ``/rewind NAME`` reaches it on any branch.

The entries of these kinds are parsed with pydantic (:class:`PinEntry`, :class:`CheckpointEntry`,
:class:`RewindEntry`); one that does not parse is skipped and listed in :attr:`Timeline.problems`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from services.errors import InvalidInput, NotFound
from services.workspace.transcript_format import stamp

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "Checkpoint",
    "Timeline",
    "checkpoint_fields",
    "pin_fields",
    "rewind_fields",
    "timeline_of",
    "turn_number",
    "valid_checkpoint_name",
]

NAME_CHARS = 40


def turn_number(turn_id: object) -> int:
    """``<conversation>-t0007`` → 7; 0 for anything else."""
    tail = str(turn_id or "").rsplit("-t", 1)[-1]
    return int(tail) if tail.isdigit() else 0


@dataclass(frozen=True)
class Checkpoint:
    name: str
    turn: int
    turn_id: str
    timestamp: str


@dataclass
class Timeline:
    """What a conversation's entries say about its turns (see the module's docstring)."""

    turns: list[str] = field(default_factory=list)  # every turn id, in the order they began
    parent: dict[str, str | None] = field(default_factory=dict)
    head: str | None = None
    pins: dict[int, str] = field(default_factory=dict)  # pinned turn number → the pin's timestamp
    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)
    rewinds: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def lineage(self) -> list[str]:
        """The turns in force, oldest first: the head and its ancestors."""
        return self.chain(self.head)

    def chain(self, turn: str | None) -> list[str]:
        """``turn`` and the turns in force when it began, oldest first."""
        chain: list[str] = []
        while turn is not None and turn not in chain:
            chain.append(turn)
            turn = self.parent.get(turn)
        return chain[::-1]

    @property
    def numbers(self) -> list[int]:
        return [turn_number(turn) for turn in self.lineage]

    @property
    def away(self) -> frozenset[int]:
        """The turns a rewind put away (not in force): never sent, never brought back."""
        live = set(self.lineage)
        return frozenset(turn_number(turn) for turn in self.turns if turn not in live)

    @property
    def pinned(self) -> list[int]:
        return sorted(number for number in self.pins if number in set(self.numbers))

    def turn_id(self, number: int) -> str:
        for turn in self.turns:
            if turn_number(turn) == number:
                return turn
        raise NotFound(f"there is no turn {number} in this conversation (turns: {_span(self.numbers)})")

    def resolve(self, reference: str) -> str:
        """The turn id of ``reference``: a turn number or a checkpoint's name."""
        reference = reference.strip()
        if reference.isdigit():
            return self.turn_id(int(reference))
        checkpoint = self.checkpoints.get(reference)
        if checkpoint is None:
            names = ", ".join(sorted(self.checkpoints)) or "none yet (/checkpoint NAME)"
            raise NotFound(f"no checkpoint {reference!r} in this conversation; checkpoints: {names}")
        return checkpoint.turn_id

    def in_force(self, entry: dict[str, Any]) -> bool:
        """Whether ``entry`` belongs to a turn in force (an entry outside any turn always is)."""
        turn = entry.get("turn_id")
        return not turn or str(turn) in set(self.lineage)

    def begin(self, turn: str) -> None:
        self.turns.append(turn)
        self.parent[turn] = self.head
        self.head = turn


@cache
def _models() -> dict[str, type[BaseModel]]:
    from pydantic import BaseModel, ConfigDict

    class _Kind(BaseModel):
        model_config = ConfigDict(extra="allow")
        timestamp: str
        at: str | None = None  # the head when the entry was written

    class PinEntry(_Kind):
        turn: int

    class CheckpointEntry(_Kind):
        name: str
        turn: int
        turn_id: str

    class RewindEntry(_Kind):
        to_turn: str
        from_turn: str | None = None

    return {"pin": PinEntry, "unpin": PinEntry, "checkpoint": CheckpointEntry, "rewind": RewindEntry}


def timeline_of(entries: Iterable[dict[str, Any]]) -> Timeline:
    """Read the turns, pins, checkpoints and rewinds of a conversation's entries, in order."""
    timeline = Timeline()
    models: dict[str, type[BaseModel]] | None = None
    pin_events: list[tuple[str, int, str | None, str]] = []
    for entry in entries:
        kind = entry.get("kind")
        turn = entry.get("turn_id")
        if turn and str(turn) not in timeline.parent:
            timeline.begin(str(turn))
        if kind not in ("pin", "unpin", "checkpoint", "rewind"):
            continue
        models = models or _models()
        try:
            parsed: Any = models[str(kind)].model_validate(entry)
        except ValueError as exc:
            timeline.problems.append(f"{entry.get('message_id')}: {kind} entry not read ({str(exc).splitlines()[0]})")
            continue
        if kind == "rewind":
            if parsed.to_turn in timeline.parent:
                timeline.head = parsed.to_turn
                timeline.rewinds.append(dict(entry))
        elif kind == "checkpoint":
            timeline.checkpoints[parsed.name] = Checkpoint(parsed.name, parsed.turn, parsed.turn_id, parsed.timestamp)
        else:
            pin_events.append((str(kind), parsed.turn, parsed.at, parsed.timestamp))
    live = set(timeline.lineage)
    for kind, number, at, timestamp in pin_events:
        if at is not None and at not in live:
            continue  # made after a turn that is no longer in force: it went with that turn
        if kind == "pin":
            timeline.pins[number] = timestamp
        else:
            timeline.pins.pop(number, None)
    return timeline


def valid_checkpoint_name(name: str) -> str:
    name = name.strip()
    if not name or name.isdigit():
        raise InvalidInput(f"a checkpoint's name is not all digits (those are turn numbers): {name!r}")
    if len(name) > NAME_CHARS or not all(c.isalnum() or c in "-_." for c in name):
        raise InvalidInput(f"a checkpoint's name is letters, digits, '-', '_' or '.', at most {NAME_CHARS}: {name!r}")
    return name


def pin_fields(kind: str, number: int, head: str | None) -> dict[str, Any]:
    return {**stamp(kind), "turn": number, "at": head}


def checkpoint_fields(name: str, turn_id: str, head: str | None) -> dict[str, Any]:
    return {**stamp("checkpoint"), "name": name, "turn": turn_number(turn_id), "turn_id": turn_id, "at": head}


def rewind_fields(to_turn: str, from_turn: str | None, away: list[int], **extra: Any) -> dict[str, Any]:
    return {
        **stamp("rewind"),
        "to_turn": to_turn,
        "to": turn_number(to_turn),
        "from_turn": from_turn,
        "away": away,
        "at": from_turn,
        **extra,
    }


def _span(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in numbers) if numbers else "none yet"
