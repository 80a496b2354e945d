"""What a controller may ask of the App: a narrow protocol, so that no controller imports ``AriesApp``.

``AriesApp`` satisfies both protocols structurally. A controller (``app/commands/<area>.py``) holds
a ``Host``; the workspace commands and the palette hold an ``AppHost``, which adds the App's own
actions. Everything here runs on the App's thread, except the members marked thread-safe: a worker
thread reports back only through those (``publish``, news for the panes through the active session's
signals, ``widgets.signals``; ``post_message``, which Textual makes thread-safe; ``notify`` /
``report_error``, which post Textual's ``Notify`` message).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from services.errors import AriesError, InvalidInput
from widgets.command_spec import CommandError

if TYPE_CHECKING:
    from textual.message import Message
    from textual.screen import Screen
    from textual.worker import Worker, WorkType

    from services.models.window_budget import ContextBreakdown
    from services.session.session import Session
    from services.workspace.manager import WorkspaceManager
    from widgets.attention import Attention
    from widgets.signals import PaneMessage

T = TypeVar("T")


class Host(Protocol):
    meter: ContextBreakdown | None
    """The active session's last model request, part by part (the header's meter; ``/usage``)."""
    settled: asyncio.Event
    """Set once the first workspace is open and the deferred start-up work is done (``app.settling``)."""

    @property
    def session(self) -> Session | None:
        """The active session (None only before the first workspace opens, and while switching)."""

    @property
    def workspace_name(self) -> str: ...

    @property
    def manager(self) -> WorkspaceManager: ...

    @property
    def screen(self) -> Screen[Any]: ...

    def require_session(self) -> Session:
        """The active session, or an ``AriesError`` (reported as one line)."""

    def resolve_path(self, raw: str) -> Path:
        """A path typed in the TUI: relative paths resolve against the workspace root."""

    def say(self, text: str, title: str | None = None) -> None:
        """A notice in the transcript (recorded, role ``notice``: never sent to a model)."""

    def report_error(self, message: str, title: str) -> None:
        """An error notification (thread-safe)."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A notification, shown literally and neutralised (thread-safe)."""

    def status_start(self, key: str, label: str, *, cancellable: bool = False) -> None:
        """A line above the prompt while ``key`` runs."""

    def status_stop(self, key: str) -> None: ...

    def publish(self, message: PaneMessage) -> None:
        """News for the panes of the active session (thread-safe): published on its signals, on the UI
        thread; a message naming a session that is no longer active is heard by nobody."""

    def post_message(self, message: Message) -> bool:
        """Post a message to the App (thread-safe): for the App's own handlers, never for a pane."""

    def run_worker(
        self,
        work: WorkType[Any],
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> Worker[Any]: ...

    def push_screen(self, screen: Screen[Any], callback: Callable[[Any], Any] | None = None) -> Any: ...

    def refresh_bindings(self) -> None:
        """Show or hide the keys whose ``check_action`` depends on what runs (Ctrl+X)."""

    def call_after_refresh(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> bool: ...

    def copy_to_clipboard(self, text: str) -> None: ...


class AppHost(Host, Protocol):
    """The App's own actions, for the workspace commands and the palette."""

    theme: str
    """The Textual theme in force (``/theme``)."""
    attention: Attention
    """The bell and desktop notifications (``widgets.attention``; ``/notify``)."""

    async def open_workspace(self, name: str, *, create: bool = False) -> bool: ...

    def action_switch_workspace(self, create: bool = False) -> None: ...

    def action_help(self) -> None: ...

    def action_context_browse(self) -> None: ...

    async def action_quit(self) -> None: ...

    async def quit_now(self) -> None:
        """Close the session (waiting calls denied and recorded) and leave."""

    def start_conversation(self, reference: str | None = None) -> None:
        """``/new``: a new conversation in the session (``reference``: ``/resume`` a stored one, an
        ``AriesError`` when none matches), followed by the transcript."""


def when_idle(turn_running: Callable[[], bool], what: str) -> None:
    """Refuse (one line) to ``what`` while a turn is running: the conversation is the turn's until it ends."""
    if turn_running():
        raise InvalidInput(f"a turn is running: wait for it or cancel it (Ctrl+X), then {what}")


def run_task(
    host: Host,
    title: str,
    work: Callable[[], T],
    then: Callable[[T], object] | None = None,
    *,
    group: str = "default",
    status: str = "",
    key: str = "",
    cleanup: Callable[[], object] | None = None,
) -> Worker[None]:
    """The controllers' one way to run blocking work: ``work()`` in a thread, awaited by an async
    worker of ``group``; otherwise ``then(result)`` runs on the App's thread. A typed error (an
    ``AriesError``, or a ``CommandError``) raised by ``work`` or by ``then`` is one error line titled
    ``title``. ``status``: a line above the prompt from now until the work ends (under ``key``:
    progress may update it); ``cleanup`` runs either way, before ``then``."""
    key = key or f"task-{group}-{title}"
    if status:
        host.status_start(key, status)

    async def task() -> None:
        try:
            try:
                result = await asyncio.to_thread(work)
            finally:
                if status:
                    host.status_stop(key)
                if cleanup is not None:
                    cleanup()
            if then is not None:
                then(result)
        except AriesError as exc:
            host.report_error(exc.message, title)
        except CommandError as exc:
            host.report_error(str(exc), title)

    return host.run_worker(task(), group=group, exit_on_error=False)
