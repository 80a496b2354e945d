"""Slash commands and the controllers behind them, one module per area.

Each row of the table in ``widgets.commands`` (the one source for ``/help``, Tab completion and the
palette) names its handler in ``HANDLERS``; a handler calls the controller of its area
(``app/commands/<area>.py``). ``Commands`` holds one App's controllers and makes each on first use,
after the first frame. A controller reaches the App only through ``app.host.Host``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

from services.errors import AriesError
from widgets.commands import CommandError, parse

if TYPE_CHECKING:
    from app.commands.approvals import ApprovalsController
    from app.commands.assistant import AssistantController
    from app.commands.bundle import BundleController
    from app.commands.context import ContextController
    from app.commands.conversation import ConversationController
    from app.commands.desktop import DesktopController
    from app.commands.history import HistoryController
    from app.commands.profile import ProfileController
    from app.commands.rag import RagController
    from app.commands.serve import ServeController
    from app.commands.tools import ToolController
    from app.commands.trust import TrustController
    from app.commands.workspace import WorkspaceController
    from app.host import AppHost
    from services.session import Session


class Commands:
    """The controllers of one App (each made on first use) and the dispatch of a typed command line."""

    def __init__(self, host: AppHost) -> None:
        self.host = host

    def run(self, line: str) -> None:
        """Run ``/name args…``: its row's handler; a typed error or a misuse is one error notification."""
        try:
            command, args = parse(line)
        except CommandError as exc:
            self.host.report_error(str(exc), "Command")
            return
        try:
            HANDLERS[command.handler](self, args, line)
        except AriesError as exc:
            self.host.report_error(exc.message, f"/{command.name}")
        except CommandError as exc:
            self.host.report_error(f"{exc}  Usage: {command.usage}", f"/{command.name}")

    # -- what the App asks without making a controller ---------------------------------------------
    def _made(self, name: str) -> bool:
        return name in self.__dict__

    def running(self) -> bool:
        """True while a turn runs or an index is being built (Ctrl+X has something to cancel)."""
        return (self._made("assistant") and self.assistant.running) or (self._made("rag") and self.rag.ingesting)

    def cancel(self) -> None:
        """Ctrl+X: the running turn, else the index build (after the current file)."""
        if self._made("assistant") and self.assistant.cancel():
            self.host.notify("Cancelling the turn…", title="assistant", timeout=3)
        else:
            self.rag.cancel_ingest()

    def model_label(self) -> str:
        """The model in use, for the header."""
        try:
            return self.assistant.model_setting()
        except AriesError:
            return "not configured (see /model)"

    def serving(self) -> str:
        """Where the web viewer serves, for the header ('' when it does not run)."""
        return self.serve.header_part() if self._made("serve") else ""

    async def session_closing(self, session: Session | None, reason: str) -> None:
        """Before a session closes: its turn is cancelled (it must not stream into the next
        workspace), the web viewer (it served that workspace only) stops, and an index build is told
        to stop after its current file."""
        if self._made("assistant"):
            self.assistant.cancel()
        if self._made("serve"):
            if session is not None and self.serve.running:
                session.conversation.notice(f"Web viewer stopped: {reason}.", title="serve")
            await self.serve.shutdown()
        if session is not None and self._made("rag"):
            self.rag.stop_ingest()

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
    def history(self) -> HistoryController:
        from app.commands.history import HistoryController

        return HistoryController(self.host)

    @cached_property
    def profiles(self) -> ProfileController:
        from app.commands.profile import ProfileController

        return ProfileController(self.host)

    @cached_property
    def rag(self) -> RagController:
        from app.commands.rag import RagController

        return RagController(self.host)

    @cached_property
    def serve(self) -> ServeController:
        from app.commands.serve import ServeController

        return ServeController(self.host)

    @cached_property
    def tools(self) -> ToolController:
        from app.commands.tools import ToolController

        return ToolController(self.host)

    @cached_property
    def trust(self) -> TrustController:
        from app.commands.trust import TrustController

        return TrustController(self.host)

    @cached_property
    def workspace(self) -> WorkspaceController:
        from app.commands.workspace import WorkspaceController

        return WorkspaceController(self.host, self.bundles)


Handler = Callable[[Commands, list[str], str], None]
"""``handler(commands, args, line)``: ``args`` split shell-style, ``line`` as typed."""

HANDLERS: dict[str, Handler] = {
    "help": lambda c, args, line: c.host.action_help(),
    "workspace": lambda c, args, line: c.workspace.command(args),
    "artifact": lambda c, args, line: c.tools.artifact(args),
    "rag": lambda c, args, line: c.rag.command(args),
    "fs": lambda c, args, line: c.tools.fs(args),
    "shell": lambda c, args, line: c.tools.shell(args),
    "web": lambda c, args, line: c.tools.web(args),
    "desktop": lambda c, args, line: c.desktop.request(line),
    "tool": lambda c, args, line: c.tools.tool(args, line),
    "undo": lambda c, args, line: c.tools.undo(args),
    "policy": lambda c, args, line: c.tools.policy(args),
    "grants": lambda c, args, line: c.tools.grants(args),
    "doctor": lambda c, args, line: c.tools.doctor(),
    "model": lambda c, args, line: c.assistant.model_command(args),
    "profile": lambda c, args, line: c.profiles.command(args),
    "context": lambda c, args, line: c.context.command(args),
    "serve": lambda c, args, line: c.serve.command(args),
    "trust": lambda c, args, line: c.trust.review(),
    "new": lambda c, args, line: c.host.start_conversation(),
    "history": lambda c, args, line: c.conversations.history(),
    "resume": lambda c, args, line: c.conversations.resume(args),
    "fork": lambda c, args, line: c.conversations.fork(args),
    "copy": lambda c, args, line: c.conversations.copy(args),
    "replay": lambda c, args, line: c.history.replay(),
    "runs": lambda c, args, line: c.history.runs(),
    "quit": lambda c, args, line: c.workspace.quit_later(),
}
