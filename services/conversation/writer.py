"""The one writer of a conversation: events in, NDJSON lines out, subscribers told.

``Conversation.record(event)`` appends the event's entry to the transcript (one fsynced line,
see ``services.workspace.transcripts``) and then calls every subscriber with that same entry and the typed
event it was written from, in the writer's thread. A subscriber that raises is dropped from nothing
and breaks nothing: its error is kept in ``subscriber_errors`` (the record is on disk either way).
The TUI subscribes and publishes them on the session's signals (thread-safe); headless callers
render them or ignore them.

Turn ids are ``<conversation>-t<N>``: unique in the workspace, in order, stable on reopen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from services.conversation.events import ConversationEvent, Notice, TimelineMark
from services.conversation.hold import check_writer
from services.conversation.timeline import Timeline, timeline_of
from services.workspace.transcripts import ReadResult, Transcript

Subscriber = Callable[[dict[str, Any], ConversationEvent], object]


class Conversation:
    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._dialogue: list[dict[str, Any]] = []  # user and assistant entries of turns, in order
        self._timeline = Timeline()
        self.format_notice: str | None = None  # what of a newer Aries's transcript was skipped
        self._compactions: list[dict[str, Any]] = []  # /compact's entries (services.assistant.compaction)
        self._turns = self._load()
        self.subscriber_errors: list[str] = []

    @property
    def conversation_id(self) -> str:
        return self.transcript.conversation_id

    def _load(self) -> int:
        """Read the transcript once: the turns so far and their dialogue (kept in memory, small)."""
        result = self.transcript.read()
        entries = result.entries
        self.format_notice = result.newer_notice
        self._dialogue = [e for e in entries if _is_dialogue(e)]
        self._timeline = timeline_of(entries)
        self._compactions = [e for e in entries if e.get("kind") == "compaction"]
        return len({str(e["turn_id"]) for e in entries if e.get("turn_id")})

    def dialogue(self) -> list[dict[str, Any]]:
        """The user and assistant entries of the turns in force (what a model's history is built from:
        turns a rewind put away are not), without reading the file again."""
        with self._lock:
            live = set(self._timeline.lineage)
            return [e for e in self._dialogue if str(e["turn_id"]) in live]

    def timeline(self) -> Timeline:
        """The turns in force, pins and checkpoints (:mod:`services.conversation.timeline`)."""
        with self._lock:
            return self._timeline

    def mark(self, text: str, fields: dict[str, Any]) -> dict[str, Any]:
        """Record a pin, unpin, checkpoint or rewind, and read the timeline again (they are rare)."""
        entry = self.record(TimelineMark(text=text, fields=fields))
        entries = self.transcript.read().entries
        with self._lock:
            self._timeline = timeline_of(entries)
        return entry

    def compactions(self) -> list[dict[str, Any]]:
        """The ``compaction`` entries so far (summaries, edits, undos), in order, without reading the file."""
        with self._lock:
            return list(self._compactions)

    def new_turn(self) -> str:
        with self._lock:
            self._turns += 1
            return f"{self.transcript.conversation_id}-t{self._turns:04d}"

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call ``subscriber(entry, event)`` for every entry written from now on; returns an unsubscribe."""
        with self._lock:
            self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            with self._lock:
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)

        return unsubscribe

    def record(self, event: ConversationEvent) -> dict[str, Any]:
        """Append ``event``'s entry and tell the subscribers; ``ConversationBusy`` when another live
        Aries holds this conversation (``services.conversation.hold``): one writer at a time."""
        check_writer(self.transcript.directory, self.transcript.conversation_id)
        entry = self.transcript.append(event.role, event.content, **event.to_fields())
        with self._lock:
            turn = entry.get("turn_id")
            if turn and str(turn) not in self._timeline.parent:
                self._timeline = _begun(self._timeline, str(turn))
            if _is_dialogue(entry):
                self._dialogue.append(entry)
            elif entry.get("kind") == "compaction":
                self._compactions.append(entry)
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            try:
                subscriber(entry, event)
            except Exception as exc:  # a renderer's bug never loses or blocks a record
                self.subscriber_errors.append(f"{type(exc).__name__}: {exc}")
        return entry

    def notice(self, text: str, *, level: str = "info", title: str | None = None) -> dict[str, Any]:
        return self.record(Notice(text=text, level=level, title=title))

    def read(self) -> ReadResult:
        return self.transcript.read()


def _begun(timeline: Timeline, turn: str) -> Timeline:
    """``timeline`` with ``turn`` begun at its head (a new value: readers may hold the old one)."""
    from dataclasses import replace

    fresh = replace(timeline, turns=list(timeline.turns), parent=dict(timeline.parent))
    fresh.begin(turn)
    return fresh


def _is_dialogue(entry: dict[str, Any]) -> bool:
    return entry.get("role") in ("user", "assistant") and bool(entry.get("turn_id"))


__all__ = ["Conversation", "Subscriber"]
