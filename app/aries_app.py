"""The Aries App: owns the state (the active session) and wires screens to services.

Everything a workspace holds — policy in force, gateway, engine, conversation, approval queue — is
one headless ``services.session.Session``. The App opens and closes sessions, forwards what the
session reports (conversation entries, approval queue changes) to the panes as messages, and hands
slash commands to two small controllers (``RagController``, ``ToolController``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import App
from textual.binding import Binding, BindingType
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from app.messages import ApprovalsChanged, ConversationEntry, TurnEvent, WorkspaceChanged
from screens.main import MainScreen
from services.errors import AriesError
from services.textsafe import neutralize
from widgets.approvals.pane import ApprovalsPane
from widgets.artifacts.pane import ArtifactsPane
from widgets.context.pane import ContextPane
from widgets.transcript.pane import TranscriptPane

if TYPE_CHECKING:
    from textual.command import Provider

    from app.assistant_controller import AssistantController
    from app.bundle_controller import BundleController
    from app.context_controller import ContextController
    from app.history_controller import HistoryController
    from app.profile_controller import ProfileController
    from app.rag_controller import RagController
    from app.serve_controller import ServeController
    from app.tool_controller import ToolController
    from services.leases import WorkspaceLease
    from services.retrieval.models import ProgressEvent
    from services.session import Session
    from services.tools.gateway import ApprovalDecision
    from services.workspaces import Workspace, WorkspaceManager


def _workspace_commands() -> type[Provider]:
    from app.palette import WorkspaceCommands  # with the palette, not at start-up

    return WorkspaceCommands


class AriesApp(App[int]):
    TITLE = "Aries"
    # The main screen is the default screen, whose CSS_PATH Textual does not load by itself.
    CSS_PATH = ["aries.tcss", "../screens/main.tcss"]
    COMMANDS = App.COMMANDS | {_workspace_commands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+o",
            "switch_workspace",
            "Workspaces",
            id="workspace.switch",
            tooltip="Open the workspace switcher (fuzzy filter, Enter opens, Ctrl+N creates)",
        ),
        Binding("f1", "help", "Help", id="help", tooltip="List every command and key"),
        Binding(
            "f2", "focus_pane('transcript')", "Transcript", id="focus.transcript", tooltip="Focus the Transcript pane"
        ),
        Binding(
            "f3",
            "focus_pane('context')",
            "Context",
            id="focus.context",
            tooltip="Focus the Context pane (retrieved chunks)",
        ),
        Binding(
            "f4",
            "focus_pane('approvals')",
            "Approvals",
            id="focus.approvals",
            tooltip="Focus the Approvals pane (pending tool calls)",
        ),
        Binding("f5", "focus_pane('artifacts')", "Artifacts", id="focus.artifacts", tooltip="Focus the Artifacts pane"),
        Binding(
            "f6",
            "context_browse",
            "Context tree",
            show=False,  # the workbench's key bar stays as it is; F1 and the palette list it
            id="context.browse",
            tooltip="Open the context browser: the axiom:// scopes, L0/L1 previews, files",
        ),
        Binding(
            "ctrl+x",
            "cancel",
            "Cancel",
            priority=True,  # over the prompt's own Ctrl+X (cut), but only while something runs (check_action)
            id="cancel",
            tooltip="Cancel the running turn (mid-stream, mid-tool or waiting for approval), else stop indexing "
            "after the current file",
        ),
        Binding("escape", "focus_prompt", "Prompt", show=False, id="focus.prompt", tooltip="Back to the prompt"),
        Binding("ctrl+q", "quit", "Quit", id="quit", tooltip="Leave Aries (asks first when calls wait for approval)"),
    ]

    def __init__(
        self,
        workspace: str | None = None,
        *,
        create: bool = True,
        manager: WorkspaceManager | None = None,
        conversation: str = "last",
    ) -> None:
        super().__init__()
        self._manager = manager
        self._initial = workspace
        self._create = create
        # The first workspace's conversation: ``last`` (reopen), ``new``, or an id. A workspace opened
        # later (Ctrl+O) reopens its last conversation.
        self._initial_conversation: str | None = conversation
        self.session: Session | None = None
        self._session_ready = asyncio.Event()
        self._unsubscribe: list[Callable[[], None]] = []
        # The controllers (and what they import) are made on first use, after the first frame.
        self._rag: RagController | None = None
        self._tools: ToolController | None = None
        self._assistant: AssistantController | None = None
        self._bundles: BundleController | None = None
        self._history: HistoryController | None = None
        self._profiles: ProfileController | None = None
        self._context_controller: ContextController | None = None
        self._serve: ServeController | None = None

    @property
    def manager(self) -> WorkspaceManager:
        if self._manager is None:
            from services.workspaces import WorkspaceManager

            self._manager = WorkspaceManager()
        return self._manager

    @property
    def rag(self) -> RagController:
        if self._rag is None:
            from app.rag_controller import RagController

            self._rag = RagController(self)
        return self._rag

    @property
    def tools(self) -> ToolController:
        if self._tools is None:
            from app.tool_controller import ToolController

            self._tools = ToolController(self)
        return self._tools

    @property
    def bundles(self) -> BundleController:
        from app.bundle_controller import BundleController

        if self._bundles is None:
            self._bundles = BundleController(self)
        return self._bundles

    @property
    def history(self) -> HistoryController:
        from app.history_controller import HistoryController

        if self._history is None:
            self._history = HistoryController(self)
        return self._history

    @property
    def profiles(self) -> ProfileController:
        if self._profiles is None:
            from app.profile_controller import ProfileController

            self._profiles = ProfileController(self)
        return self._profiles

    @property
    def context(self) -> ContextController:
        if self._context_controller is None:
            from app.context_controller import ContextController

            self._context_controller = ContextController(self)
        return self._context_controller

    @property
    def serve(self) -> ServeController:
        if self._serve is None:
            from app.serve_controller import ServeController

            self._serve = ServeController(self)
        return self._serve

    @property
    def assistant(self) -> AssistantController:
        if self._assistant is None:
            from app.assistant_controller import AssistantController

            self._assistant = AssistantController(self)
        return self._assistant

    # -- lifecycle -------------------------------------------------------------------
    def get_default_screen(self) -> MainScreen:
        return MainScreen()

    async def on_mount(self) -> None:
        # The first frame comes first: the workspace (lease, repair, transcript, panes) opens right
        # after it. Anything that needs the session waits for ``ready()``.
        from services.notices import add_listener

        self._remove_notices = add_listener(self._preparing)
        self.call_after_refresh(self._open_initial)

    def _preparing(self, key: str, stage: str, message: str) -> None:
        """A one-time preparation (the ONNX encoder's first export) runs in a worker: a status line
        while it lasts, and a notice when it starts and ends."""
        if threading.get_ident() == self._thread_id:
            self._show_preparing(key, stage, message)
        else:
            self.call_from_thread(self._show_preparing, key, stage, message)

    def _show_preparing(self, key: str, stage: str, message: str) -> None:
        if stage == "start":
            self.status_start(key, message)
            self.notify(f"{message} Retrieval waits for it.", title="retrieval", timeout=10)
        else:
            self.status_stop(key)
            if stage == "done":
                self.notify(message, title="retrieval", timeout=5)

    async def _open_initial(self) -> None:
        try:
            if self._initial:
                await self.open_workspace(self._initial, create=self._create)
            if self.session is None:
                from services.leases import acquire_lease
                from services.workspaces import ephemeral_workspace

                ephemeral = ephemeral_workspace()
                await self._activate(ephemeral, [], acquire_lease(ephemeral, purpose="tui"))
        finally:
            self._session_ready.set()
        self.set_timer(1.5, self.assistant.probe_local_ollama)

    async def ready(self) -> None:
        """Return once the first workspace is open (or failed to open and the ephemeral one is)."""
        await self._session_ready.wait()

    async def on_unmount(self) -> None:
        remove = getattr(self, "_remove_notices", None)
        if remove is not None:
            remove()
        await self._close_session("Aries quit")

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
        workspace = self.workspace
        if path.is_absolute() or workspace is None:
            return path
        return workspace.root / path

    # -- workspaces --------------------------------------------------------------------
    async def open_workspace(self, name: str, *, create: bool = False) -> bool:
        """Open (or create) ``name`` and make it active. Errors become notifications.

        The workspace's lease is taken first: opening repairs (temp files, torn lines), which must
        never happen under another live Aries. A second Aries on the same workspace is refused with
        the holder's pid."""
        if self.session is not None and self.session.workspace.name == name and not self.session.workspace.ephemeral:
            return True
        from services.leases import acquire_lease
        from services.workspaces import Workspace

        lease = None
        try:
            path = self.manager.path_for(name)
            if create:
                path.mkdir(parents=True, exist_ok=True)
            elif not path.is_dir():
                self.manager.open(name)  # raises the NotFound that says how to create it
            lease = acquire_lease(Workspace(path, name), purpose="tui")
            workspace, report = self.manager.create(name) if create else self.manager.open(name)
            _ = workspace.config  # a broken workspace.yaml is one line here, not a traceback later
        except AriesError as exc:
            if lease is not None:
                lease.release()
            self.report_error(exc.message, "Workspace")
            return False
        warnings = [str(problem) for problem in report.transcript_problems] + report.artifact_problems
        notice = lease.recovery_notice()
        if notice:
            warnings.insert(0, notice)
        await self._activate(workspace, warnings, lease)
        return True

    async def _close_session(self, reason: str) -> None:
        session, self.session = self.session, None
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        if self._serve is not None:  # the web viewer served this workspace only
            if session is not None and self._serve.running:
                session.conversation.notice(f"Web viewer stopped: {reason}.", title="serve")
            await self._serve.shutdown()
        if session is None:
            return
        if self._rag is not None and self._rag.ingest_cancel is not None:
            self._rag.ingest_cancel.set()
        try:
            await session.aclose(reason)  # releases the lease last
        finally:
            session.workspace.close()

    async def _activate(self, workspace: Workspace, warnings: list[str], lease: WorkspaceLease | None = None) -> None:
        from services.session import Session

        if self.session is not None:
            await self._close_session("the workspace was switched")
        choice, self._initial_conversation = self._initial_conversation, None
        try:
            session = Session(
                workspace, source="operator", lease=lease, conversation=None if choice == "new" else choice or "last"
            )
        except AriesError as exc:  # an unknown --conversation: say so, and open the last one
            self.report_error(exc.message, "conversation")
            session = Session(workspace, source="operator", lease=lease)
        self.session = session
        self._subscribe(session)
        for warning in warnings[:5]:
            self.notify(warning, title=f"Workspace {workspace.name}", severity="warning", timeout=8, markup=False)
        self.post_message(WorkspaceChanged(workspace.name))

    def _subscribe(self, session: Session) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        conversation = session.conversation
        self._unsubscribe = [
            conversation.subscribe(
                lambda entry: self.post_message(ConversationEntry(entry, conversation.conversation_id))
            ),
            session.approvals.subscribe(lambda: self.post_message(ApprovalsChanged())),
        ]

    def header_text(self) -> str:
        """Only what is in force: workspace, profile, model provider, approval mode, policy file."""
        session = self.session
        if session is None:
            return ""
        from widgets.header import subtitle

        policy = "workspace policy" if session.policy_path is not None else "default policy"
        try:
            model = self.assistant.model_setting()
        except AriesError:
            model = "not configured (see /model)"
        profile = session.profile_name + (" (broken)" if session.profile_broken else "")
        line = subtitle(workspace=session.workspace.name, profile=profile, model=model, mode=session.mode)
        serving = self._serve.header_part() if self._serve is not None else ""
        return f"{line} · {policy}" + (f" · {serving}" if serving else "")

    @on(WorkspaceChanged)
    @on(MainScreen.Ready)
    def _workspace_shown(self) -> None:
        """A workspace became active (or the panes appeared): fill everything, and bring back its last
        retrieved set in the Context pane (rows of another workspace never stay)."""
        session, pane = self.session, self._context_pane()
        if session is None or pane is None:
            return
        pane.reset()
        pane.set_workspace(session.workspace.name)
        self.reload_panes()
        # After the first frame: the last retrieved set is a nicety, never worth delaying start-up for.
        self.set_timer(
            0.2, lambda: self.run_worker(self._load_last_retrieval, thread=True, group="context", exit_on_error=False)
        )
        self.set_timer(0.3, self.profiles.check_in_background)  # a broken profile says so without waiting

    def _load_last_retrieval(self) -> None:
        session = self.session
        if session is None:
            return
        from services.retrieval.audit import RetrievalAudit

        audit = RetrievalAudit(session.workspace.root / "audit.db", session.workspace.name)
        try:
            record = audit.last()
        except Exception:  # no retrieval table yet, or an unreadable store: /doctor reports the store
            return
        finally:
            audit.close()
        if record is not None:
            self.call_from_thread(self._show_last, session, record)

    def _show_last(self, session: Session, record: Any) -> None:
        pane = self._context_pane()
        tables = list(pane.query("#context-table")) if pane is not None else []  # mounted on first use
        rows = int(getattr(tables[0], "row_count", 0)) if tables else 0
        if pane is not None and session is self.session and rows == 0:
            pane.show_last(record, workspace=session.workspace.name)

    def reload_panes(self, *, transcript: bool = True) -> None:
        """Fill the header and every pane from the active session (``transcript=False``: all but the
        transcript, which the conversation's own entries keep current — reloading it while one is on
        its way would show that one twice)."""
        session = self.session
        if session is None:
            return
        self.sub_title = self.header_text()
        screen = self._main_screen()
        if screen is None:
            return
        if transcript:
            entries = session.conversation.read().entries
            subtitle = session.conversation.conversation_id if entries else "new conversation"
            screen.query_one(TranscriptPane).load(entries, subtitle=subtitle)
        screen.query_one(ArtifactsPane).load(session.workspace.artifacts)
        screen.query_one(ApprovalsPane).show(session.approvals.pending())
        index = session.workspace.setting("active_index")
        screen.query_one(ContextPane).border_subtitle = neutralize(
            f"index {index}" if index else "no index in use", single_line=True
        )

    def action_switch_workspace(self, create: bool = False) -> None:
        def done(result: tuple[str, str] | None) -> None:
            if result is None:
                return
            verb, name = result
            self.run_worker(self._open_and_say(name, verb == "new"), group="workspace", exit_on_error=False)

        from screens.workspace_switcher import WorkspaceSwitcher

        switcher = WorkspaceSwitcher(self.manager.list(), self.workspace_name)
        self.push_screen(switcher, done)

    async def _open_and_say(self, name: str, create: bool) -> None:
        if await self.open_workspace(name, create=create):
            self.notify(f"Workspace {name} is active.", title="Workspace", timeout=3, markup=False)

    # -- quitting --------------------------------------------------------------------------
    async def action_quit(self) -> None:
        session = self.session
        waiting = len(session.approvals) if session is not None else 0
        if not waiting:
            await self._close_session("Aries quit")
            self.exit(0)
            return
        from screens.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._quit(), group="quit", exit_on_error=False)

        detail = (
            f"{waiting} tool call(s) wait for your approval. Quitting denies them; each denial is recorded "
            "in the audit store and the transcript."
        )
        self.push_screen(ConfirmScreen(f"Quit with {waiting} call(s) waiting?", detail), answered)

    async def _quit(self) -> None:
        await self._close_session("Aries quit")
        self.exit(0)

    # -- what the session reports ----------------------------------------------------------
    @on(ConversationEntry)
    def _conversation_entry(self, message: ConversationEntry) -> None:
        session = self.session
        if session is None or message.conversation_id != session.conversation.conversation_id:
            return
        if self.assistant.streams(message.entry):
            return  # already on screen: it was streamed
        pane = self.transcript_pane()
        if pane is not None:
            pane.add_entry(message.entry)
            pane.border_subtitle = message.conversation_id

    @on(TurnEvent)
    async def _turn_event(self, message: TurnEvent) -> None:
        await self.assistant.show(message.event)

    def focus_prompt_if_queue_done(self) -> None:
        """Back to typing when nothing waits and focus sits in the (now empty) Approvals pane."""
        session, screen = self.session, self._main_screen()
        if session is None or screen is None or len(session.approvals) or self.screen is not screen:
            return
        pane = screen.query_one(ApprovalsPane)
        focused = self.focused
        if focused is None or pane in focused.ancestors_with_self:
            self.action_focus_prompt()

    @on(ApprovalsChanged)
    def _approvals_changed(self, message: ApprovalsChanged) -> None:
        session = self.session
        screen = self._main_screen()
        if session is None or screen is None:
            return
        pending = session.approvals.pending()
        screen.query_one(ApprovalsPane).show(pending)
        from screens.approval import ApprovalScreen

        modal = self.screen
        if isinstance(modal, ApprovalScreen) and modal.request.call_id not in {r.call_id for r in pending}:
            modal.dismiss(None)  # its call was decided elsewhere (cancelled, denied on a switch or mode change)
        self.call_after_refresh(self.focus_prompt_if_queue_done)

    @on(ApprovalsPane.Open)
    def _open_approval(self, message: ApprovalsPane.Open) -> None:
        session = self.session
        request = session.approvals.get(message.call_id) if session is not None else None
        if session is None or request is None:
            return

        def decided(decision: ApprovalDecision | None) -> None:
            if decision is not None:
                session.approvals.answer(request.call_id, decision)
            self.call_after_refresh(self.focus_prompt_if_queue_done)

        from screens.approval import ApprovalScreen  # on first use: it brings rich.syntax and pygments

        self.push_screen(ApprovalScreen(request, root=session.workspace.root), decided)

    def on_tool_call_block_show_audit(self, message: Any) -> None:
        """``a`` on a tool-call block: its audit row in full (naming-convention handler, so that the
        block's module stays out of start-up)."""
        session = self.session
        if session is None:
            return
        record = session.gateway().audit.get_call(str(message.call_id))
        if record is None:
            self.report_error(f"no audit row {message.call_id} in this workspace", "audit")
            return
        from screens.audit_row import AuditRowScreen

        self.push_screen(AuditRowScreen(record))

    def on_markdown_link_clicked(self, message: Any) -> None:
        """A citation link in a streamed answer (``aries-chunk:<handle>``) opens its chunk."""
        href = str(getattr(message, "href", ""))
        if href.startswith("aries-chunk:"):
            self.rag.show_chunk(href.removeprefix("aries-chunk:"))

    @on(ContextPane.ShowChunk)
    def _show_chunk(self, message: ContextPane.ShowChunk) -> None:
        self.rag.show_chunk(message.handle)

    # -- helpers the controllers call (on the App's thread) ---------------------------------------
    def say(self, text: str, title: str | None = None) -> None:
        """A notice in the transcript (recorded, role ``notice``: never sent to a model)."""
        if self.session is not None:
            self.session.conversation.notice(text, title=title)

    def report_error(self, message: str, title: str) -> None:
        self.notify(message, title=title, severity="error", timeout=8, markup=False)

    def show_hits(self, caption: str, hits: list[dict[str, Any]]) -> None:
        pane = self._context_pane()
        if pane is not None:
            pane.show_results(caption, hits, workspace=self.workspace_name)

    def index_dropped(self, name: str) -> None:
        pane = self._context_pane()
        if pane is not None:
            pane.index_dropped(name)
        self.reload_panes(transcript=False)

    def show_progress(self, event: ProgressEvent) -> None:
        pane = self._context_pane()
        if pane is not None and event.stage != "done":
            pane.show_progress(event.stage, event.done, event.total, event.path)

    def end_progress(self) -> None:
        pane = self._context_pane()
        if pane is not None:
            pane.clear_progress()

    def reload_artifacts(self, select: str | None = None) -> None:
        """Reload the Artifacts pane; ``select``: the artifact to highlight (default: the newest)."""
        screen = self._main_screen()
        if screen is not None and self.workspace is not None:
            screen.query_one(ArtifactsPane).load(self.workspace.artifacts, select=select)

    def status_start(self, key: str, label: str, *, cancellable: bool = False) -> None:
        """A line above the prompt while something runs (elapsed time ticking; the cancel key when
        ``cancellable``: Ctrl+X cancels it)."""
        screen = self._main_screen()
        if screen is not None:
            screen.run_status.start(key, label, cancellable=cancellable)

    def status_stop(self, key: str) -> None:
        screen = self._main_screen()
        if screen is not None:
            screen.run_status.stop(key)

    def _main_screen(self) -> MainScreen | None:
        main = [s for s in self.screen_stack if isinstance(s, MainScreen)]
        return main[0] if main and main[0].query(TranscriptPane) else None

    def transcript_pane(self) -> TranscriptPane | None:
        screen = self._main_screen()
        return screen.query_one(TranscriptPane) if screen is not None else None

    def _context_pane(self) -> ContextPane | None:
        screen = self._main_screen()
        return screen.query_one(ContextPane) if screen is not None else None

    # -- keys ------------------------------------------------------------------------
    def key_bindings_for_help(self) -> list[tuple[str, str, str]]:
        rows = [
            (self.get_key_display(binding), binding.description, binding.tooltip)
            for binding in self.BINDINGS
            if isinstance(binding, Binding)
        ]
        rows += [("ctrl+p", "Palette", "Command palette: workspace and help commands")]
        return rows

    def action_help(self) -> None:
        from screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.key_bindings_for_help()))

    def action_focus_pane(self, pane: str) -> None:
        if not isinstance(self.screen, MainScreen):
            return
        widget = self.screen.query_one(f"#{pane}")
        if isinstance(widget, TranscriptPane):
            widget.focus()
        elif isinstance(widget, ContextPane | ApprovalsPane | ArtifactsPane):
            widget.focus_main()

    def action_context_browse(self) -> None:
        try:
            self.context.browse()
        except AriesError as exc:
            self.report_error(exc.message, "Context")

    def action_focus_prompt(self) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.query_one("#prompt").focus()

    def action_cancel(self) -> None:
        if self.assistant.cancel():
            self.notify("Cancelling the turn…", title="assistant", timeout=3)
        else:
            self.rag.cancel_ingest()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            # only while something runs
            running = self._assistant is not None and self._assistant.running
            return running or (self._rag is not None and self._rag.ingest_cancel is not None)
        return True

    # -- the prompt ------------------------------------------------------------------
    @on(Input.Submitted, "#prompt")
    async def _prompt_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        await self._session_ready.wait()  # typed in the first instant: runs once the workspace is open
        if text.startswith("/"):
            self.run_command(text)
        else:
            self.send_message(text)

    def run_command(self, line: str) -> None:
        from app.commands import CommandError, parse

        try:
            command, args = parse(line)
        except CommandError as exc:
            self.report_error(str(exc), "Command")
            return
        handler = getattr(self, f"command_{command.handler}")
        try:
            handler(args, line)
        except AriesError as exc:
            self.report_error(exc.message, f"/{command.name}")
        except CommandError as exc:
            self.report_error(f"{exc}  Usage: {command.usage}", f"/{command.name}")

    def send_message(self, text: str) -> None:
        """A message is a turn of the headless loop (services.assistant), rendered as it streams."""
        self.assistant.ask(text)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that died of an unexpected error says so (typed errors are reported where raised)."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            self.log.error(f"worker {event.worker.name} failed", error)
            self.report_error(f"{type(error).__name__}: {error}", f"Internal error in {event.worker.group}")

    # -- slash commands (one method per row of app.commands.COMMANDS) ----------------------
    def command_help(self, args: list[str], line: str) -> None:
        self.action_help()

    def command_workspace(self, args: list[str], line: str) -> None:
        if not args or args[0] == "switch":
            self.action_switch_workspace()
            return
        action, rest = args[0], args[1:]
        if action == "list":
            names = self.manager.list()
            listing = ", ".join(f"{n} (current)" if n == self.workspace_name else n for n in names)
            self.say(f"Workspaces: {listing or 'none yet; /workspace new NAME creates one'}", "workspace")
        elif action in {"new", "open"} and len(rest) == 1:
            self.run_worker(self._open_and_say(rest[0], action == "new"), group="workspace", exit_on_error=False)
        elif action == "export" and len(rest) == 1:
            self.bundles.export(rest[0])
        elif action == "import" and len(rest) in (1, 2):
            self.bundles.import_(rest[0], rest[1] if len(rest) == 2 else None)
        else:
            from app.commands import CommandError

            raise CommandError(f"cannot read '/workspace {' '.join(args)}'.")

    def command_replay(self, args: list[str], line: str) -> None:
        self.history.replay()

    def command_runs(self, args: list[str], line: str) -> None:
        self.history.runs()

    def command_artifact(self, args: list[str], line: str) -> None:
        self.tools.artifact(args)

    def command_rag(self, args: list[str], line: str) -> None:
        self.rag.command(args)

    def command_undo(self, args: list[str], line: str) -> None:
        self.tools.undo(args)

    def command_fs(self, args: list[str], line: str) -> None:
        self.tools.fs(args)

    def command_shell(self, args: list[str], line: str) -> None:
        self.tools.shell(args)

    def command_web(self, args: list[str], line: str) -> None:
        self.tools.web(args)

    def command_desktop(self, args: list[str], line: str) -> None:
        from app.desktop_controller import DesktopController

        DesktopController(self).request(line)

    def command_tool(self, args: list[str], line: str) -> None:
        self.tools.tool(args, line)

    def command_policy(self, args: list[str], line: str) -> None:
        self.tools.policy(args)

    def command_grants(self, args: list[str], line: str) -> None:
        self.tools.grants(args)

    def command_doctor(self, args: list[str], line: str) -> None:
        self.tools.doctor()

    def command_context(self, args: list[str], line: str) -> None:
        self.context.command(args)

    def command_serve(self, args: list[str], line: str) -> None:
        self.serve.command(args)

    def command_profile(self, args: list[str], line: str) -> None:
        self.profiles.command(args)

    def command_model(self, args: list[str], line: str) -> None:
        self.assistant.model_command(args)

    def command_new(self, args: list[str], line: str) -> None:
        session = self.require_session()
        session.new_conversation()
        self._subscribe(session)
        pane = self.transcript_pane()
        if pane is not None:
            pane.load([], subtitle="new conversation")

    def command_quit(self, args: list[str], line: str) -> None:
        self.run_worker(self.action_quit(), group="quit", exit_on_error=False)
