"""Getting the operator's attention: the terminal bell, and an opt-in desktop notification, when a
call starts waiting for approval or a turn ends after more than a few seconds.

The App owns one :class:`Attention`; it follows the active session's signals like a pane does (the
turn's events, the approval queue). What to do is the operator's (``services.settings.operator``,
``notifications``: ``bell`` on by default, ``desktop`` opt-in, ``long_turn_seconds``); ``ARIES_NOTIFY=off``
silences both (the test suite sets it). ``/notify`` changes the store (``app.commands.terminal``).

A desktop notification is OSC 777 (``notify;title;body``: foot, urxvt, VTE) or OSC 9 (iTerm2, kitty,
WezTerm, Windows Terminal, Ghostty), wrapped for tmux's passthrough (``\\ePtmux;…\\e\\\\``, which tmux
forwards with ``set -g allow-passthrough on``). Its text is fixed (:data:`DESKTOP_TEXT`): a model's
words could end the sequence and write to the terminal themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from time import monotonic
from typing import TYPE_CHECKING, Any, Literal

from widgets.signals import SessionSignals, follow_sessions

if TYPE_CHECKING:
    from services.settings.operator import Notifications
    from widgets.messages import ApprovalsChanged, TurnEvent

Why = Literal["approval", "turn"]
TITLE = "Aries"
DESKTOP_TEXT: dict[Why, str] = {
    "approval": "A tool call waits for your approval.",
    "turn": "The answer is ready.",
}


def desktop_sequence(why: Why, environ: Mapping[str, str]) -> str:
    """The escape sequence of a desktop notification for ``why`` in the terminal ``environ`` describes."""
    body = DESKTOP_TEXT[why]
    term = environ.get("TERM", "")
    if term.startswith(("foot", "rxvt")) or environ.get("VTE_VERSION"):
        sequence = f"\x1b]777;notify;{TITLE};{body}\x1b\\"
    else:
        sequence = f"\x1b]9;{TITLE}: {body}\x1b\\"
    if environ.get("TMUX"):  # tmux passes a DCS through to the outer terminal, its ESCs doubled
        sequence = "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return sequence


def notifications_off(environ: Mapping[str, str]) -> bool:
    """``ARIES_NOTIFY=off`` (read as ``services.settings.env`` reads it)."""
    return (environ.get("ARIES_NOTIFY") or "").strip().lower() == "off"


class Attention:
    """The App's: rings the bell (and sends a desktop notification, when opted in) when it is wanted."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.settings: Notifications | None = None  # read on first use; /notify replaces it
        self._started: dict[str, float] = {}  # turn id -> when its first event came
        self._waiting: set[str] = set()  # the calls known to wait for approval

    def follow(self) -> None:
        """From the App's ``on_mount``: follow every session shown from now on."""
        follow_sessions(self.app, self._session_opened)

    def _session_opened(self, signals: SessionSignals) -> None:
        signals.turn.subscribe(self.app, self._turn)
        signals.approvals.subscribe(self.app, self._approvals)
        self._started.clear()
        self._waiting = {request.call_id for request in signals.session.approvals.pending()}

    def _turn(self, message: TurnEvent) -> None:
        from services.assistant.events import Cancelled, Done, Failed

        event = message.event
        started = self._started.setdefault(event.turn_id, monotonic())
        if isinstance(event, Done | Failed | Cancelled):
            del self._started[event.turn_id]
            settings = self.current()
            if not isinstance(event, Cancelled) and monotonic() - started > settings.long_turn_seconds:
                self.call("turn")  # a cancelled turn: the operator is here

    def _approvals(self, message: ApprovalsChanged) -> None:
        waiting = {request.call_id for request in message.session.approvals.pending()}
        new, self._waiting = waiting - self._waiting, waiting
        if new:
            self.call("approval")

    def current(self) -> Notifications:
        """The operator's notification settings (the defaults when the file does not read: ``/notify``
        says why)."""
        if self.settings is None:
            from services.settings.operator import Notifications, OperatorSettingsError, load_settings

            try:
                self.settings = load_settings().notifications
            except OperatorSettingsError:
                self.settings = Notifications()
        return self.settings

    def call(self, why: Why) -> None:
        """Ring and/or notify, as the operator's settings say."""
        import os

        if notifications_off(os.environ):
            return
        settings = self.current()
        if settings.bell:
            self.app.bell()
        if settings.desktop:
            write_to_terminal(self.app, desktop_sequence(why, os.environ))


def write_to_terminal(app: Any, data: str) -> None:
    """Write ``data`` to the terminal in order with the App's output. Textual writes its own sequences
    (the bell, OSC 52) through its driver and has no public method for others: this is the one place
    that reaches it. A headless App (tests) has no terminal: nothing is written."""
    driver = getattr(app, "_driver", None)
    if driver is not None and not app.is_headless:
        driver.write(data)


__all__ = ["DESKTOP_TEXT", "Attention", "desktop_sequence", "notifications_off", "write_to_terminal"]
