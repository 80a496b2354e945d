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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.approvals import ApprovalQueue
from services.conversation import Conversation, Notice
from services.errors import ConfigError

if TYPE_CHECKING:
    from services.context.tools import ContextToolBackend
    from services.leases import WorkspaceLease
    from services.policy import Policy
    from services.profiles import ActiveProfile
    from services.retrieval import RetrievalEngine
    from services.tools.calls import Approver
    from services.tools.doctor import Check, DoctorReport
    from services.tools.gateway import ToolGateway
    from services.tools.results import ToolResult
    from services.trust.records import TrustState
    from services.workspaces import Workspace

APPROVAL_MODES = ("guide", "commander", "strict")
WORKSPACE_POLICY = "policy.yaml"  # a workspace's own tool policy, at its root
SHIPPED_POLICY = "shipped default (profiles/policy-default.yaml)"


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
    ) -> None:
        if mode is not None and mode not in APPROVAL_MODES:
            raise ConfigError(f"the approval mode is one of {', '.join(APPROVAL_MODES)}, not {mode!r}")
        self.workspace = workspace
        self.source = source
        self._policy_file = Path(policy_file).expanduser() if policy_file is not None else None
        self._mode_override = mode
        self._mode_chosen: str | None = None  # set_mode in this session (a profile switch clears it)
        self._profile_name = profile  # None: the workspace's setting
        self._trust: TrustState | None = None
        self._profile: ActiveProfile | None = None
        self._profile_error: str | None = None
        self.approvals = ApprovalQueue()
        # Who decides a call the policy wants confirmed: the queue (an operator answers) unless the
        # caller gives another approver (the CLI's --approve, a headless allow-list, deny). A
        # non-interactive session without one has no approver: such calls are denied
        # (rule approval.no_approver).
        self.approver: Approver | None = approver
        if approver is None and interactive:
            self.approver = self.approvals.ask
        # ``last``: the conversation written to most recently; None: a new one (its file appears with
        # its first entry); else an id (or a unique start of one) to continue.
        if conversation is None:
            self.conversation = Conversation(workspace.new_transcript())
        elif conversation == "last":
            self.conversation = Conversation(workspace.latest_transcript())
        else:
            from services.conversation.history import resolve

            self.conversation = Conversation(workspace.transcript(resolve(workspace, conversation)))
        self._policy: Policy | None = None
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

            self._profile = load_profile(profile, self._profiles_root())  # unknown or broken: ProfileError

    # -- trust: whether the workspace's own authority settings are in force -------------------
    @property
    def trust(self) -> TrustState:
        """The workspace's trust state (``services.trust.records``), read once per session and again
        on :meth:`reload_policy`. While it is ``changed`` (what is in force is not what the operator
        trusted), the workspace's policy, profiles and authority settings are not used."""
        if self._trust is None:
            from services.trust.records import workspace_trust

            self._trust = workspace_trust(self.workspace.root, ephemeral=self.workspace.ephemeral)
        return self._trust

    def authority_setting(self, key: str) -> Any:
        """A workspace setting that carries authority (``model``, ``approval_mode``, ``cloud``), or
        None while the workspace's settings are not in force."""
        return self.workspace.setting(key) if self.trust.in_force else None

    def _profiles_root(self) -> Path | None:
        """Where workspace profiles are read from: the workspace, or nowhere while not in force."""
        return self.workspace.root if self.trust.in_force else None

    # -- the profile ----------------------------------------------------------------------
    @property
    def profile_name(self) -> str:
        if self._profile_name:
            return self._profile_name
        if not self.trust.in_force:
            from services.profiles.loader import SUFFIX, shipped_dir

            name = self.workspace.profile
            return name if (shipped_dir() / f"{name}{SUFFIX}").is_file() else "default"
        return self.workspace.profile

    def profile(self) -> ActiveProfile | None:
        """The active profile (loaded once), or None when it cannot be loaded (see ``profile_error``)."""
        if self._profile is None and self._profile_error is None:
            from services.profiles import load_profile

            try:
                self._profile = load_profile(self.profile_name, self._profiles_root())
            except ConfigError as exc:
                self._profile_error = exc.message
                self.conversation.record(
                    Notice(
                        text=f"Profile {self.profile_name} cannot be used: {exc.message}. No tool may run until "
                        "it is fixed or another profile is chosen (/profile list, /profile use NAME).",
                        level="error",
                        title="profile",
                    )
                )
        return self._profile

    def profile_may_set(self) -> bool:
        """False for the shipped ``default`` profile with no workspace copy: it names no policy, mode or
        model (``tests/test_profiles.py`` holds it to that), so what is in force is known without
        loading it — and without its parser (pydantic, the YAML reader), which opening a workspace
        need not pay for. True for any other profile (loaded to know)."""
        if self._profile is not None or self._profile_error is not None or self.profile_name != "default":
            return True
        from services.profiles.loader import SUFFIX, WORKSPACE_PROFILES

        own = self._profiles_root()
        return own is not None and (own / WORKSPACE_PROFILES / f"default{SUFFIX}").exists()

    def _settings_profile(self) -> ActiveProfile | None:
        """The profile, where it may set what is in force (``profile_may_set``)."""
        return self.profile() if self.profile_may_set() else None

    @property
    def profile_broken(self) -> bool:
        """True once the active profile was found unusable (does not load it)."""
        return self._profile_error is not None

    @property
    def profile_error(self) -> str | None:
        self.profile()
        return self._profile_error

    def model_setting(self) -> str | None:
        """The workspace's ``model`` setting, else the profile's default model (ARIES_MODEL wins over
        both, in ``services.models.config.resolve_model``)."""
        setting = self.authority_setting("model")
        if setting in (None, "", "offline"):
            profile = self._settings_profile()
            if profile is not None and profile.model.default:
                return profile.model.default
        return setting if setting is None else str(setting)

    # -- what is in force ------------------------------------------------------------------
    @property
    def policy_path(self) -> Path | None:
        """The policy file in force, or None for the shipped default."""
        return self._policy_path_for(self._settings_profile())

    def _policy_path_for(self, profile: ActiveProfile | None) -> Path | None:
        if self._policy_file is not None:
            return self._policy_file
        if not self.trust.in_force:
            return None  # the workspace's settings changed since the operator trusted them
        if profile is not None and profile.policy_path is not None:
            return profile.policy_path
        custom = self.workspace.root / WORKSPACE_POLICY
        return custom if custom.is_file() else None

    @property
    def policy_source(self) -> str:
        path = self.policy_path
        return str(path) if path is not None else SHIPPED_POLICY

    def policy(self) -> Policy:
        """The policy in force (loaded once; ``reload_policy`` reads it again). Raises ConfigError."""
        if self._policy is None:
            self._policy = self._profile_policy(self.profile())
        return self._policy

    def _profile_policy(self, profile: ActiveProfile | None) -> Policy:
        """The policy file in force, restricted to ``profile``'s tools (none if it is broken)."""
        from services.policy import load_policy

        policy = load_policy(self._policy_path_for(profile))
        if profile is None:
            return policy.restricted(self.profile_name, frozenset())  # broken profile: fail closed
        return policy.restricted(profile.name, profile.tools)

    @property
    def mode(self) -> str:
        if self._mode_override is not None:
            return self._mode_override
        if self._mode_chosen is not None:
            return self._mode_chosen
        profile = self._settings_profile()
        if profile is not None and profile.mode is not None:
            return profile.mode
        setting = self.authority_setting("approval_mode")
        if setting:
            return str(setting)
        return self.policy().mode if self._policy is not None else "guide"

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
    ) -> ToolResult:
        """One call through the gateway, recorded in the audit store and the conversation."""
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
            )
        finally:
            if task is not None:
                self._inflight.discard(task)

    def call_tool_sync(self, tool_id: str, args: Any, **kwargs: Any) -> ToolResult:
        """``call_tool`` for callers without an event loop (the CLI)."""
        return asyncio.run(self.call_tool(tool_id, args, **kwargs))

    # -- changing what is in force --------------------------------------------------------------
    def set_mode(self, mode: str) -> int:
        """Switch the approval mode (persisted in the workspace); returns how many waiting calls
        were denied because they were asked under the old mode."""
        if mode not in APPROVAL_MODES:
            raise ConfigError(f"the approval mode is one of {', '.join(APPROVAL_MODES)}, not {mode!r}")
        self.update_settings(approval_mode=mode)
        self._mode_override = None
        self._mode_chosen = mode  # wins over the profile's mode until the profile changes
        denied = self.approvals.deny_all(f"the approval mode changed to {mode} before a decision; ask again")
        if self._gateway is not None:
            self._gateway.rebind(self.policy(), mode=mode)
        self.conversation.record(Notice(text=f"Approval mode is now {mode}.", title="policy"))
        return denied

    def reload_policy(self) -> int:
        """Read the policy file again and apply it (a broken file raises ConfigError and changes nothing)."""
        self._trust = None  # a reload also looks again at whether the workspace's settings are in force
        policy = self._profile_policy(self.profile())
        self._policy = policy
        denied = self.approvals.deny_all("the policy was reloaded before a decision; ask again")
        if self._gateway is not None:
            self._gateway.rebind(policy, mode=self.mode)
        self.conversation.record(
            Notice(text=f"Policy reloaded from {self.policy_source} ({policy.hash[:19]}).", title="policy")
        )
        return denied

    def update_settings(self, *, profile: str | None = None, **settings: Any) -> None:
        """The operator changes a workspace setting through Aries (``/model``, ``/policy mode``,
        ``/profile use``): written like ``Workspace.update``; a trusted import stays trusted (its
        fingerprint follows the operator's own edit, ``services.trust.records.operator_edit``)."""
        from services.trust.records import operator_edit

        with operator_edit(self.workspace.root, ephemeral=self.workspace.ephemeral):
            self.workspace.update(profile=profile, **settings)
        self._trust = None

    def reload_settings(self) -> int:
        """Read everything the workspace's settings decide again — trust, the profile (unless this
        session was given one), the policy, the approval mode — and rebind the gateway (after the
        operator trusted the workspace). Returns how many waiting calls were denied."""
        self._trust = None
        if self._profile_name is None:
            self._profile, self._profile_error = None, None
        self._mode_chosen = None
        policy = self._profile_policy(self.profile())
        self._policy = policy
        denied = self.approvals.deny_all("the workspace's settings changed before a decision; ask again")
        if self._gateway is not None:
            self._gateway.rebind(policy, mode=self.mode)
        return denied

    def use_profile(self, name: str) -> ActiveProfile:
        """Switch to profile ``name``: persisted per workspace (not for an ephemeral one), the gateway
        rebound at once (grants and processes kept; waiting calls denied), recorded in the audit
        store and as a notice. A profile that cannot be loaded raises ProfileError, changing nothing."""
        from services.profiles import load_profile
        from services.profiles.audit import record_switch

        self._check_open()
        profile = load_profile(name, self._profiles_root())
        policy = self._profile_policy(profile)  # a broken policy file raises here, before any change
        old = self.profile_name
        if not self.workspace.ephemeral:
            self.update_settings(profile=profile.name)
        self._profile_name = profile.name
        self._profile, self._profile_error, self._policy, self._mode_chosen = profile, None, policy, None
        denied = self.approvals.deny_all(f"the profile changed to {profile.name} before a decision; ask again")
        if self._gateway is not None:
            self._gateway.rebind(policy, mode=self.mode)
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
        return self._gateway.grants() if self._gateway is not None else []

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

    def new_conversation(self) -> Conversation:
        self.conversation = Conversation(self.workspace.new_transcript())
        return self.conversation

    def open_conversation(self, reference: str) -> Conversation:
        """Continue a stored conversation (``last``, an id or a unique start of one): the model sees
        its earlier turns, new turns append to it with the same id scheme."""
        from services.conversation.history import resolve

        self.conversation = Conversation(self.workspace.transcript(resolve(self.workspace, reference)))
        return self.conversation

    def doctor(self) -> DoctorReport:
        """The self-check of this session: the tool runtime against the policy in force (a failure
        when it does not load, ``services.tools.doctor``), its MCP servers (started here if enabled)
        and one check per index of the workspace."""
        from services.tools.doctor import Check, doctor, mcp_checks

        try:
            policy = self.policy()
        except ConfigError as exc:
            report = doctor(source=self.policy_source, policy_error=exc.message)
        else:
            report = doctor(policy, source=self.policy_source, mode=self.mode)
            try:
                report.checks.extend(mcp_checks(policy, self.gateway))
            except Exception as exc:  # the doctor reports, it does not crash
                report.checks.append(Check("mcp provider", False, f"{type(exc).__name__}: {exc}"[:300]))
        report.checks.extend(self._index_checks())
        return report

    def _index_checks(self) -> list[Check]:
        """One check per index of the workspace: does it open, are its vectors sound, which files failed."""
        from services.errors import AriesError
        from services.tools.doctor import Check

        if not self.workspace.indexes_dir.is_dir() and not self.has_engine:
            return []
        try:
            infos = self.engine().index_list()
        except AriesError as exc:
            return [Check("indexes", False, exc.message)]
        checks = []
        for info in infos:
            detail = f"{info.files} file(s), {info.chunks} chunk(s), {info.status}"
            if info.status_detail:
                detail += f": {info.status_detail}"
            if advice := info.status.advice(info.name):
                detail += f" ({advice})"
            if info.failed:
                detail += f"; {len(info.failed)} file(s) failed to re-load (old chunks kept): {info.failed[0]['path']}"
            checks.append(Check(f"index {info.name}", info.status == "ok", detail))
        return checks

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
                if self.lease is not None:
                    self.lease.release()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["APPROVAL_MODES", "SHIPPED_POLICY", "WORKSPACE_POLICY", "Session"]
