"""One budget: how a model's context window is shared, decided in one place, and what it came to.

Every request is built in this order (:func:`share`); what comes first is never left out for what
comes after it:

1. **always sent**: the system prompt with the profile's and the project's instructions, the pinned
   turns (``pins``), the operator's message and this turn's own steps (the model's tool calls, their
   results). When these alone do not fit, the request cannot be made (:attr:`Share.fits` is False)
   and the caller says so before anything is sent;
2. **the tool definitions**, all or none, within their budget (``tool_budget``: by default whatever
   the first part leaves);
3. **passages and brought-back turns, by relevance** (``ranked``: best first, each whole; the first
   that does not fit ends them, so a lower-ranked one never takes the place of a better one). The
   summary in force (``/compact``, :mod:`services.assistant.compaction`) ranks first among them, and
   only when the request leaves out a turn it covers: it stands for those turns (history material
   written by a model, sent as untrusted data like a passage, never always-sent: when its turns are
   all in the history it would only repeat them); it may take at most a quarter of the room, so that
   it never shuts the passages out;
4. **earlier turns, newest first**: the oldest are left out, ``drop_block`` at a time counted from the
   first turn, so that the start of what is sent stays put for several turns (a server's prompt cache).

Any feature that adds to a request (pins, brought-back turns, project instructions) adds its part
here, not a share of its own. The result is a :class:`ContextBreakdown` in the tokens the server is
expected to count (the estimate scaled by the calibration): its parts add up to the request's total,
and it is recorded with the turn (the answer's ``usage.context``, a ``ContextReport``), shown by the
TUI's meter and ``/usage`` and returned by ``aries ask --json`` (``context.breakdown``).

Pure arithmetic over token counts: no I/O, imports nothing of Aries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

PARTS = (
    "system_and_profile",
    "instructions",
    "pins",
    "current_message",
    "this_turn",
    "tool_definitions",
    "summary",
    "passages",
    "brought_back",
    "history",
)
"""The parts of a request, in the order the budget admits them."""
ALWAYS = PARTS[:5]
"""The parts always sent (``share``'s ``always``)."""

LABELS = {
    "system_and_profile": "system and profile",
    "instructions": "project instructions",
    "pins": "pins",
    "current_message": "current message",
    "this_turn": "this turn's tool calls",
    "tool_definitions": "tool definitions",
    "summary": "summary (/compact)",
    "passages": "passages",
    "brought_back": "brought-back turns",
    "history": "history",
}

HIGH = 0.75
FULL = 0.90
"""Fill of the prompt's room (the window minus what is kept for the answer) at which the meter says
``high`` and ``full``."""


@dataclass(frozen=True)
class ContextBreakdown:
    """One request as sent, part by part, in (calibrated) tokens; ``free`` is what the window has left
    (``reserve`` of it kept for the answer)."""

    window: int
    reserve: int = 0
    system_and_profile: int = 0
    instructions: int = 0  # the workspace's AGENTS.md, in the system prompt
    pins: int = 0
    current_message: int = 0
    this_turn: int = 0
    tool_definitions: int = 0
    summary: int = 0
    passages: int = 0
    brought_back: int = 0
    history: int = 0
    left_out: bool = False  # earlier turns or passages were left out to fit (the window is full)

    @property
    def used(self) -> int:
        return sum(getattr(self, name) for name in PARTS)

    @property
    def free(self) -> int:
        return max(0, self.window - self.used)

    @property
    def level(self) -> str:
        """``ok``, ``high`` or ``full`` (past :data:`FULL` of the room, or something was left out)."""
        room = max(1, self.window - self.reserve)
        if self.left_out or self.used >= room * FULL:
            return "full"
        return "high" if self.used >= room * HIGH else "ok"

    def meter(self) -> str:
        """``ctx 1,420/2,048``, with the level's word past :data:`HIGH` (never colour alone)."""
        word = "" if self.level == "ok" else f" {self.level}"
        return f"ctx {self.used:,}/{self.window:,}{word}"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {name: getattr(self, name) for name in PARTS}
        data.update(free=self.free, window=self.window, reserve=self.reserve, used=self.used, left_out=self.left_out)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextBreakdown | None:
        """Read back from a transcript or a response (None when it holds no breakdown; a part it does
        not know is ignored, one it lacks is 0)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("window"), int):
            return None
        values: dict[str, Any] = {}
        for item in fields(cls):
            value = data.get(item.name)
            if item.name == "left_out":
                values[item.name] = bool(value)
            elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                values[item.name] = value
        return cls(**values)

    def lines(self) -> list[str]:
        """The breakdown as ``/usage`` shows it: one part a line, then free and the window."""
        width = max(len(label) for label in LABELS.values())
        rows = [f"{LABELS[name]:<{width}}  {getattr(self, name):>7,}" for name in PARTS]
        rows.append(f"{'sent':<{width}}  {self.used:>7,}")
        rows.append(f"{'free':<{width}}  {self.free:>7,}  ({self.reserve:,} kept for the answer)")
        rows.append(f"{'window':<{width}}  {self.window:>7,}  ({self.meter()})")
        return rows


def recorded(entries: Sequence[Mapping[str, Any]]) -> ContextBreakdown | None:
    """The last breakdown a transcript holds (an answer's ``usage.context``, a context report's
    ``breakdown``); None in a transcript written before there were any."""
    for entry in reversed(entries):
        usage = entry.get("usage")
        found = usage.get("context") if isinstance(usage, Mapping) else entry.get("breakdown")
        if isinstance(found, Mapping) and (breakdown := ContextBreakdown.from_dict(found)) is not None:
            return breakdown
    return None


@dataclass(frozen=True)
class Ranked:
    """A passage or a brought-back turn competing for the room by relevance (best first)."""

    kind: str  # "summary" | "passages" | "brought_back"
    tokens: int


@dataclass(frozen=True)
class Share:
    """What :func:`share` decided, in raw (uncalibrated) estimate tokens."""

    fits: bool  # False: the part always sent does not fit (nothing else was decided)
    tools_kept: bool
    ranked_kept: int  # how many of ``ranked`` are sent (the best ones)
    history_dropped: int  # how many of the oldest earlier turns are left out
    parts: Mapping[str, int]  # raw tokens per part of :data:`PARTS`

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def breakdown(self, factor: float, window: int, reserve: int, left_out: bool) -> ContextBreakdown:
        """The parts scaled by the calibration ``factor``: each rounded down, the remainder given to the
        largest fractions, so that they add up to the scaled total exactly."""
        total = int(self.total * factor + 0.999)
        exact = {name: self.parts.get(name, 0) * factor for name in PARTS}
        scaled = {name: int(value) for name, value in exact.items()}
        order = sorted(PARTS, key=lambda name: (-(exact[name] - scaled[name]), PARTS.index(name)))
        for name in order[: max(0, total - sum(scaled.values()))]:
            scaled[name] += 1
        return ContextBreakdown(window=window, reserve=reserve, left_out=left_out, **scaled)


def share(
    limit: int,
    always: Mapping[str, int],
    tools: int,
    ranked: Sequence[Ranked],
    history: Sequence[int],
    *,
    ranked_intro: int = 0,
    tool_budget: int | None = None,
    drop_block: int = 1,
) -> Share:
    """Share ``limit`` (raw tokens: the prompt's room) in the budget's order (see the module docstring).

    ``always``: the parts always sent (``system_and_profile``, ``instructions``, ``pins``,
    ``current_message``, ``this_turn``); ``tools``: the tool definitions' cost; ``ranked``: passages and
    brought-back turns, best first; ``history``: each earlier turn's cost, oldest first; ``ranked_intro``: the line
    introducing them, counted once when any is sent.
    """
    parts = dict.fromkeys(PARTS, 0)
    parts.update({name: always.get(name, 0) for name in ALWAYS})
    used = sum(parts.values())
    if used > limit:
        return Share(False, False, 0, len(history), parts)
    budget = limit - used if tool_budget is None else min(limit - used, tool_budget)
    tools_kept = tools > 0 and tools <= budget
    if tools_kept:
        parts["tool_definitions"] = tools
        used += tools
    kept = 0
    for piece in ranked:
        cost = piece.tokens + (ranked_intro if kept == 0 else 0)
        if used + cost > limit:
            break
        parts[piece.kind] += cost
        used += cost
        kept += 1
    dropped = len(history)
    while dropped and history[dropped - 1] <= limit - used:
        dropped -= 1
        used += history[dropped]
    if dropped:  # in blocks counted from the first turn: the start of what is sent stays put
        dropped = min(len(history), -(-dropped // drop_block) * drop_block)
    parts["history"] = sum(history[dropped:])
    return Share(True, tools_kept, kept, dropped, parts)


__all__ = ["ALWAYS", "FULL", "HIGH", "LABELS", "PARTS", "ContextBreakdown", "Ranked", "Share", "recorded", "share"]
