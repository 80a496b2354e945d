"""Driving the TUI in tests: wait for a message, not for a time.

``Messages`` is a ``run_test(message_hook=…)`` recorder: every message that any message pump of the
app handles, in order (posted from a worker thread or not). ``wait_for`` returns the first message of
a kind that matches, ``until`` re-checks a condition each time a message is handled; both wake on
the next message, never after a fixed pause, and fail with what they waited for after ``timeout``.
Notifications are ``Notify`` messages here, so tests read them from the recorder, not from
Textual's private notification store.

The panes follow the active session through its signals (``widgets.signals``), not messages:
``panes_show(pilot, name)`` waits until every node that follows sessions has shown the active one, and
``Messages.listen(app)`` records what the session's signals publish along with the messages.

Snapshot tests cannot pass a hook (``snap_compare`` runs the app); their ``run_before`` uses
``until(pilot, check)`` without a recorder, which re-checks after each ``pilot.pause()`` (a barrier:
every message queued in the app and its screen has been handled).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

from textual.app import App
from textual.message import Message
from textual.notifications import Notification, Notify
from textual.pilot import Pilot

M = TypeVar("M", bound=Message)

TIMEOUT_S = 30.0
"""Generous: the machine running the suite may be loaded. A wait ends at the message, not here."""
BACKSTOP_S = 0.25
"""Re-check a condition at least this often: state a thread changes without posting anything."""


class Messages:
    """Pass as ``run_test(message_hook=messages)``; then ``wait_for`` / ``until`` / ``notes``."""

    def __init__(self) -> None:
        self.seen: list[Message] = []
        self._arrived: asyncio.Event | None = None

    def __call__(self, message: Message) -> None:
        self.seen.append(message)
        if self._arrived is not None:
            self._arrived.set()

    def listen(self, app: App[Any]) -> None:
        """Record what the active session's signals publish too (``widgets.signals``), heard by the App
        in order with its messages, from now on and for every session opened later."""
        from widgets.signals import ROUTES, SessionSignals

        hub = app.signals  # type: ignore[attr-defined]

        def opened(signals: SessionSignals) -> None:
            for name in sorted(set(ROUTES.values())):
                getattr(signals, name).subscribe(app, self)

        hub.opened.subscribe(app, opened)
        if hub.current is not None:
            opened(hub.current)

    def mark(self) -> int:
        """A position: ``wait_for(…, since=mark)`` looks only at messages handled after it."""
        return len(self.seen)

    def of(self, kind: type[M], since: int = 0) -> list[M]:
        return [m for m in self.seen[since:] if isinstance(m, kind)]

    def notifications(self, since: int = 0) -> list[Notification]:
        return [m.notification for m in self.of(Notify, since)]

    def notes(self, since: int = 0, severity: str | None = None) -> list[str]:
        """The text of each notification (title, a space, message), oldest first."""
        return [
            f"{n.title} {n.message}".strip()
            for n in self.notifications(since)
            if severity is None or n.severity == severity
        ]

    async def next(self, wait: float) -> None:
        """Return when the next message is handled, or after ``wait`` seconds at most."""
        if self._arrived is None:
            self._arrived = asyncio.Event()
        self._arrived.clear()
        try:
            await asyncio.wait_for(self._arrived.wait(), wait)
        except TimeoutError:
            pass

    async def wait_for(
        self,
        pilot: Pilot[Any],
        kind: type[M],
        where: Callable[[M], bool] | None = None,
        *,
        since: int = 0,
        timeout: float = TIMEOUT_S,
    ) -> M:
        """The first ``kind`` message (after ``since``) for which ``where`` holds, once it is handled."""
        found: list[M] = []

        def arrived() -> bool:
            found[:] = [m for m in self.of(kind, since) if where is None or where(m)][:1]
            return bool(found)

        await until(pilot, arrived, messages=self, timeout=timeout, what=f"a {kind.__name__} message")
        return found[0]  # handled, and whatever it started too (until's last barrier)

    async def notified(self, pilot: Pilot[Any], text: str, *, since: int = 0, timeout: float = TIMEOUT_S) -> str:
        """The first notification (after ``since``) whose title or message contains ``text``."""
        note = await self.wait_for(
            pilot,
            Notify,
            lambda m: text in f"{m.notification.title} {m.notification.message}",
            since=since,
            timeout=timeout,
        )
        return f"{note.notification.title} {note.notification.message}"


async def until(
    pilot: Pilot[Any],
    check: Callable[[], Any],
    *,
    messages: Messages | None = None,
    timeout: float = TIMEOUT_S,
    what: str = "",
) -> None:
    """Return once ``check()`` is true: re-checked after each message handled (with a recorder), else
    after each ``pilot.pause()`` barrier; then one barrier more, so that what the change started (a
    screen composing, a signal's callbacks) is done. Fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what or check}")
        if messages is not None:
            await messages.next(min(left, BACKSTOP_S))
        else:
            await pilot.pause()
    await pilot.pause()


async def settle(pilot: Pilot[Any]) -> None:
    """Every worker has finished and every message they posted has been handled."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def palette_offers(app: App[Any], text: str) -> bool:
    """The command palette lists a hit containing ``text`` (hits arrive while its search runs)."""
    from textual.command import CommandList

    lists = list(app.screen.query(CommandList))
    return bool(lists) and any(text in str(option.prompt) for option in lists[0].options)


async def command(pilot: Pilot[Any], line: str) -> None:
    """Type ``line`` at the prompt and press Enter (the prompt takes the focus first)."""
    pilot.app.screen.query_one("#prompt").focus()
    await pilot.press(*line, "enter")


def followed(app: App[Any], name: str | None = None) -> bool:
    """The active session (of workspace ``name``) is shown by every node that follows sessions (the
    panes, the status row, the prompt's history, the App's header)."""
    hub = getattr(app, "signals", None)
    current = getattr(hub, "current", None)
    if hub is None or current is None or (name is not None and current.name != name):
        return False
    following = [node for node in hub.opened.subscribers if node.is_attached]
    return bool(following) and all(node in current.followers for node in following)


async def panes_show(pilot: Pilot[Any], name: str | None = None, *, timeout: float = TIMEOUT_S) -> None:
    """Return once the active session (of workspace ``name``) is shown by every pane that follows it."""
    what = f"the panes to show workspace {name}" if name else "the panes to show the active session"
    await until(pilot, lambda: followed(pilot.app, name), timeout=timeout, what=what)
