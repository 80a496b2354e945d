"""Messages between the App, its controllers and the panes: small dataclasses, nothing else.

The flow is one way: a worker (a thread, or an async worker awaiting one), a controller or a session
subscriber hands one of these to the active session's signals (``Host.publish`` →
``widgets.signals.SessionHub.post``, thread-safe), which publish it on the UI thread to the panes that
subscribed (``widgets.signals``). The App forwards none of them. A pane updates itself from what it
is sent; nothing outside a pane calls into it. They live in the lowest UI layer because the panes
(widgets) handle them; none bubbles. ``Preparing`` is the App's own (a notification), posted to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from services.assistant.events import LoopEvent
    from services.conversation.events import ConversationEvent
    from services.retrieval.models import ProgressEvent
    from services.session.session import Session


@dataclass
class SessionChanged(Message, bubble=False):
    """What is in force changed (policy, approval mode, model, profile, index in use, trust, the web
    viewer): the header and the side panes show it again; the transcript keeps its entries (they
    arrive as ``ConversationEntry``: reloading it while one is on its way would show that one twice).
    A session becoming active is not a message: panes hear ``SessionHub.opened``."""

    session: Session


@dataclass
class ConversationStarted(Message, bubble=False):
    """``/new``: the session started a new conversation (the transcript empties); ``/resume`` and
    ``/fork``: it reopened ``conversation_id`` (the transcript shows ``entries``)."""

    conversation_id: str = ""
    entries: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class EntryRevealed(Message, bubble=False):
    """``/history search``: the hit's conversation is open; the transcript scrolls to its entry
    ``message_id`` and marks it (selected: ``y`` copies it)."""

    conversation_id: str
    message_id: str


@dataclass
class ConversationEntry(Message, bubble=False):
    """The session's conversation wrote an entry (posted from whichever thread wrote it): ``event``, the
    typed event it was written from; ``entry``, its stored form (with its timestamp and ids), which the
    Transcript pane renders like the entries it loads from the file."""

    entry: dict[str, Any]
    conversation_id: str
    event: ConversationEvent


@dataclass
class ApprovalsChanged(Message, bubble=False):
    """A call joined or left the session's approval queue."""

    session: Session


@dataclass
class TurnEvent(Message, bubble=False):
    """Something the turn loop reported (retrieved chunks, a streamed token, a tool call, the end)."""

    event: LoopEvent
    model_label: str = ""
    session: Session | None = None  # whose turn: published on that session's signals only


@dataclass
class HitsFound(Message, bubble=False):
    """A retrieved set to show in the Context pane (``/rag query``, ``/rag last``, a context search)."""

    caption: str
    hits: list[dict[str, Any]]


@dataclass
class IndexDropped(Message, bubble=False):
    """Index ``name`` was dropped: rows shown from it can no longer be opened."""

    name: str


@dataclass
class IngestProgress(Message, bubble=False):
    """An index build moved on (stage, files done of total, the file at hand)."""

    event: ProgressEvent


@dataclass
class IngestEnded(Message, bubble=False):
    """The index build finished, failed or was cancelled: its progress bar goes."""


@dataclass
class ArtifactsChanged(Message, bubble=False):
    """A call kept artifacts; ``select``: the one to highlight (default: the newest)."""

    session: Session
    select: str | None = None


@dataclass
class StatusStarted(Message, bubble=False):
    """Something runs from now: a line above the prompt (``cancellable``: Ctrl+X cancels it)."""

    key: str
    label: str
    cancellable: bool = False


@dataclass
class StatusStopped(Message, bubble=False):
    """What ran under ``key`` is over."""

    key: str


@dataclass
class StatusWaiting(Message, bubble=False):
    """The status items under ``keys`` wait for the operator (calls in the approval queue); all others don't."""

    keys: frozenset[str]


@dataclass
class QueueChanged(Message, bubble=False):
    """The lines typed ahead while a turn runs (oldest first), sent one by one when it ends;
    ``editing``: the newest was taken back into the prompt (Enter queues it again, Esc removes it)."""

    queued: tuple[str, ...]
    editing: bool = False


def call_status_key(tool_call_id: str) -> str:
    """The status item of a model's tool call (one name for the turn's rows and the approval queue's)."""
    return f"call-{tool_call_id}"


@dataclass
class Preparing(Message, bubble=False):
    """A one-time preparation (the ONNX encoder's first export) started or ended, in any thread."""

    key: str
    stage: str
    message: str
