"""One open workspace, as every surface uses it: the TUI, each CLI command, ``ask`` and plan runs.

``Session(workspace)`` resolves what is in force — the policy (an explicit file, else the
workspace's ``policy.yaml``, else the shipped safe default), the approval mode (an explicit
override, else the workspace setting, else the policy's own) — and builds, on first use, the tool
gateway (with its audit store and process manager) and the retrieval engine. It owns the
conversation writer and the approval queue. So the same call gets the same decision wherever it
is made.

Closing (``aclose``) happens in order and loses no record: waiting approvals are denied, calls
still running are cancelled, each of those is recorded by the gateway (audit result + transcript
event), and only then are the gateway (processes, audit store) and the engine closed.

Changing the approval mode, reloading the policy or switching the profile rebinds the gateway in
place: background processes and session grants carry over; calls waiting for approval are denied
(and recorded) because they were asked under the old rules.

The active profile (``services.profiles``) is ``Session(..., profile=NAME)`` for this session only
(``aries ask --profile``), else the workspace's ``profile`` setting. It binds the tools that may run
(enforced by the gateway: rule ``profile.<name>``), the policy file and approval mode, and what the
turn loop sends (system prompt, retrieval, model options, output schema). A profile that cannot be
loaded is reported once (an error notice) and, failing closed, no tool may run until it is fixed or
another is chosen.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from services.approval_mode import ApprovalMode, parse_mode
from services.conversation import Conversation, Notice
from services.session.approvals import ApprovalQueue
from services.session.inforce import SHIPPED_POLICY, WORKSPACE_POLICY, InForce, Operator, resolve

if TYPE_CHECKING:
    from services.context.tools import ContextToolBackend
    from services.conversation.hold import ConversationHold
    from services.policy import Policy
    from services.profiles import ActiveProfile
    from services.retrieval import RetrievalEngine
    from services.session.opening import OpenOptions, Surface
    from services.tools.calls import Approver
    from services.tools.gateway import ToolGateway
    from services.tools.results import ToolResult
    from services.trust.records import TrustState
    from services.workspace.leases import WorkspaceLease
    from services.workspace.manager import Workspace


class Session:
    def __init__(
        self,
        workspace: Workspace,
        *,
        source: str = "operator",
        policy_file: Path | str | None = None,
        mode: str | None = None,
        approver: Approver | None = None,
        interactive: bool = True,
        lease: WorkspaceLease | None = None,
        profile: str | None = None,
        conversation: str | None = "last",
        holds: bool = False,
    ) -> None:
        self.workspace = workspace
        self.source = source
        self.operator = Operator.for_session(mode=mode, policy_file=policy_file, profile=profile)
        self._in_force: InForce | None = None  # resolved on first use (keeps start-up cheap)
        self._noticed: tuple[str, str] | None = None  # the broken profile reported (name, error)
        self.approvals = ApprovalQueue()
        # Who decides a call the policy wants confirmed: the queue (an operator answers) unless the
        # caller gives another approver (the CLI's --approve, a headless allow-list, deny). A
        # non-interactive session without one has no approver: such calls are denied
        # (rule approval.no_approver).
        self.approver: Approver | None = approver
        if approver is None and interactive:
            self.approver = self.approvals.ask
        # ``holds``: this session is the one writer of the conversation it has (the TUI): it holds it
        # (``services.conversation.hold``) and a second writer is refused with this process's pid.
        self._holds = holds
        self.hold: ConversationHold | None = None
        # ``last``: the conversation written to most recently; None: a new one (its file appears with
        # its first entry); else an id (or a unique start of one) to continue.
        if conversation is None:
            self.conversation = self._held(Conversation(workspace.new_transcript()))
        elif conversation == "last":
            self.conversation = self._held(Conversation(workspace.latest_transcript()))
        else:
            from services.conversation.history import resolve as resolve_conversation

            transcript = workspace.transcript(resolve_conversation(workspace, conversation))
            self.conversation = self._held(Conversation(transcript))
        self._gateway: ToolGateway | None = None
        self._context_backend: ContextToolBackend | None = None
        self._engine: RetrievalEngine | None = None
        self._engine_lock = threading.Lock()
        self._inflight: set[asyncio.Task[Any]] = set()
        self._closed = False
        # The interactive session's hold on the workspace (released last, after the stores closed).
        self.lease = lease
        if profile is not None:
            from services.profiles import load_profile

            first = self.in_force
            loaded = load_profile(profile, first.profiles_root)  # unknown or broken: ProfileError
            self._in_force = replace(first, loaded_profile=loaded)

    # -- what is in force: one value (``services.session.inforce``), replaced whole on every change ---------
    @property
    def in_force(self) -> InForce:
        if self._in_force is None:
            self._in_force = resolve(self.workspace, self.operator)
        return self._in_force

    def _resolve(self, profile: ActiveProfile | None = None) -> InForce:
        return resolve(self.workspace, self.operator, profile=profile)

    def _apply(self, new: InForce, reason: str) -> int:
        """Put ``new`` in force: when it narrows or replaces the policy, mode or profile, the calls
        waiting under the old value are denied (``reason``) and the gateway is rebound (grants and
        processes kept). Returns how many calls were denied. A new policy that does not load raises
        ConfigError before anything changes."""
        old = self.in_force
        if self._gateway is None or not new.replaces(old):
            self._in_force = new
            return 0
        policy = new.policy
        self._in_force = new
        denied = self.approvals.deny_all(reason)
        self._gateway.rebind(policy, mode=new.mode.value)
        return denied

    @property
    def trust(self) -> TrustState:
        """The workspace's trust state (``services.trust.records``), read when what is in force is
        resolved. While it is ``changed`` (what is in force is not what the operator trusted), the
        workspace's policy, profiles and authority settings are not used."""
        return self.in_force.trust

    def authority_setting(self, key: str) -> Any:
        """A workspace setting that carries authority (``model``, ``approval_mode``, ``cloud``), or
        None while the workspace's settings are not in force."""
        return self.workspace.setting(key) if self.trust.in_force else None

    # -- the profile ----------------------------------------------------------------------
    @property
    def profile_name(self) -> str:
        return self.in_force.profile_name

    def profile(self) -> ActiveProfile | None:
        """The active profile, or None when it cannot be loaded (see ``profile_error``; reported once
        as an error notice)."""
        in_force = self.in_force
        profile = in_force.profile
        if in_force.profile_error is not None and self._noticed != (in_force.profile_name, in_force.profile_error):
            self._noticed = (in_force.profile_name, in_force.profile_error)
            self.conversation.record(
                Notice(
                    text=f"Profile {in_force.profile_name} cannot be used: {in_force.profile_error}. No tool may "
                    "run until it is fixed or another profile is chosen (/profile list, /profile use NAME).",
                    level="error",
                    title="profile",
                )
            )
        return profile

    def profile_may_set(self) -> bool:
        """See ``InForce.profile_may_set``: False when the profile is known to set nothing."""
        return self.in_force.profile_may_set()

    @property
    def profile_broken(self) -> bool:
        """True once the active profile was found unusable (does not load it)."""
        in_force = self.in_force
        return in_force.profile_loaded and in_force.profile_error is not None

    @property
    def profile_error(self) -> str | None:
        self.profile()
        return self.in_force.profile_error

    def model_setting(self) -> str | None:
        """The workspace's ``model`` setting, else the profile's default model (ARIES_MODEL wins over
        both: ``InForce.model``, ``services.models.config.resolve_model``)."""
        if self.in_force.profile_may_set():
            self.profile()  # a broken profile is reported
        return self.in_force.model_setting

    # -- the policy and the mode -----------------------------------------------------------------
    @property
    def policy_path(self) -> Path | None:
        """The policy file in force, or None for the shipped default."""
        if self.in_force.profile_may_set():
            self.profile()
        return self.in_force.policy_path

    @property
    def policy_source(self) -> str:
        path = self.policy_path
        return str(path) if path is not None else SHIPPED_POLICY

    def policy(self) -> Policy:
        """The policy in force (loaded once per value). Raises ConfigError."""
        self.profile()
        return self.in_force.policy

    @property
    def mode(self) -> ApprovalMode:
        """The approval mode in force (``InForce.mode``; where it came from: ``in_force.mode_source``)."""
        if self.in_force.profile_may_set():
            self.profile()  # a broken profile is reported
        return self.in_force.mode

    # -- the gateway and the engine --------------------------------------------------------
    def gateway(self) -> ToolGateway:
        """The workspace's tool gateway, built on first use (keeps tools out of start-up)."""
        self._check_open()
        if self._gateway is None:
            from services.context.tools import ContextToolBackend
            from services.tools.gateway import ToolGateway

            # The context tools (builtin:context:find/search) work on this session's engine.
            self._context_backend = ContextToolBackend(self.workspace.root, self.engine)
            self._gateway = ToolGateway(
                self.workspace,
                policy=self.policy(),
                mode=self.mode,
                approver=self.approver,
                source=self.source,
                backends={"context": self._context_backend},
            )
        return self._gateway

    @property
    def has_gateway(self) -> bool:
        return self._gateway is not None

    def engine(self) -> RetrievalEngine:
        """The workspace's retrieval engine (created on first use, from any thread)."""
        self._check_open()
        with self._engine_lock:
            if self._engine is None:
                from services.retrieval import RetrievalEngine

                self._engine = RetrievalEngine(self.workspace)
            return self._engine

    @property
    def has_engine(self) -> bool:
        return self._engine is not None

    # -- tool calls ---------------------------------------------------------------------------
    async def call_tool(
        self,
        tool_id: str,
        args: Any,
        *,
        approver: Approver | None = None,
        source: str | None = None,
        turn_id: str | None = None,
        tool_call_id: str | None = None,
        turn_step: int | None = None,
        model: str | None = None,
        from_text: bool = False,
        call_id: str | None = None,
        only: tuple[str, frozenset[str]] | None = None,
        data_stored_in: str | None = None,
    ) -> ToolResult:
        """One call through the gateway, recorded in the audit store and the conversation
        (``from_text``: a call read from the model's text, see ``ToolCallRequest.from_text``; ``call_id``:
        the audit id, chosen by the caller that must name the call before it runs — the TUI's status row)."""
        gateway = self.gateway()
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            return await gateway.execute(
                tool_id,
                args,
                approver=approver or self.approver,
                transcript=self.conversation,
                source=source,
                turn_id=turn_id,
                tool_call_id=tool_call_id,
                turn_step=turn_step,
                model=model,
                from_text=from_text,
                call_id=call_id,
                only=only,
                data_stored_in=data_stored_in,
            )
        finally:
            if task is not None:
                self._inflight.discard(task)

    def call_tool_sync(self, tool_id: str, args: Any, **kwargs: Any) -> ToolResult:
        """``call_tool`` for callers without an event loop (the CLI)."""
        return asyncio.run(self.call_tool(tool_id, args, **kwargs))

    # -- changing what is in force --------------------------------------------------------------
    def set_mode(self, mode: str) -> int:
        """Switch the approval mode: the operator's choice for this session, over every other level
        (persisted in the workspace too, as its ``approval_mode``); returns how many waiting calls
        were denied because they were asked under the old mode."""
        chosen = parse_mode(mode)
        self._persist(approval_mode=chosen.value)
        self.operator = self.operator.choose_mode(chosen)
        denied = self._apply(
            self._resolve(self._session_profile()),
            f"the approval mode changed to {chosen} before a decision; ask again",
        )
        self.conversation.record(Notice(text=f"Approval mode is now {self.mode}.", title="policy"))
        return denied

    def _session_profile(self) -> ActiveProfile | None:
        """The profile this session was given (``--profile``, ``/profile use``), to keep across a change."""
        return self.in_force.loaded_profile if self.operator.profile else None

    def reload_policy(self) -> int:
        """Read the policy file again and apply it (a broken file raises ConfigError and changes nothing).
        A reload also looks again at whether the workspace's settings are in force."""
        new = self._resolve(self._session_profile())
        policy = new.policy  # raises before any change
        denied = self._apply(new, "the policy was reloaded before a decision; ask again")
        self.conversation.record(
            Notice(text=f"Policy reloaded from {self.policy_source} ({policy.hash[:19]}).", title="policy")
        )
        return denied

    def update_settings(self, *, profile: str | None = None, **settings: Any) -> None:
        """The operator changes a workspace setting through Aries (``/model``, ``/policy mode``,
        ``/profile use``): written like ``Workspace.update``; a trusted import stays trusted (its
        fingerprint follows the operator's own edit, ``services.trust.records.operator_edit``). What is
        in force is resolved again (waiting calls are denied only if that narrows or replaces it)."""
        self._persist(profile=profile, **settings)
        self._apply(self._resolve(self._session_profile()), "the workspace's settings changed before a decision")

    def _persist(self, *, profile: str | None = None, **settings: Any) -> None:
        from services.trust.records import operator_edit

        with operator_edit(self.workspace.root, ephemeral=self.workspace.ephemeral):
            self.workspace.update(profile=profile, **settings)

    def reread_commands(self) -> None:
        """After the operator edited a workspace command through Aries (``services.trust.edits``): what
        is in force resolved again, so that the new command file is read."""
        self._apply(self._resolve(self._session_profile()), "the workspace's settings changed before a decision")

    def reload_settings(self) -> int:
        """Read everything the workspace's settings decide again — trust, the profile (unless this
        session was given one), the policy, the approval mode (a ``/policy mode`` choice gives way to
        the workspace's settings) — and rebind the gateway (after the operator trusted the workspace).
        Returns how many waiting calls were denied."""
        self.operator = self.operator.without_session_mode()
        new = self._resolve(self._session_profile())
        new.policy  # noqa: B018 - a broken policy file raises here, before any change
        return self._apply(new, "the workspace's settings changed before a decision; ask again")

    def use_profile(self, name: str) -> ActiveProfile:
        """Switch to profile ``name``: persisted per workspace (not for an ephemeral one), the gateway
        rebound at once (grants and processes kept; waiting calls denied), recorded in the audit
        store and as a notice. A profile that cannot be loaded raises ProfileError, changing nothing."""
        from services.profiles import load_profile
        from services.profiles.audit import record_switch

        self._check_open()
        profile = load_profile(name, self.in_force.profiles_root)
        operator = replace(self.operator, profile=profile.name).without_session_mode()
        resolve(self.workspace, operator, profile=profile).policy  # noqa: B018 - a broken policy raises here
        old = self.profile_name
        if not self.workspace.ephemeral:
            self._persist(profile=profile.name)
        self.operator = operator
        denied = self._apply(
            self._resolve(profile), f"the profile changed to {profile.name} before a decision; ask again"
        )
        policy = self.in_force.policy
        tools = "every tool the policy enables" if profile.tools is None else ", ".join(sorted(profile.tools))
        record_switch(self.workspace, self.source, old, profile, policy_hash=policy.hash, approval_mode=self.mode)
        note = f" {denied} waiting call(s) denied." if denied else ""
        self.conversation.record(
            Notice(
                text=f"Profile is now {profile.name} (was {old}): tools: {tools}; approval mode {self.mode}.{note}",
                title="profile",
            )
        )
        return profile

    def grants(self) -> list[dict[str, Any]]:
        """Session and lasting grants; the gateway is made for it, as the lasting grants live in the
        operator's store whether or not a call was made in this session yet."""
        return self.gateway().grants()

    def revoke_grants(self, tool_id: str | None = None) -> int:
        """Forget session grants (all, or those of one tool); recorded as a notice."""
        count = self._gateway.revoke_grants(tool_id) if self._gateway is not None else 0
        if count:
            self.conversation.notice(f"{count} session grant(s) revoked.", title="grants")
        return count

    def revoke_grant(self, number: int) -> dict[str, Any] | None:
        """Forget grant ``number`` (1-based, as ``/grants`` lists them); recorded as a notice."""
        grant = self._gateway.revoke_grant_at(number - 1) if self._gateway is not None and number > 0 else None
        if grant is not None:
            self.conversation.notice(f"Session grant revoked: {grant['tool_id']} {grant['pattern']}.", title="grants")
        return grant

    def _held(self, conversation: Conversation) -> Conversation:
        """``conversation``, held by this session when it holds what it writes: the new hold is taken
        first (``ConversationBusy`` leaves the current conversation and its hold as they were), then the
        previous one is released."""
        if not self._holds or (self.hold is not None and self.hold.conversation_id == conversation.conversation_id):
            return conversation
        from services.conversation.hold import hold_conversation

        hold = hold_conversation(self.workspace.transcripts_dir, conversation.conversation_id, purpose=self.source)
        previous, self.hold = self.hold, hold
        if previous is not None:
            previous.release()
        return conversation

    def new_conversation(self) -> Conversation:
        self.conversation = self._held(Conversation(self.workspace.new_transcript()))
        return self.conversation

    def open_conversation(self, reference: str) -> Conversation:
        """Continue a stored conversation (``last``, an id or a unique start of one): the model sees
        its earlier turns, new turns append to it with the same id scheme."""
        from services.conversation.history import resolve

        self.conversation = self._held(Conversation(self.workspace.transcript(resolve(self.workspace, reference))))
        return self.conversation

    # -- closing --------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"the session of workspace {self.workspace.name} is closed")

    async def aclose(self, reason: str = "the session was closed") -> None:
        """Deny what waits, cancel what runs, let each be recorded, then close the stores."""
        if self._closed:
            return
        self.approvals.deny_all(f"{reason} before a decision")
        current = asyncio.current_task()
        running = [task for task in self._inflight if task is not current and not task.done()]
        if running:
            # Denied calls finish on their own; give them a moment to record, then cancel the rest
            # (a cancelled call is recorded too: the gateway writes its result before re-raising).
            _done, late = await asyncio.wait(running, timeout=2.0)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=10.0)
        self._close_stores()

    def close(self, reason: str = "the session was closed") -> None:
        """``aclose`` for callers without an event loop (the CLI, tests)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self.aclose(reason))
            return
        raise RuntimeError("close() called from a running event loop; use 'await session.aclose()'")

    def _close_stores(self) -> None:
        self._closed = True
        try:
            if self._gateway is not None:
                gateway, self._gateway = self._gateway, None
                gateway.close()
            if self._context_backend is not None:
                backend, self._context_backend = self._context_backend, None
                backend.close()
        finally:
            try:
                with self._engine_lock:
                    if self._engine is not None:
                        engine, self._engine = self._engine, None
                        engine.close()
            finally:
                try:
                    if self.hold is not None:
                        self.hold.release()
                finally:
                    if self.lease is not None:
                        self.lease.release()

    @classmethod
    def open(cls, where: Workspace | str | None, *, surface: Surface, **options: Unpack[OpenOptions]) -> Session:
        """Every surface's way to a session (find, lease, repair, conversation): ``services.session.opening``."""
        from services.session.opening import open_session

        return open_session(cls, where, surface=surface, **options)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["SHIPPED_POLICY", "WORKSPACE_POLICY", "Session"]
