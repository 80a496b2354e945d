"""The Aries App: owns the active session and the signals its panes follow.

Everything a workspace holds — policy in force, gateway, engine, conversation, approval queue — is
one headless ``services.session.session.Session``. The App opens and closes sessions and owns their signals
(``widgets.signals.SessionHub``): what a session, a controller or a worker reports is published there
(``publish``, thread-safe) and the panes subscribe to it themselves; the App forwards no message to a
pane (``tests/test_signals.py``). Slash commands go to the controllers of ``app.commands`` (each built
on first use, after the first frame), which reach the App only through the ``app.host.Host`` protocol.
"""

from __future__ import annotations

from asyncio import Event
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import App
from textual.binding import Binding, BindingType
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from app.commands import Commands
from app.keys import BINDINGS, PALETTE_ROW, SELECTION_ROW
from app.sessions import ActiveSession
from app.settling import settle
from screens.main import MainScreen
from services.errors import AriesError
from widgets import messages
from widgets.approvals.pane import ApprovalsPane
from widgets.attention import Attention
from widgets.context.pane import ContextPane
from widgets.messages import ApprovalsChanged, Preparing, SessionChanged, TurnEvent
from widgets.signals import PaneMessage, SessionHub, SessionSignals, follow_sessions
from widgets.themes import start_theme

if TYPE_CHECKING:
    from textual.command import Provider

    from services.models.window_budget import ContextBreakdown
    from services.session.session import Session
    from services.workspace.manager import Workspace, WorkspaceManager


def _palette() -> type[Provider]:
    from app.palette import AriesCommands  # with the palette, not at start-up

    return AriesCommands


class AriesApp(App[int]):
    TITLE = "Aries"
    # The main screen is the default screen, whose CSS_PATH Textual does not load by itself.
    CSS_PATH = ["aries.tcss", "../screens/main.tcss"]
    COMMANDS = App.COMMANDS | {_palette}
    BINDINGS: ClassVar[list[BindingType]] = BINDINGS

    def __init__(
        self,
        workspace: str | None = None,
        *,
        create: bool = True,
        manager: WorkspaceManager | None = None,
        conversation: str = "last",
    ) -> None:
        super().__init__()
        self._manager, self._initial, self._create = manager, workspace, create
        self.commands = Commands(self)  # the controllers, each made on first use
        self.signals = SessionHub(self)  # the active session's signals, which the panes follow
        self.active = ActiveSession(self, self.commands, self.signals, conversation=conversation)  # last, new, an id
        self.settled = Event()  # the first workspace open and the deferred start-up work done
        self.idle = Event()  # settled, and the work that waited for it (search index, MCP, vectors) done
        self.meter: ContextBreakdown | None = None  # the active session's last model request (header, /usage)
        start_theme(self)  # the operator's saved theme, before the first frame
        self.attention = Attention(self)  # the bell on an approval wait or a long turn

    @property
    def manager(self) -> WorkspaceManager:
        if self._manager is None:
            from services.workspace.manager import WorkspaceManager

            self._manager = WorkspaceManager()
        return self._manager

    # -- lifecycle -------------------------------------------------------------------------------
    def get_default_screen(self) -> MainScreen:
        return MainScreen()

    async def on_mount(self) -> None:
        # The first frame comes first: the workspace (lease, repair, transcript, panes) opens right
        # after it. Anything that needs the session waits for ``ready()``.
        from services.notices import add_listener

        def told(key: str, stage: str, message: str) -> None:  # from the thread doing the preparation
            self.post_message(Preparing(key, stage, message))

        self._remove_notices = add_listener(told)
        follow_sessions(self, self._session_opened)
        self._end_on_hangup()
        self.attention.follow()
        self.call_after_refresh(self._open_initial)

    def _end_on_hangup(self) -> None:
        """The terminal closed (SIGHUP) or the process was asked to end (SIGTERM): close the session as
        a quit does, so that the workspace is not left marked open as after a crash."""
        import asyncio
        import signal

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, lambda: self.run_worker(self.quit_now(), group="hangup", exclusive=True))
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no such signal
                return

    async def _open_initial(self) -> None:
        await self.active.open_initial(self._initial, create=self._create)
        self.commands.assistant.probe_local_ollama()  # a thread; only with no model configured
        self.run_worker(settle(self, self.settled, self.idle), group="settle", exit_on_error=False)

    async def ready(self) -> None:
        """Return once the first workspace is open (or failed to open and the ephemeral one is)."""
        await self.active.ready.wait()

    async def on_unmount(self) -> None:
        getattr(self, "_remove_notices", lambda: None)()  # set in on_mount
        self._forget_hangup()
        await self.active.close("Aries quit")

    def _forget_hangup(self) -> None:
        import asyncio
        import signal

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                return

    # -- the session -------------------------------------------------------------------------------
    @property
    def session(self) -> Session | None:
        return self.active.session

    @property
    def workspace(self) -> Workspace | None:
        return self.session.workspace if self.session is not None else None

    @property
    def workspace_name(self) -> str:
        return self.workspace.name if self.workspace else ""

    def require_session(self) -> Session:
        if self.session is None:
            raise AriesError("no workspace is open")
        return self.session

    def resolve_path(self, raw: str) -> Path:
        """One rule for paths typed in the TUI: relative paths resolve against the workspace root."""
        path = Path(raw).expanduser()
        return path if path.is_absolute() or self.workspace is None else self.workspace.root / path

    async def open_workspace(self, name: str, *, create: bool = False) -> bool:
        """Open (or create) ``name`` and make it active (errors become one notification)."""
        return await self.active.open(name, create=create)

    def start_conversation(self, reference: str | None = None) -> None:
        self.active.new_conversation(reference)

    def header_text(self) -> str:
        """The context meter of the last request, then only what is in force: workspace, profile, model
        provider, approval mode, policy file."""
        from widgets.header import session_line

        if self.session is None:
            return ""
        model = self.commands.model_label()
        meter = self.meter.meter() if self.meter is not None and model != "offline" else ""  # offline: no window
        return session_line(self.session, model, self.commands.serving(), meter)

    # -- what the App itself follows of the active session (the panes follow it themselves) ----------
    def _session_opened(self, signals: SessionSignals) -> None:
        signals.changed.subscribe(self, self._show_header)
        signals.approvals.subscribe(self, self._approvals_changed)
        signals.turn.subscribe(self, self._turn_heard)
        self.meter = None  # a new session: no request sent yet
        self._show_header()
        if signals.session.profile_may_set():  # a broken profile says so (deferred start-up work)
            self.commands.profiles.check_in_background()
        self.commands.history_index.start(signals.session)  # the conversation search index, once settled
        self.commands.rag.resume_vectors()  # vectors an interrupted rag index add left pending

    def _show_header(self, _: SessionChanged | None = None) -> None:
        self.sub_title = self.header_text()

    def _approvals_changed(self, message: ApprovalsChanged) -> None:
        self.commands.approvals.changed(message.session)  # a decided call's modal closes

    def _turn_heard(self, message: TurnEvent) -> None:
        from services.assistant.events import Cancelled, ContextMeasured, Failed, ToolFinished

        if isinstance(message.event, Cancelled | Failed):  # the modal of its waiting call closes
            self.commands.approvals.close_modal_of(message.event.turn_id)
        elif isinstance(message.event, ToolFinished) and message.event.ok and message.session is not None:
            self.publish(messages.ArtifactsChanged(message.session))  # a model's call may have kept some
        elif isinstance(message.event, ContextMeasured):
            self.meter = message.event.breakdown
            self._show_header()

    def publish(self, message: PaneMessage) -> None:
        """News for the panes of the active session (thread-safe: ``app.host.Host.publish``)."""
        self.signals.post(message)

    @on(ApprovalsPane.Open)
    def _open_approval(self, message: ApprovalsPane.Open) -> None:
        self.commands.approvals.open(message.call_id)

    def on_tool_call_block_show_audit(self, message: Any) -> None:
        """``a`` on a tool-call block: its audit row (a naming-convention handler, so that the block's
        module stays out of start-up)."""
        self.commands.tools.show_audit(str(message.call_id))

    def on_markdown_link_clicked(self, message: Any) -> None:
        """A citation link in a streamed answer (``aries-chunk:<handle>``) opens its chunk."""
        href = str(getattr(message, "href", ""))
        if href.startswith("aries-chunk:"):
            self.commands.rag.show_chunk(href.removeprefix("aries-chunk:"))

    @on(ContextPane.ShowChunk)
    def _show_chunk(self, message: ContextPane.ShowChunk) -> None:
        self.commands.rag.show_chunk(message.handle)

    @on(Preparing)
    def _preparing(self, message: Preparing) -> None:
        self.commands.rag.preparing(message)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that died of an unexpected error says so (typed errors are reported where raised);
        a turn's end sends what was typed ahead of it."""
        over = (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED)
        if event.worker.group == "turn" and event.state in over:
            self.call_later(self.commands.turn_ended)
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            self.log.error(f"worker {event.worker.name} failed", error)
            self.report_error(f"{type(error).__name__}: {error}", f"Internal error in {event.worker.group}")

    # -- what the controllers use (app.host.Host) ------------------------------------------------------
    def say(self, text: str, title: str | None = None) -> None:
        """A notice in the transcript (recorded, role ``notice``: never sent to a model)."""
        if self.session is not None:
            self.session.conversation.notice(text, title=title)

    def report_error(self, message: str, title: str) -> None:
        """An error toast; a slash command's (titled ``/name`` or ``Command``) is also a notice in the
        transcript, where it stays after the toast has gone (recorded, rendered through the neutraliser)."""
        self.notify(message, title=title, severity="error", timeout=8)
        if self.session is not None and (title.startswith("/") or title == "Command"):
            self.session.conversation.notice(message, level="error", title=title)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Notifications show their text literally (never markup) and neutralised: they often carry
        paths, names and messages that came from documents, tools or the operator."""
        from widgets.safe import clean

        if not markup:
            message, title = clean(message), clean(title, single_line=True)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def copy_to_clipboard(self, text: str) -> None:
        """Every copy, Textual's own (an input's selection) too, without control, escape or bidi
        characters (``widgets.clipboard``: the copies Aries makes say how many it removed)."""
        from services.text.textsafe import strip_unsafe

        super().copy_to_clipboard(strip_unsafe(text)[0])

    def action_help_quit(self) -> None:
        """Ctrl+C with nothing selected: how to quit (Textual's hint is markup, shown here literally)."""
        self.notify("Press Ctrl+Q to quit. Ctrl+C copies text selected with the mouse.", title="Quit?")

    def status_start(self, key: str, label: str, *, cancellable: bool = False) -> None:
        """A line above the prompt while something runs (``cancellable``: Ctrl+X cancels it)."""
        self.publish(messages.StatusStarted(key, label, cancellable))

    def status_stop(self, key: str) -> None:
        self.publish(messages.StatusStopped(key))

    # -- keys and the prompt --------------------------------------------------------------------------
    def get_key_display(self, binding: Binding) -> str:
        """The app's one key notation (``Ctrl+O``, not Textual's ``^o``) in Textual's own key panel
        (the palette's "Keys") as in F1 and the key bar."""
        from widgets.keybar import key_label

        return binding.key_display or key_label(binding.key)

    def action_help(self) -> None:
        from screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            rows = [(b.key, b.description, b.tooltip) for b in BINDINGS if isinstance(b, Binding)]
            self.push_screen(HelpScreen([*rows, PALETTE_ROW, SELECTION_ROW], self.commands.registry.specs()))

    def action_switch_workspace(self, create: bool = False) -> None:
        self.commands.workspace.switcher()

    def action_focus_pane(self, pane: str) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.focus_pane(pane)

    def action_context_browse(self) -> None:
        try:
            self.commands.context.browse()
        except AriesError as exc:
            self.report_error(exc.message, "Context")

    def action_focus_prompt(self) -> None:
        """Esc: back to the prompt; at the prompt, a queued message back to edit, or removed."""
        if isinstance(self.screen, MainScreen):
            if self.commands.queued() and self.screen.take_back(self.commands.typeahead.escape):
                return
            self.screen.focus_prompt()

    def action_cancel(self) -> None:
        self.commands.cancel()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.commands.running() if action == "cancel" else True  # Ctrl+X: only while something runs

    async def action_quit(self) -> None:
        await self.commands.workspace.quit()

    async def quit_now(self) -> None:
        await self.active.close("Aries quit")
        self.exit(0)

    @on(Input.Submitted, "#prompt")
    async def _prompt_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()  # the prompt emptied itself when it sent it (PromptInput.action_submit)
        if not text:
            return
        await self.ready()  # typed in the first instant: runs once the workspace is open
        self.commands.submit(text)  # a command, or a turn of the headless loop; queued while a turn runs
