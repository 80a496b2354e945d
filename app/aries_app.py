"""The Aries App: owns the state (active workspace, transcript) and wires screens to services."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.app import App
from textual.binding import Binding, BindingType
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from app.commands import CommandError, parse
from app.messages import WorkspaceChanged
from app.palette import WorkspaceCommands
from app.retrieval import MESSAGE_K, RetrievalMixin
from app.tooling import ToolingMixin
from screens.main import MainScreen
from services.errors import AriesError
from services.transcripts import Transcript, read_new_entries
from services.workspaces import (
    Workspace,
    WorkspaceManager,
    ephemeral_workspace,
    mark_closed,
    mark_open,
)
from widgets.approvals.pane import ApprovalsPane
from widgets.artifacts.pane import ArtifactsPane
from widgets.context.pane import ContextPane
from widgets.transcript.pane import TranscriptPane


class AriesApp(RetrievalMixin, ToolingMixin, App[int]):
    TITLE = "Aries"
    # The main screen is the default screen, whose CSS_PATH Textual does not load by itself.
    CSS_PATH = ["aries.tcss", "../screens/main.tcss"]
    COMMANDS = App.COMMANDS | {WorkspaceCommands}
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
            "ctrl+x",
            "cancel_ingest",
            "Cancel indexing",
            priority=True,  # over the prompt's own Ctrl+X (cut), but only while indexing (check_action)
            id="rag.cancel",
            tooltip="Stop building the index after the current file (files done so far stay)",
        ),
        Binding("escape", "focus_prompt", "Prompt", show=False, id="focus.prompt", tooltip="Back to the prompt"),
    ]

    def __init__(
        self,
        workspace: str | None = None,
        *,
        create: bool = True,
        manager: WorkspaceManager | None = None,
    ) -> None:
        super().__init__()
        self.manager = manager or WorkspaceManager()
        self._initial = workspace
        self._create = create
        self.workspace: Workspace | None = None
        self.transcript: Transcript | None = None
        self._shown_ids: set[str] = set()
        self._transcript_offset = 0  # bytes of the transcript file already shown
        self._init_tooling()
        self._init_retrieval()

    # -- lifecycle -------------------------------------------------------------------
    def get_default_screen(self) -> MainScreen:
        return MainScreen()

    def on_mount(self) -> None:
        if self._initial:
            self.open_workspace(self._initial, create=self._create)
        if self.workspace is None:
            self._activate(ephemeral_workspace(), [])

    def on_unmount(self) -> None:
        self._close_current()

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
    def workspace_name(self) -> str:
        return self.workspace.name if self.workspace else ""

    # -- workspaces --------------------------------------------------------------------
    def open_workspace(self, name: str, *, create: bool = False) -> bool:
        """Open (or create) ``name`` and make it active. Errors become notifications."""
        try:
            if create:
                workspace, report = self.manager.create(name)
            else:
                workspace, report = self.manager.open(name)
            stale = mark_open(workspace)
        except AriesError as exc:
            self.notify(exc.message, title="Workspace", severity="error")
            return False
        warnings = [str(problem) for problem in report.transcript_problems] + report.artifact_problems
        if stale:
            warnings.insert(0, f"recovered after an unclean exit (pid {stale.get('pid')})")
        self._activate(workspace, warnings)
        return True

    def _close_current(self) -> None:
        self.close_gateway()
        self.close_engine()
        if self.workspace is not None:
            mark_closed(self.workspace)
            self.workspace.close()
            self.workspace = None

    def _activate(self, workspace: Workspace, warnings: list[str]) -> None:
        if self.workspace is not None and self.workspace.root != workspace.root:
            self._close_current()
        self.workspace = workspace
        self.transcript = workspace.latest_transcript()
        self._transcript_offset = self._transcript_size()
        for warning in warnings[:5]:
            self.notify(warning, title=f"Workspace {workspace.name}", severity="warning", timeout=8)
        self.post_message(WorkspaceChanged(workspace.name))

    @on(WorkspaceChanged)
    @on(MainScreen.Ready)
    def reload_panes(self) -> None:
        """Fill the header and every pane from the active workspace."""
        workspace = self.workspace
        if workspace is None:
            return
        self.sub_title = (
            f"workspace {workspace.name} · profile {workspace.profile} · "
            f"model {workspace.setting('model')} · approvals {workspace.setting('approval_mode')}"
        )
        mains = [s for s in self.screen_stack if isinstance(s, MainScreen)]  # also under a modal
        screen = mains[0] if mains else None
        if screen is None or not screen.query(TranscriptPane):
            return
        entries = self.transcript.read().entries if self.transcript else []
        self._transcript_offset = self._transcript_size()
        conversation = self.transcript.conversation_id if self.transcript and entries else "new conversation"
        self._shown_ids = {str(e["message_id"]) for e in entries}
        screen.query_one(TranscriptPane).load(entries, subtitle=conversation)
        screen.query_one(ArtifactsPane).load(workspace.artifacts)
        screen.query_one(ApprovalsPane).show(self.pending_requests())
        index = workspace.setting("active_index")
        screen.query_one(ContextPane).border_subtitle = f"index {index}" if index else "no index in use"

    def action_switch_workspace(self, create: bool = False) -> None:
        def done(result: tuple[str, str] | None) -> None:
            if result is None:
                return
            verb, name = result
            if self.open_workspace(name, create=(verb == "new")):
                self.notify(f"Workspace {name} is active.", title="Workspace", timeout=3)

        from screens.workspace_switcher import WorkspaceSwitcher

        switcher = WorkspaceSwitcher(self.manager.list(), self.workspace_name)
        self.push_screen(switcher, done)

    # -- keys ------------------------------------------------------------------------
    def key_bindings_for_help(self) -> list[tuple[str, str, str]]:
        rows = [
            (self.get_key_display(binding), binding.description, binding.tooltip)
            for binding in self.BINDINGS
            if isinstance(binding, Binding)
        ]
        rows += [("ctrl+p", "Palette", "Command palette: workspace and help commands"), ("ctrl+q", "Quit", "Leave")]
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

    def action_focus_prompt(self) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.query_one("#prompt").focus()

    # -- the prompt ------------------------------------------------------------------
    @on(Input.Submitted, "#prompt")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        if text.startswith("/"):
            self.run_command(text)
        else:
            self.send_message(text)

    def run_command(self, line: str) -> None:
        try:
            command, args = parse(line)
        except CommandError as exc:
            self.notify(str(exc), title="Command", severity="error")
            return
        handler = getattr(self, f"command_{command.handler}")
        try:
            handler(args, line)
        except AriesError as exc:
            self.notify(exc.message, title=f"/{command.name}", severity="error")
        except CommandError as exc:
            self.notify(f"{exc}  Usage: {command.usage}", title=f"/{command.name}", severity="error")

    def append_entry(self, role: str, content: str, **extra: Any) -> None:
        if self.transcript is None:
            return
        entry = self.transcript.append(role, content, **extra)
        pane = self._transcript_pane()
        if pane is not None:
            self._shown_ids.add(str(entry["message_id"]))
            pane.add_entry(entry)
            pane.border_subtitle = self.transcript.conversation_id

    def _transcript_pane(self) -> TranscriptPane | None:
        main = [s for s in self.screen_stack if isinstance(s, MainScreen)]
        panes = main[0].query(TranscriptPane) if main else None
        return panes.first() if panes else None

    def _transcript_size(self) -> int:
        try:
            return self.transcript.path.stat().st_size if self.transcript else 0
        except FileNotFoundError:
            return 0

    def sync_transcript(self) -> None:
        """Show the transcript entries written since the pane was last updated (by us or a service)."""
        if self.transcript is None:
            return
        pane = self._transcript_pane()
        if pane is None:
            return
        new, self._transcript_offset = read_new_entries(self.transcript.path, self._transcript_offset)
        for entry in new:
            message_id = str(entry["message_id"])
            if message_id not in self._shown_ids:
                self._shown_ids.add(message_id)
                pane.add_entry(entry)
        pane.border_subtitle = self.transcript.conversation_id

    def reload_artifacts(self) -> None:
        main = [s for s in self.screen_stack if isinstance(s, MainScreen)]
        if main and self.workspace is not None:
            main[0].query_one(ArtifactsPane).load(self.workspace.artifacts)

    def send_message(self, text: str) -> None:
        """Record the message, retrieve from the active index, and answer (offline provider for now)."""
        self.append_entry("user", text)
        self._rag_query(text, MESSAGE_K, text)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that died of an unexpected error says so (typed errors are reported where raised)."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            self.log.error(f"worker {event.worker.name} failed", error)
            self.notify(
                f"{type(error).__name__}: {error}", title=f"Internal error in {event.worker.name}", severity="error"
            )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_ingest":
            return self._ingest_cancel is not None  # only while an index is being built
        return True

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
            self.append_entry("system", f"Workspaces: {listing or 'none yet; /workspace new NAME creates one'}")
        elif action in {"new", "open"} and len(rest) == 1:
            if self.open_workspace(rest[0], create=(action == "new")):
                self.notify(f"Workspace {rest[0]} is active.", title="Workspace", timeout=3)
        else:
            raise CommandError(f"cannot read '/workspace {' '.join(args)}'.")

    def command_artifact(self, args: list[str], line: str) -> None:
        if self.workspace is None:
            return
        if args[:1] == ["list"] or not args:
            artifacts = self.workspace.artifacts.list()
            lines = [f"{a.id}  {a.name}  {a.size_bytes} bytes  {a.mime_type}" for a in artifacts]
            self.append_entry("system", "Artifacts:\n" + "\n".join(lines) if lines else "No artifacts yet.")
            return
        if args[0] != "add" or len(args) < 2:
            raise CommandError("cannot read the artifact command.")
        path = Path(args[1]).expanduser()
        description = " ".join(args[2:]) or None
        artifact, created = self.workspace.artifacts.add_file(
            path, description=description, provenance={"kind": "tui", "command": f"/artifact add {args[1]}"}
        )
        state = "added" if created else "already there (identical content)"
        self.append_entry("system", f"Artifact {artifact.id} {artifact.name} ({artifact.size_bytes} bytes): {state}.")
        self.reload_artifacts()

    def command_new(self, args: list[str], line: str) -> None:
        if self.workspace is None:
            return
        self.transcript = self.workspace.new_transcript()
        self._shown_ids = set()
        self._transcript_offset = 0
        if isinstance(self.screen, MainScreen):
            self.screen.query_one(TranscriptPane).load([], subtitle="new conversation")

    def command_quit(self, args: list[str], line: str) -> None:
        self.exit(0)
