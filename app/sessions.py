"""The App's active session: opening a workspace (its lease first), hearing what the session reports,
and closing it in order (waiting approvals denied, running calls cancelled, each recorded).

What a session reports reaches the panes through the session's signals (``widgets.signals``): the
App's ``SessionHub`` makes a fresh ``SessionSignals`` when a session becomes active and drops it when
the session closes; the conversation and the approval queue report to it from whichever thread they
run on (``SessionSignals.post`` is thread-safe and hops to the UI thread).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from services.errors import AriesError
from widgets.messages import ApprovalsChanged, ConversationEntry, ConversationStarted

if TYPE_CHECKING:
    from app.commands import Commands
    from app.host import Host
    from services.session.session import Session
    from services.workspace.leases import WorkspaceLease
    from services.workspace.manager import Workspace
    from widgets.signals import SessionHub


class ActiveSession:
    def __init__(self, host: Host, commands: Commands, hub: SessionHub, *, conversation: str = "last") -> None:
        self.host = host
        self.commands = commands
        self.hub = hub  # the App's: each active session's signals
        # The first workspace's conversation: ``last`` (reopen), ``new``, or an id (``aries --continue``,
        # ``--conversation ID``). A workspace opened later (Ctrl+O) reopens its last conversation.
        self._initial_conversation: str | None = conversation
        self.session: Session | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self.ready = asyncio.Event()  # set once the first workspace is open (whatever needs it awaits it)

    async def open_initial(self, name: str | None, *, create: bool) -> None:
        """The workspace Aries was started on, else (or when it cannot be opened) an ephemeral one."""
        try:
            if name:
                await self.open(name, create=create)
            if self.session is None:
                from services.session.opening import Surface, take

                ephemeral = take(None, surface=Surface.TUI)  # a throw-away workspace, leased like any other
                await self.activate(ephemeral.workspace, ephemeral.warnings, ephemeral.lease)
        finally:
            self.ready.set()

    async def open(self, name: str, *, create: bool = False) -> bool:
        """Open (or create) ``name`` and make it active; a workspace that cannot be opened (another
        live Aries holds it, a broken ``workspace.yaml``) is one error notification."""
        session = self.session
        if session is not None and session.workspace.name == name and not session.workspace.ephemeral:
            return True
        from services.session.opening import Surface, take  # not app.commands.workspace: its grammar stays unloaded

        try:
            taken = take(name, surface=Surface.TUI, create=create, manager=self.host.manager)
        except AriesError as exc:
            self.host.report_error(exc.message, "Workspace")
            return False
        await self.activate(taken.workspace, taken.warnings, taken.lease)
        return True

    async def activate(self, workspace: Workspace, warnings: list[str], lease: WorkspaceLease | None = None) -> None:
        from services.session.opening import Surface
        from services.session.session import Session

        if self.session is not None:
            await self.close("the workspace was switched")
        choice, self._initial_conversation = self._initial_conversation, None
        try:
            session = Session.open(workspace, surface=Surface.TUI, lease=lease, conversation=choice or "last")
        except AriesError as exc:  # an unknown --conversation, or one held elsewhere: say so, open another
            from services.conversation.hold import ConversationBusy

            self.host.report_error(exc.message, "conversation")
            held = isinstance(exc, ConversationBusy)
            try:
                session = Session.open(
                    workspace, surface=Surface.TUI, lease=lease, conversation="new" if held else "last"
                )
            except ConversationBusy:  # the last one is being written by `ask -c`: start a new one
                session = Session.open(workspace, surface=Surface.TUI, lease=lease, conversation="new")
        self.session = session
        self.hub.open(session)  # the panes follow it from now
        self.subscribe(session)
        for warning in warnings[:5]:
            self.host.notify(warning, title=f"Workspace {workspace.name}", severity="warning", timeout=8)
        if session.trust.needs_review:
            self.commands.trust.offer()
        else:
            self.start_mcp_servers(session)

    def start_mcp_servers(self, session: Session) -> None:
        """The policy's MCP servers start once per session, in the background, once the workspace is
        ready — never for an untrusted or changed workspace (its policy is not in force) — with a status
        row; one that fails is said once and its tools are left out. A model turn never waits for them."""
        if session.in_force.policy_path is None:  # the shipped default policy starts no server
            return
        from app.host import run_task

        def start() -> dict[str, str]:
            gateway = session.gateway()
            return gateway.registry.load_all(retry=False) if gateway.mcp is not None else {}

        def said(failed: dict[str, str]) -> None:
            for group, why in sorted(failed.items()):
                self.host.notify(
                    f"{group} did not start ({why}); its tools are left out. /doctor tries again.",
                    title="MCP servers",
                    severity="warning",
                    timeout=10,
                    markup=False,
                )

        run_task(self.host, "MCP servers", start, said, group="mcp", status="MCP servers: starting…", key="mcp")

    def subscribe(self, session: Session) -> None:
        """What the session reports goes to its signals, from whichever thread reports it."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        conversation, signals = session.conversation, self.hub.current
        if signals is None:
            return
        self._unsubscribe = [
            conversation.subscribe(lambda e, ev: signals.post(ConversationEntry(e, conversation.conversation_id, ev))),
            session.approvals.subscribe(lambda: signals.post(ApprovalsChanged(session))),
        ]

    def new_conversation(self, reference: str | None = None) -> None:
        """``/new``: the session starts a new conversation; ``/resume REF``: it continues a stored one
        (``last``, an id or a unique start of one). The transcript follows it."""
        session = self.host.require_session()
        if reference is None:
            session.new_conversation()
            self.host.publish(ConversationStarted())
        else:
            conversation = session.open_conversation(reference)
            self.host.publish(ConversationStarted(conversation.conversation_id, conversation.read().entries))
        self.subscribe(session)

    async def close(self, reason: str) -> None:
        session, self.session = self.session, None
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        self.hub.close()  # its panes hear nothing more of it
        await self.commands.session_closing(session, reason)  # the web viewer stops, an ingest is told to
        if session is not None:
            try:
                await session.aclose(reason)  # releases the lease last
            finally:
                session.workspace.close()
