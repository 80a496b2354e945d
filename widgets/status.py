"""The live status line above the prompt: what is running now, for how long, and how to cancel it.

``start(key, label)`` adds an item (a tool call, a turn); ``stop(key)`` removes it. While anything
runs, the line shows each item with its elapsed time, ticking; when idle it is hidden. It follows the
active session's signals (``widgets.signals``), subscribed when mounted: the turn loop's events (a
turn's row from its retrieval to its end, a row per tool call the model asked for) and the ``status``
signal (``StatusStarted`` / ``StatusStopped`` around other work). The App binds the cancel key named
in ``cancel_hint``. An item that waits for the operator (``StatusWaiting``: a call in the approval
queue) says so instead of counting; its clock starts when it stops waiting. A session shown afresh
clears the line: what ran before was closed with its session.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.widgets import Static

from widgets.messages import StatusStarted, StatusStopped, TurnEvent, call_status_key
from widgets.safe import clip
from widgets.signals import SessionSignals, StatusNews, follow_sessions

TICK_S = 0.1
LABEL_WIDTH = 60
WAITING_NOTE = "waiting for your approval — F4"


def monotonic() -> float:
    """The status line's clock (a module function, so that a test can stop it)."""
    return time.monotonic()


def elapsed_text(seconds: float) -> str:
    """``4.2 s`` under a minute, then ``3 min 07 s``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s"


class RunStatus(Static):
    DEFAULT_CSS = """
    RunStatus { height: auto; max-height: 4; padding: 0 1; background: $boost; display: none; }
    RunStatus.-running { display: block; }
    """

    def __init__(
        self,
        *,
        cancel_hint: str = "Ctrl+X cancels",
        clock: Callable[[], float] | None = None,
        id: str | None = None,  # noqa: A002 - Textual's parameter name
    ) -> None:
        super().__init__("", id=id, markup=False)
        self.cancel_hint = cancel_hint
        self.clock = clock or monotonic
        self._items: dict[str, tuple[str, float, bool]] = {}
        self._timer: Any = None
        self._waiting: frozenset[str] = frozenset()
        self._calls: dict[str, set[str]] = {}  # each turn's rows for its tool calls

    @property
    def running(self) -> list[str]:
        """The keys of what runs now, oldest first."""
        return list(self._items)

    def start(self, key: str, label: str, *, cancellable: bool = False) -> None:
        """Show ``label`` (plain text, neutralised) as running from now; restarting a key restarts its clock.
        The cancel hint shows on the first line that ``cancellable`` (the key cancels it) only."""
        self._items[key] = (label, self.clock(), cancellable)
        self._changed()

    def stop(self, key: str) -> None:
        """Remove ``key`` (unknown keys are ignored); hides the line when nothing runs."""
        if self._items.pop(key, None) is not None:
            self._changed()

    # -- what the session's signals say -----------------------------------------------------------
    def _session_opened(self, signals: SessionSignals) -> None:
        signals.status.subscribe(self, self._status)
        signals.turn.subscribe(self, self._turn_event)
        self.clear()

    def _status(self, message: StatusNews) -> None:
        if isinstance(message, StatusStarted):
            self.start(message.key, message.label, cancellable=message.cancellable)
        elif isinstance(message, StatusStopped):
            self.stop(message.key)
        else:
            self.wait_for(message.keys)

    def _turn_event(self, message: TurnEvent) -> None:
        """A turn's row from its retrieval to its end; a row for each tool call the model asked for."""
        from services.assistant import Cancelled, Done, Failed, Retrieved, ToolFinished, ToolProposed

        event, label = message.event, message.model_label
        if isinstance(event, Retrieved):
            self.start(f"turn-{event.turn_id}", f"{label} is answering", cancellable=True)
        elif isinstance(event, ToolProposed):
            key = call_status_key(event.tool_call_id)
            self._calls.setdefault(event.turn_id, set()).add(key)
            self.start(key, f"{event.tool_id} (asked by {label})", cancellable=True)
        elif isinstance(event, ToolFinished):
            self._calls.get(event.turn_id, set()).discard(call_status_key(event.tool_call_id))
            self.stop(call_status_key(event.tool_call_id))
        elif isinstance(event, Done | Cancelled | Failed):  # over: its row goes, and each call's it left
            for key in self._calls.pop(event.turn_id, set()):
                self.stop(key)
            self.stop(f"turn-{event.turn_id}")

    def wait_for(self, keys: frozenset[str]) -> None:
        """``keys`` wait for the operator now; an item that stops waiting counts its time from now."""
        now = self.clock()
        for key in self._waiting - keys:
            if key in self._items:
                label, _, cancellable = self._items[key]
                self._items[key] = (label, now, cancellable)
        self._waiting = frozenset(keys)
        self._changed()

    def clear(self) -> None:
        self._items.clear()
        self._calls.clear()
        self._waiting = frozenset()
        self._changed()

    def _changed(self) -> None:
        running = bool(self._items)
        self.set_class(running, "-running")
        if running and self._timer is None and self.is_mounted:
            self._timer = self.set_interval(TICK_S, self._tick)
        elif not running and self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._tick()

    def on_mount(self) -> None:
        follow_sessions(self, self._session_opened)
        if self._items:
            self._changed()

    def _tick(self) -> None:
        self.update(self.render_items())

    def render_items(self) -> Text:
        now = self.clock()
        text = Text(no_wrap=True, overflow="ellipsis")
        hinted = False
        for number, (key, (label, started, cancellable)) in enumerate(self._items.items()):
            if number:
                text.append("\n")
            state = WAITING_NOTE if key in self._waiting else elapsed_text(max(now - started, 0.0))
            hint = f"  ·  {self.cancel_hint}" if cancellable and not hinted and self.cancel_hint else ""
            room = LABEL_WIDTH
            if self.size.width:  # narrow (80 columns): the label gives way, the state and hint stay whole
                room = min(room, self.size.width - 2 - len("⏵ ") - len(f"  {state}") - len(hint))
            text.append("⏵ ", style="bold")
            text.append(clip(label, max(room, 8)))
            text.append(f"  {state}", style="bold")
            if hint:
                text.append(hint, style="dim")
                hinted = True
        return text
