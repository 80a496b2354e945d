"""Pins and checkpoints of the open conversation (``/pin``, ``/unpin``, ``/checkpoint``, ``/checkpoints``).

Each is one ``pin``/``unpin``/``checkpoint`` entry (:mod:`services.conversation.timeline` reads them
back) and returns the line the operator is told. Turn numbers are the ones on screen (the number in
the turn id); a pin or checkpoint of a turn a rewind put away is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.conversation.timeline import checkpoint_fields, pin_fields, valid_checkpoint_name
from services.errors import InvalidInput

if TYPE_CHECKING:
    from services.conversation.writer import Conversation

__all__ = ["checkpoint", "checkpoint_lines", "pin", "unpin"]


def _in_force(conversation: Conversation, number: int | None) -> int:
    timeline = conversation.timeline()
    numbers = timeline.numbers
    if not numbers:
        raise InvalidInput("this conversation has no turn yet: send a message first")
    if number is None:
        return numbers[-1]
    if number not in numbers:
        away = " (a rewind put it away)" if number in timeline.away else ""
        raise InvalidInput(f"turn {number} is not in this conversation{away}; its turns: {_span(numbers)}")
    return number


def pin(conversation: Conversation, number: int | None = None) -> str:
    """Pin turn ``number`` (the last turn when None): sent in every request, never left out."""
    number = _in_force(conversation, number)
    timeline = conversation.timeline()
    if number in timeline.pinned:
        return f"Turn {number} is pinned already (pinned: {_span(timeline.pinned)})."
    conversation.mark(
        f"Pinned turn {number}: it is sent in every request, never left out.",
        pin_fields("pin", number, timeline.head),
    )
    return f"Pinned turn {number} (pinned: {_span(conversation.timeline().pinned)}); /usage shows what pins cost."


def unpin(conversation: Conversation, number: int) -> str:
    timeline = conversation.timeline()
    if number not in timeline.pinned:
        raise InvalidInput(f"turn {number} is not pinned (pinned: {_span(timeline.pinned) or 'none'})")
    conversation.mark(f"Unpinned turn {number}.", pin_fields("unpin", number, timeline.head))
    return f"Unpinned turn {number}" + (
        f" (pinned: {_span(conversation.timeline().pinned)})." if conversation.timeline().pinned else "."
    )


def checkpoint(conversation: Conversation, name: str) -> str:
    """Name the current turn ``name`` (not all digits): ``/rewind NAME`` and ``/fork NAME`` reach it."""
    name = valid_checkpoint_name(name)
    number = _in_force(conversation, None)
    timeline = conversation.timeline()
    if name in timeline.checkpoints:
        raise InvalidInput(
            f"checkpoint {name!r} marks turn {timeline.checkpoints[name].turn} already; choose another name"
        )
    turn_id = timeline.turn_id(number)
    conversation.mark(f"Checkpoint {name}: the end of turn {number}.", checkpoint_fields(name, turn_id, timeline.head))
    return f"Checkpoint {name} marks the end of turn {number} (/rewind {name}, /fork {name})."


def checkpoint_lines(conversation: Conversation) -> list[str]:
    """The checkpoints, oldest turn first, each with its turn's message; one put away by a rewind says so."""
    timeline = conversation.timeline()
    live = set(timeline.numbers)
    asked = {
        str(e.get("turn_id")): str(e.get("content", ""))
        for e in conversation.read().entries
        if e.get("role") == "user" and e.get("turn_id")
    }
    lines = []
    for mark in sorted(timeline.checkpoints.values(), key=lambda c: (c.turn, c.name)):
        where = "" if mark.turn in live else "  (put away by a rewind: /rewind brings it back)"
        message = " ".join(asked.get(mark.turn_id, "").split())[:60]
        lines.append(f"{mark.name:<20} turn {mark.turn:<4} {message}{where}")
    return lines


def _span(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in numbers)
