"""What the panes follow: one set of signals per open session, published on the UI thread.

**Who owns them.** A Textual ``Signal`` needs a DOM owner and ``services/`` never imports Textual, so
the signals live here, in the UI's lowest layer, and the App owns them: ``AriesApp`` makes one
``SessionHub`` (its ``signals``) for its lifetime, and ``app.sessions.ActiveSession`` asks it for a
fresh ``SessionSignals`` each time a session becomes active (``SessionHub.open``). The hub's ``opened``
signal says so; a pane subscribes to it in ``on_mount`` (``follow_sessions``), shows the new session
afresh and subscribes to that session's signals. When the session closes (``SessionHub.close``) its
signals drop every subscriber and ignore whatever is still posted to them: a pane subscribed to a
closed session hears nothing, so no callback asks "is this still the active session?".

**On which thread.** Services report from worker threads (the conversation writer, the approval
queue, a controller's thread). ``SessionSignals.post`` — reached from a controller as
``Host.publish`` — is the one thread-safe entry point: on the UI thread it publishes at once; from any
other thread it hops to the UI thread's event loop (``loop.call_soon_threadsafe``, what Textual's own
``post_message`` does from a thread), in the order posted. Nothing else publishes.

**Errors.** An exception in a pane's callback reaches ``App._handle_exception``: the App exits with
the traceback and ``run_test`` re-raises it (``Signal.publish`` would only log it). A session's news
runs through the subscriber's queue, where Textual hands an exception to the App; the one immediate
subscription, ``SessionHub.opened`` (``follow_sessions``), is guarded to do the same (``PaneSignal``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from textual.signal import Signal, SignalCallbackType

from widgets.messages import (
    ApprovalsChanged,
    ArtifactsChanged,
    ConversationEntry,
    ConversationStarted,
    EntryRevealed,
    HitsFound,
    IndexDropped,
    IngestEnded,
    IngestProgress,
    QueueChanged,
    SessionChanged,
    StatusStarted,
    StatusStopped,
    StatusWaiting,
    TurnEvent,
)

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from services.session.session import Session

T = TypeVar("T")

Conversational = ConversationStarted | ConversationEntry | EntryRevealed
RetrievalNews = HitsFound | IndexDropped | IngestProgress | IngestEnded
StatusNews = StatusStarted | StatusStopped | StatusWaiting
PaneMessage = (
    SessionChanged
    | Conversational
    | TurnEvent
    | ApprovalsChanged
    | RetrievalNews
    | ArtifactsChanged
    | StatusNews
    | QueueChanged
)
"""Every message a session's signals carry (``SessionSignals.post`` routes each to its signal)."""

ROUTES: dict[type[Any], str] = {
    SessionChanged: "changed",
    ConversationStarted: "conversation",
    ConversationEntry: "conversation",
    EntryRevealed: "conversation",
    TurnEvent: "turn",
    ApprovalsChanged: "approvals",
    HitsFound: "retrieval",
    IndexDropped: "retrieval",
    IngestProgress: "retrieval",
    IngestEnded: "retrieval",
    ArtifactsChanged: "artifacts",
    StatusStarted: "status",
    StatusStopped: "status",
    StatusWaiting: "status",
    QueueChanged: "queue",
}
"""The signal of ``SessionSignals`` each pane message is published on."""


class PaneSignal(Signal[T], Generic[T]):
    """A ``Signal`` that never swallows a subscriber's exception. A callback runs through the
    subscriber's queue (the default), where an exception is the App's (``_handle_exception``); an
    ``immediate`` one (synchronous, run inside ``publish``) is guarded to hand its exception to the App
    too, instead of ``Signal.publish``'s log line. It remembers its subscribers so that ``drop`` can
    forget them all."""

    def __init__(self, owner: DOMNode, name: str) -> None:
        super().__init__(owner, name)
        self.subscribers: list[DOMNode] = []

    def subscribe(self, node: DOMNode, callback: SignalCallbackType[T], immediate: bool = False) -> None:
        if immediate:

            def guarded(data: T) -> None:
                try:
                    callback(data)
                except Exception as error:  # the App exits with it (run_test re-raises it)
                    node.app._handle_exception(error)

            super().subscribe(node, guarded, immediate=True)
        else:
            super().subscribe(node, callback)
        self.subscribers.append(node)

    def drop(self) -> None:
        for node in self.subscribers:
            self.unsubscribe(node)
        self.subscribers.clear()


class SessionSignals:
    """The UI side of one open session: one signal per kind of news its panes follow."""

    def __init__(self, owner: DOMNode, session: Session) -> None:
        self.session = session
        self.name = session.workspace.name
        self.closed = False
        self.followers: list[DOMNode] = []  # the nodes that have shown this session (``follow_sessions``)
        self.changed: PaneSignal[SessionChanged] = PaneSignal(owner, "changed")
        """What is in force changed (policy, mode, model, profile, index in use, trust, the web viewer)."""
        self.conversation: PaneSignal[Conversational] = PaneSignal(owner, "conversation")
        """A conversation started or reopened; an entry written (of the session's current conversation);
        an entry to show (a search hit)."""
        self.turn: PaneSignal[TurnEvent] = PaneSignal(owner, "turn")
        self.approvals: PaneSignal[ApprovalsChanged] = PaneSignal(owner, "approvals")
        self.retrieval: PaneSignal[RetrievalNews] = PaneSignal(owner, "retrieval")
        self.artifacts: PaneSignal[ArtifactsChanged] = PaneSignal(owner, "artifacts")
        self.status: PaneSignal[StatusNews] = PaneSignal(owner, "status")
        self.queue: PaneSignal[QueueChanged] = PaneSignal(owner, "queue")
        """The lines typed ahead while a turn runs (``app.commands.typeahead``)."""
        self._loop = asyncio.get_running_loop()  # made on the UI thread (ActiveSession.activate)
        self._thread = threading.get_ident()

    def post(self, message: PaneMessage) -> None:
        """Publish ``message`` on its signal (thread-safe: from another thread it hops to the UI thread)."""
        if self.closed:
            return
        if threading.get_ident() == self._thread:
            self._publish(message)
        else:
            try:
                self._loop.call_soon_threadsafe(self._publish, message)
            except RuntimeError:  # the App's loop is closed: nobody is left to hear it
                pass

    def _publish(self, message: PaneMessage) -> None:
        if self.closed:
            return  # closed while the message was on its way
        if (
            isinstance(message, ConversationEntry)
            and message.conversation_id != self.session.conversation.conversation_id
        ):
            return  # written to a conversation the session has left (/new, /resume) before it heard the switch
        signal: PaneSignal[Any] = getattr(self, ROUTES[type(message)])
        signal.publish(message)

    def close(self) -> None:
        """The session closed: its signals forget their subscribers and ignore what is still posted."""
        self.closed = True
        for name in sorted(set(ROUTES.values())):
            signal: PaneSignal[Any] = getattr(self, name)
            signal.drop()


class SessionHub:
    """The App's: which session is active (``current``), and ``opened`` each time one becomes active."""

    def __init__(self, owner: DOMNode) -> None:
        self.owner = owner
        self.current: SessionSignals | None = None
        self.opened: PaneSignal[SessionSignals] = PaneSignal(owner, "opened")

    def open(self, session: Session) -> SessionSignals:
        """``session`` is active now: its signals, announced to every follower (on the UI thread)."""
        self.close()
        self.current = SessionSignals(self.owner, session)
        self.opened.publish(self.current)
        return self.current

    def close(self) -> None:
        signals, self.current = self.current, None
        if signals is not None:
            signals.close()

    def post(self, message: PaneMessage) -> None:
        """Thread-safe: ``message`` for the panes of the active session. A message naming its session
        goes to that session's signals only: a closed session's are gone."""
        signals = self.current
        session = getattr(message, "session", None)
        if signals is not None and (session is None or session is signals.session):
            signals.post(message)


def hub_of(node: DOMNode) -> SessionHub | None:
    """The App's hub (``AriesApp.signals``); None in an App without one (a pane tested alone)."""
    hub = getattr(node.app, "signals", None)
    return hub if isinstance(hub, SessionHub) else None


def follow_sessions(node: DOMNode, shown: Callable[[SessionSignals], None]) -> None:
    """Call from ``on_mount``: ``shown(signals)`` for the active session (if one is open) and for each
    session opened later; ``shown`` subscribes to what it follows on ``signals`` and shows the session.
    It runs inside ``SessionHub.open`` (immediate, synchronous: nothing the new session publishes can
    come before the node's subscriptions), its exception handed to the App."""
    hub = hub_of(node)
    if hub is None:
        return

    def opened(signals: SessionSignals) -> None:
        shown(signals)
        signals.followers.append(node)

    hub.opened.subscribe(node, opened, immediate=True)
    if hub.current is not None:
        opened(hub.current)
