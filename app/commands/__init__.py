"""Slash commands and the controllers behind them, one module per area.

Each spec of the table in ``widgets.commands`` (the one grammar: usage, ``/help``, Tab completion,
the palette and the typed object) names its handler in ``HANDLERS``; a handler hands the parsed,
typed object to the controller of its area (``app/commands/<area>.py``). ``Commands`` holds one
App's controllers (each made on first use, after the first frame) and its command registry: the
built-ins, and what registers at run time (``register(spec, handler)``: a built-in's name is never
taken). A controller reaches the App only through ``app.host.Host``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from services.errors import AriesError

if TYPE_CHECKING:
    from app.commands.approvals import ApprovalsController
    from app.commands.assistant import AssistantController
    from app.commands.bundle import BundleController
    from app.commands.compact import CompactController
    from app.commands.context import ContextController
    from app.commands.conversation import ConversationController
    from app.commands.desktop import DesktopController
    from app.commands.export import ExportController
    from app.commands.history import HistoryController
    from app.commands.history_index import HistoryIndexer
    from app.commands.profile import ProfileController
    from app.commands.project import ProjectController
    from app.commands.rag import RagController
    from app.commands.serve import ServeController
    from app.commands.terminal import TerminalController
    from app.commands.timeline import TimelineController
    from app.commands.tools import ToolController
    from app.commands.trust import TrustController
    from app.commands.typeahead import TypeAhead
    from app.commands.workspace import WorkspaceController
    from app.host import AppHost
    from services.session.inforce import InForce
    from services.session.session import Session
    from widgets.command_spec import CommandRegistry, CommandSpec


class Commands:
    """The controllers of one App (each made on first use) and the dispatch of a typed command line."""

    def __init__(self, host: AppHost) -> None:
        self.host = host
        self._commands_of: InForce | None = None  # what is in force the workspace commands were read from

    @cached_property
    def _builtins(self) -> CommandRegistry[Handler]:
        from widgets.command_spec import CommandRegistry
        from widgets.commands import COMMANDS

        registry: CommandRegistry[Handler] = CommandRegistry()
        for spec in COMMANDS:
            registry.register(spec, HANDLERS[spec.handler], builtin=True)
        return registry

    @property
    def registry(self) -> CommandRegistry[Handler]:
        """The built-in commands, then those registered at run time: made on first use (a line run, a
        Tab, the palette, F1), so that the first frame does not pay for building the grammar. The
        workspace's commands follow what is in force (``InForce.commands``: none while the workspace's
        settings are not), registered again whenever that value is replaced."""
        registry = self._builtins
        session = self.host.session
        in_force = session.in_force if session is not None else None
        if in_force is not self._commands_of:
            self._commands_of = in_force
            from app.commands.project import register_workspace_commands

            register_workspace_commands(registry, in_force)
        return registry

    def register(self, spec: CommandSpec, handler: Handler) -> bool:
        """Add a command at run time (workspace commands); False when a built-in holds its name."""
        return self.registry.register(spec, handler)

    def run(self, line: str) -> None:
        """Run ``/name args…``: its handler with the typed object; a typed error or a misuse is one
        error notification (a misuse with the command's usage)."""
        from widgets.commands import CommandError

        try:
            spec, handler, parsed = self.registry.parse(line)
        except CommandError as exc:
            name = line.strip()[1:].split(" ", 1)[0].lower()
            entry = self.registry.entries.get(name)
            if entry is None:
                self.host.report_error(str(exc), "Command")
            else:
                self.host.report_error(f"{exc}  Usage: {entry[0].usage}", f"/{name}")
            return
        except AriesError as exc:  # a tool-backed spec whose argument model cannot be read
            self.host.report_error(exc.message, "Command")
            return
        try:
            handler(self, parsed)
        except AriesError as exc:
            self.host.report_error(exc.message, f"/{spec.name}")
        except CommandError as exc:
            self.host.report_error(f"{exc}  Usage: {spec.usage}", f"/{spec.name}")

    def complete_values(self, kind: str, partial: str) -> list[str]:
        """Tab on a positional of completion ``kind``: workspace, profile and conversation names, paths
        under the policy's roots; nothing for the kinds that would need a store opened (indexes,
        handles…)."""
        if kind == "workspace":
            return self.host.manager.list()
        session = self.host.session
        if session is None:
            return []
        if kind == "profile":
            return [entry.name for entry in self.profiles.entries()]
        if kind == "command":  # a workspace command's name (``/instructions edit NAME``)
            return [command.name for command in session.in_force.commands]
        if kind == "conversation":  # a stored conversation's id: its transcript's name
            from services.workspace.transcripts import SUFFIX

            return [path.name.removesuffix(SUFFIX) for path in session.workspace.conversations()]
        if kind == "path":
            from services.assistant.attachments import complete_mention

            try:
                roots = list(session.gateway().bound.roots)
            except AriesError:  # a policy that does not load: nothing to complete (a call says why)
                return []
            return complete_mention(roots, partial)
        return []

    # -- what the App asks without making a controller ---------------------------------------------
    def _made(self, name: str) -> bool:
        return name in self.__dict__

    def running(self) -> bool:
        """True while a turn runs or an index is being built (Ctrl+X has something to cancel)."""
        return (
            (self._made("assistant") and self.assistant.running)
            or (self._made("tools") and self.tools.running)
            or (self._made("rag") and self.rag.ingesting)
        )

    def queued(self) -> bool:
        """True while lines typed ahead wait, or one is back in the prompt (Esc has something to do)."""
        return self._made("typeahead") and (len(self.typeahead) > 0 or self.typeahead.editing is not None)

    def submit(self, text: str) -> None:
        """A line from the prompt: sent now, or queued while a turn runs (``app.commands.typeahead``)."""
        self.typeahead.submit(text)

    def send(self, text: str) -> None:
        """A line sent: a slash command runs, a message starts a turn."""
        if text.startswith("/"):
            self.run(text)
        else:
            self.assistant.ask(text)

    def turn_ended(self) -> None:
        """A turn's worker is over (answered, failed, cancelled): what was typed ahead goes next."""
        if self._made("typeahead"):
            self.typeahead.drain()

    def cancel(self) -> None:
        """Ctrl+X: the running turn (only: what was typed ahead stays queued), else the index build
        (after the current file)."""
        if self._made("assistant") and self.assistant.cancel():
            queued = self.typeahead.remaining() if self._made("typeahead") else ""
            self.host.notify(f"Cancelling the turn…{queued}", title="assistant", timeout=6 if queued else 3)
        elif self._made("tools") and (count := self.tools.cancel()):
            self.host.notify(f"Cancelled {count} call(s) of yours; each is recorded as cancelled.", title="tools")
        else:
            self.rag.cancel_ingest()

    def model_label(self) -> str:
        """The model in use, for the header."""
        try:
            return self.assistant.model_setting()
        except AriesError:
            return "not configured (see /model)"

    def serving(self) -> str:
        """Where the web viewer serves and which indexes are watched, for the header ('' when neither)."""
        watched = self.rag.header_part() if self._made("rag") else ""
        return " · ".join(part for part in (self.serve.header_part() if self._made("serve") else "", watched) if part)

    async def session_closing(self, session: Session | None, reason: str) -> None:
        """Before a session closes: its turn is cancelled (it must not stream into the next
        workspace), the web viewer (it served that workspace only) stops, and an index build and the
        conversation search index's background build are told to stop after their current file."""
        if self._made("typeahead"):
            self.typeahead.clear()  # typed for that session's conversation
        if self._made("assistant"):
            self.assistant.cancel()
        if self._made("serve"):
            if session is not None and self.serve.running:
                session.conversation.notice(f"Web viewer stopped: {reason}.", title="serve")
            await self.serve.shutdown()
        if session is not None and self._made("rag"):
            self.rag.stop_ingest()
        if self._made("history_index"):
            self.history_index.stop()

    # -- the controllers -----------------------------------------------------------------------------
    @cached_property
    def approvals(self) -> ApprovalsController:
        from app.commands.approvals import ApprovalsController

        return ApprovalsController(self.host)

    @cached_property
    def assistant(self) -> AssistantController:
        from app.commands.assistant import AssistantController

        return AssistantController(self.host, self.approvals)

    @cached_property
    def bundles(self) -> BundleController:
        from app.commands.bundle import BundleController

        return BundleController(self.host)

    @cached_property
    def context(self) -> ContextController:
        from app.commands.context import ContextController

        return ContextController(self.host)

    @cached_property
    def conversations(self) -> ConversationController:
        from app.commands.conversation import ConversationController

        return ConversationController(self.host, lambda: self._made("assistant") and self.assistant.running)

    @cached_property
    def desktop(self) -> DesktopController:
        from app.commands.desktop import DesktopController

        return DesktopController(self.host, self.assistant)

    @cached_property
    def exports(self) -> ExportController:
        from app.commands.export import ExportController

        return ExportController(self.host)

    @cached_property
    def history(self) -> HistoryController:
        from app.commands.history import HistoryController

        return HistoryController(self.host)

    @cached_property
    def history_index(self) -> HistoryIndexer:
        from app.commands.history_index import HistoryIndexer

        return HistoryIndexer(self.host)

    @cached_property
    def profiles(self) -> ProfileController:
        from app.commands.profile import ProfileController

        return ProfileController(self.host)

    @cached_property
    def project(self) -> ProjectController:
        from app.commands.project import ProjectController

        return ProjectController(self.host, self.assistant)

    @cached_property
    def rag(self) -> RagController:
        from app.commands.rag import RagController

        return RagController(self.host)

    @cached_property
    def serve(self) -> ServeController:
        from app.commands.serve import ServeController

        return ServeController(self.host)

    @cached_property
    def terminal(self) -> TerminalController:
        from app.commands.terminal import TerminalController

        return TerminalController(self.host)

    @cached_property
    def timeline(self) -> TimelineController:
        from app.commands.timeline import TimelineController

        return TimelineController(self.host, lambda: self._made("assistant") and self.assistant.running)

    @cached_property
    def tools(self) -> ToolController:
        from app.commands.tools import ToolController

        return ToolController(self.host)

    @cached_property
    def trust(self) -> TrustController:
        from app.commands.trust import TrustController

        return TrustController(self.host)

    @cached_property
    def typeahead(self) -> TypeAhead:
        from app.commands.typeahead import TypeAhead

        return TypeAhead(self.host, send=self.send, busy=lambda: self._made("assistant") and self.assistant.running)

    @cached_property
    def compact(self) -> CompactController:
        from app.commands.compact import CompactController

        return CompactController(self.host, lambda: self._made("assistant") and self.assistant.running)

    @cached_property
    def workspace(self) -> WorkspaceController:
        from app.commands.workspace import WorkspaceController

        return WorkspaceController(self.host, self.bundles, lambda: self._made("assistant") and self.assistant.running)


Handler = Callable[[Commands, Any], None]
"""``handler(commands, parsed)``: ``parsed`` is the typed object of the form the line called
(``widgets.commands``: a dataclass, or a ``ToolCall`` for a tool-backed form)."""

HANDLERS: dict[str, Handler] = {
    "help": lambda c, parsed: c.host.action_help(),
    "workspace": lambda c, parsed: c.workspace.command(parsed),
    "artifact": lambda c, parsed: c.tools.artifact(parsed),
    "rag": lambda c, parsed: c.rag.command(parsed),
    "fs": lambda c, parsed: c.tools.call_parsed(parsed),
    "shell": lambda c, parsed: c.tools.call_parsed(parsed),
    "web": lambda c, parsed: c.tools.call_parsed(parsed),
    "desktop": lambda c, parsed: c.desktop.request(parsed.request),
    "tool": lambda c, parsed: c.tools.call_parsed(parsed),
    "undo": lambda c, parsed: c.tools.undo(parsed.call_id),
    "policy": lambda c, parsed: c.tools.policy(parsed),
    "grants": lambda c, parsed: c.tools.grants(parsed),
    "doctor": lambda c, parsed: c.tools.doctor(),
    "model": lambda c, parsed: c.assistant.model_command(parsed),
    "profile": lambda c, parsed: c.profiles.command(parsed),
    "context": lambda c, parsed: c.context.command(parsed),
    "serve": lambda c, parsed: c.serve.command(parsed.action),
    "trust": lambda c, parsed: c.trust.review(),
    "new": lambda c, parsed: c.host.start_conversation(),
    "history": lambda c, parsed: (
        c.exports.export(parsed.fmt) if hasattr(parsed, "fmt") else c.conversations.command(parsed)  # /history export
    ),
    "resume": lambda c, parsed: c.conversations.resume(parsed.name),
    "fork": lambda c, parsed: c.conversations.fork(parsed.turns),
    "pin": lambda c, parsed: c.timeline.pin(parsed.ref),
    "unpin": lambda c, parsed: c.timeline.unpin(parsed.ref),
    "checkpoint": lambda c, parsed: c.timeline.checkpoint(parsed.ref),
    "checkpoints": lambda c, parsed: c.timeline.checkpoints(),
    "rewind": lambda c, parsed: c.timeline.rewind(parsed.ref),
    "copy": lambda c, parsed: c.conversations.copy(),
    "usage": lambda c, parsed: c.assistant.usage(),
    "instructions": lambda c, parsed: c.project.instructions(parsed),
    "tools": lambda c, parsed: c.assistant.tools_offered(),
    "compact": lambda c, parsed: c.compact.command(parsed),
    "replay": lambda c, parsed: c.history.replay(),
    "runs": lambda c, parsed: c.history.runs(),
    "quit": lambda c, parsed: c.workspace.quit_later(),
    "theme": lambda c, parsed: c.terminal.theme(parsed.name),
    "notify": lambda c, parsed: c.terminal.notify(parsed.what, parsed.state),
}
