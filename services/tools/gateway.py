"""The policy gateway: the one way any tool call runs.

``ToolGateway`` is one workspace session's tool runtime — the policy bound to the workspace, the
audit store and its run, session grants, the process manager. ``await gateway.execute(tool_id,
args)`` is ``execute_tool_call_with_policy(gateway, request)``: the gateway's state taken as a
``CallSite`` and handed to ``services.tools.pipeline.run_call`` (validate, policy, approval,
dispatch, audit, conversation event). The request and approval types live in
``services.tools.calls``, the tool listing in ``services.tools.records``.

Callers (the session core for the TUI, the CLI, ``ask`` and plans) create one ``ToolGateway`` per
workspace session.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from services.audit.log import AuditStore
from services.errors import InvalidInput
from services.policy import BoundPolicy, Policy, PolicyDecision, default_policy
from services.tools.calls import Approver, ToolCallRequest, new_id
from services.tools.pipeline import CallSite, Grants, preview_call, run_call
from services.tools.records import describe_tools, parse_arguments
from services.tools.registry import ToolRegistry
from services.tools.results import ToolResult

if TYPE_CHECKING:
    from services.conversation import Conversation
    from services.tools.mcp_client import McpHub
    from services.tools.processes import ProcessManager
    from services.workspace.manager import Workspace
    from services.workspace.transcripts import Transcript

    Recorder = Conversation | Transcript


# -- the gateway --------------------------------------------------------------------------------
class ToolGateway:
    """One workspace session's tool runtime: policy, audit store, approvals granted, processes."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        policy: Policy | None = None,
        mode: str | None = None,
        registry: ToolRegistry | None = None,
        approver: Approver | None = None,
        source: str = "operator",
        run_mode: str = "interactive",
        check_outputs: bool = False,
        backends: Mapping[str, Any] | None = None,
    ) -> None:
        self.workspace = workspace
        self.policy = policy or default_policy()
        self.bound = BoundPolicy(self.policy, workspace.root, mode=mode)
        self.mcp: McpHub | None = None  # the MCP servers, when the policy enables the provider
        self._mcp_key: str | None = None
        self.registry = registry if registry is not None else self._build_registry()
        self._own_registry = registry is None
        self.approver = approver
        self.source = source
        self.check_outputs = check_outputs
        # What the session lends its tools (e.g. ``"context"``, see services.tools.context).
        self.backends: Mapping[str, Any] = dict(backends or {})
        self.audit = AuditStore.for_workspace(workspace.root)
        self.run_mode = run_mode
        self.run_id = self._start_run()
        self._known_runs = {self.run_id}
        self._grants: Grants = {}
        from services.grants.store import GrantStore

        self.lasting = GrantStore.for_workspace(workspace)  # lasting grants (None: an ephemeral workspace)
        self._processes: ProcessManager | None = None
        self._step = 0
        self._lock = threading.Lock()
        self._closed = False

    def _build_registry(self) -> ToolRegistry:
        """The builtin tools, plus the MCP provider when the policy enables it with servers.

        With ``providers.mcp.enabled: false`` (the default) no MCP code runs and nothing starts.
        """
        from services.policy.mcp import mcp_settings
        from services.tools.builtin import BuiltinProvider, default_registry

        settings = mcp_settings(self.policy.data, self.workspace.root)
        self._mcp_key = settings.key
        if not (settings.enabled and settings.servers):
            return default_registry()
        from services.tools.mcp_client import McpHub
        from services.tools.mcp_provider import McpProvider

        self.mcp = McpHub(settings)
        atexit.register(self.mcp.close)
        return ToolRegistry([BuiltinProvider(), McpProvider(self.mcp)])

    def _close_mcp(self) -> None:
        hub, self.mcp = self.mcp, None
        if hub is not None:
            hub.close()
            atexit.unregister(hub.close)

    def mcp_status(self) -> list[dict[str, Any]]:
        """The configured MCP servers and their state (starts nothing); [] when MCP is off."""
        return self.mcp.status() if self.mcp is not None else []

    def _start_run(self) -> str:
        run_id = new_id("r")
        self.audit.start_run(
            run_id,
            mode=self.run_mode,
            policy_hash=self.policy.hash,
            source=self.source,
            workspace=self.workspace.name,
            approval_mode=self.bound.mode,
        )
        return run_id

    def rebind(self, policy: Policy, *, mode: str | None = None) -> None:
        """Apply a new policy or approval mode to the calls that come next.

        Session grants and background processes carry over (they belong to the session, not
        to a binding); the audit store gets a new run, so every run row names the policy hash
        and mode its calls were decided under.
        """
        if self._closed:
            raise RuntimeError("this tool gateway is closed")
        bound = BoundPolicy(policy, self.workspace.root, mode=mode)
        with self._lock:
            self.policy, self.bound = policy, bound
            if self._own_registry:
                from services.policy.mcp import mcp_settings

                if mcp_settings(policy.data, self.workspace.root).key != self._mcp_key:
                    self._close_mcp()  # other servers: stop these, start the new ones on demand
                    self.registry = self._build_registry()
            self.registry.forget()  # what was derived from the tools under the old binding
            old, self.run_id = self.run_id, self._start_run()
            self._known_runs.add(self.run_id)
        self.audit.end_run(old)

    # -- state -------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return self.bound.mode

    @property
    def processes(self) -> ProcessManager:
        if self._processes is None:
            from services.tools.processes import ProcessManager

            self._processes = ProcessManager()
            atexit.register(self._processes.close)
        return self._processes

    def grants(self) -> list[dict[str, Any]]:
        """Session grants, then the workspace's lasting grants: one list, one id space (``id``,
        ``scope``); a lasting grant also has its origin, use count and expiry (``services.grants``)."""
        from services.tools.pipeline import session_grant_id

        listed: list[dict[str, Any]] = [
            {"id": session_grant_id(tool_id, key), "scope": "session", "tool_id": tool_id, "pattern": pattern}
            for (tool_id, key), pattern in self._grants.items()
        ]
        if self.lasting is not None:
            from services.grants.store import describe, runs_code_unasked

            lasting = self.lasting.list()
            warnings = runs_code_unasked(lasting)
            for grant in lasting:
                listed.append({**describe(grant), "runs_code_unasked": warnings.get(grant.id)})
        return listed

    def revoke_grant(self, grant_id: str) -> dict[str, Any] | None:
        """Forget the session or lasting grant ``grant_id``; returns it, or None when there is none."""
        from services.tools.pipeline import session_grant_id

        for key in list(self._grants):
            if session_grant_id(*key) == grant_id:
                return {"id": grant_id, "scope": "session", "tool_id": key[0], "pattern": self._grants.pop(key)}
        if self.lasting is None:
            return None
        from services.errors import NotFound
        from services.grants.store import describe

        try:
            return describe(self.lasting.revoke(grant_id))
        except NotFound:
            return None

    def revoke_grant_at(self, position: int) -> dict[str, Any] | None:
        """Forget the session grant at ``position`` (0-based, in ``grants()`` order); returns it, or None."""
        keys = list(self._grants)
        if not 0 <= position < len(keys):
            return None
        key = keys[position]
        return {"tool_id": key[0], "pattern": self._grants.pop(key)}

    def revoke_grants(self, tool_id: str | None = None) -> int:
        """Forget session grants (all, or those of ``tool_id``); returns how many."""
        keys = [key for key in self._grants if tool_id is None or key[0] == tool_id]
        for key in keys:
            del self._grants[key]
        return len(keys)

    def _next_step(self) -> int:
        with self._lock:
            step = self._step
            self._step += 1
            return step

    def ensure_run(self, run_id: str, **kwargs: Any) -> None:
        if run_id not in self._known_runs:
            self.audit.start_run(run_id, **{"mode": "plan", "policy_hash": self.policy.hash, **kwargs})
            self._known_runs.add(run_id)

    def call_site(self) -> CallSite:
        """What a call that starts now needs of this gateway (``services.tools.pipeline``)."""
        if self._closed:
            raise RuntimeError("this tool gateway is closed")
        with self._lock:
            return CallSite(
                workspace=self.workspace,
                registry=self.registry,
                bound=self.bound,
                audit=self.audit,
                run_id=self.run_id,
                approver=self.approver,
                grants=self._grants,
                backends=self.backends,
                check_outputs=self.check_outputs,
                processes=lambda: self.processes,
                next_step=self._next_step,
                ensure_run=self.ensure_run,
                lasting=self.lasting,
            )

    # -- calls -------------------------------------------------------------------------
    async def execute(
        self,
        tool_id: str,
        args: Any,
        *,
        approver: Approver | None = None,
        transcript: Recorder | None = None,
        source: str | None = None,
        run_id: str | None = None,
        step_index: int | None = None,
        turn_id: str | None = None,
        tool_call_id: str | None = None,
        turn_step: int | None = None,
        model: str | None = None,
        from_text: bool = False,
        call_id: str | None = None,
        only: tuple[str, frozenset[str]] | None = None,
        data_stored_in: str | None = None,
    ) -> ToolResult:
        request = ToolCallRequest(
            tool_id,
            args,
            source or self.source,
            run_id,
            step_index,
            call_id=call_id,
            turn_id=turn_id,
            tool_call_id=tool_call_id,
            turn_step=turn_step,
            model=model,
            from_text=from_text,
            only=only,
            data_stored_in=data_stored_in,
        )
        return await execute_tool_call_with_policy(self, request, approver=approver, transcript=transcript)

    def execute_sync(self, tool_id: str, args: Any, **kwargs: Any) -> ToolResult:
        """``execute`` for callers without an event loop (CLI, tests, plan runner threads)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.execute(tool_id, args, **kwargs))
        raise RuntimeError("execute_sync() called from a running event loop; use 'await gateway.execute(...)'")

    def explain(self, tool_id: str, args: Any) -> PolicyDecision:
        """What the policy would decide for this call (nothing runs, nothing is recorded). An MCP
        tool's server is loaded first, as for a call."""
        return self._explained(tool_id, args)[1]

    def _explained(self, tool_id: str, args: Any) -> tuple[Any, PolicyDecision]:
        """The arguments validated once (``None`` when they do not fit) and the policy's decision."""
        self.registry.load_for(tool_id)
        spec = self.registry.get(tool_id)
        try:
            parsed = parse_arguments(self.registry, spec, args)
        except InvalidInput as exc:
            denied = PolicyDecision("deny", "input.schema", exc.message, tool_id, spec.tier, self.mode, "InvalidInput")
            return None, denied
        return parsed, self.bound.evaluate(spec, parsed)

    async def preview(self, tool_id: str, args: Any) -> dict[str, Any] | None:
        """The approval preview of a call the policy does not deny (e.g. the diff a write would make)."""
        spec = self.registry.get(tool_id)
        parsed, decision = self._explained(tool_id, args)
        if decision.action == "deny" or spec.preview is None:
            return None
        return await preview_call(self.call_site(), spec, new_id("v"), parsed, decision)

    def last_decision(self) -> dict[str, Any] | None:
        return self.audit.last_decision()

    def list_tools(self) -> list[dict[str, Any]]:
        return describe_tools(self.registry, self.policy)

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_mcp()
        if self._processes is not None:
            self._processes.close()
            atexit.unregister(self._processes.close)
        try:
            self.audit.end_run(self.run_id)
        finally:
            self.audit.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> ToolGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ToolGateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def execute_tool_call_with_policy(
    gateway: ToolGateway,
    request: ToolCallRequest,
    *,
    approver: Approver | None = None,
    transcript: Recorder | None = None,
) -> ToolResult:
    """The one way a tool call runs: validate, evaluate the policy, ask for approval, dispatch,
    record (``services.tools.pipeline.run_call``). Never raises for a tool's failure or a denial:
    those come back as structured error results."""
    return await run_call(gateway.call_site(), request, approver=approver, transcript=transcript)


def execute_tool_call_with_policy_sync(
    gateway: ToolGateway,
    request: ToolCallRequest,
    *,
    approver: Approver | None = None,
    transcript: Recorder | None = None,
) -> ToolResult:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(execute_tool_call_with_policy(gateway, request, approver=approver, transcript=transcript))
    raise RuntimeError("called from a running event loop; await execute_tool_call_with_policy(...) instead")


__all__ = ["ToolGateway", "execute_tool_call_with_policy", "execute_tool_call_with_policy_sync"]
