"""The policy gateway: the one way any tool call runs.

``execute_tool_call_with_policy(gateway, request)`` does, in order:

1. record the call in the audit store (no record, no call: a failing audit store fails closed);
2. look the tool up and validate the arguments against its input schema (``InvalidInput``);
3. evaluate the policy (``deny`` becomes a structured ``PolicyDenied`` result, with its rule);
4. when the policy says ``confirm``: reuse a session grant for the same tool and argument
   pattern, or ask the approver (approve once / approve for the session / deny with a reason);
5. dispatch with a one-call capability (sync tools in a worker thread, with a time limit);
6. record the result, the decision, the matched rule and who approved; append the transcript
   tool entry when a transcript is given.

Callers (the TUI, plans, the headless CLI, ``ask``) create one ``ToolGateway`` per workspace
session and call ``await gateway.execute(tool_id, args)`` (or ``gateway.execute_sync``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import hashlib
import inspect
import secrets
import threading
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from services.audit import AuditStore, canonical_json, content_hash
from services.clock import utc_now
from services.errors import AriesError
from services.policy import BoundPolicy, Policy, PolicyDecision, RiskTier, default_policy
from services.tools.registry import ToolContext, ToolRegistry, ToolSpec, _issue, _revoke
from services.tools.results import ErrorType, ToolError, ToolOutput, ToolResult, error_from_exception

if TYPE_CHECKING:
    from services.conversation import Conversation
    from services.tools.shell import ProcessManager
    from services.transcripts import Transcript

    Recorder = Conversation | Transcript
    from services.workspaces import Workspace


# -- approvals ----------------------------------------------------------------------------------
class ApprovalChoice(StrEnum):
    APPROVE_ONCE = "approve_once"
    APPROVE_SESSION = "approve_session"
    DENY = "deny"


@dataclass(frozen=True)
class ApprovalDecision:
    choice: ApprovalChoice
    reason: str | None = None

    @classmethod
    def once(cls) -> ApprovalDecision:
        return cls(ApprovalChoice.APPROVE_ONCE)

    @classmethod
    def session(cls) -> ApprovalDecision:
        return cls(ApprovalChoice.APPROVE_SESSION)

    @classmethod
    def deny(cls, reason: str | None = None) -> ApprovalDecision:
        return cls(ApprovalChoice.DENY, reason)


@dataclass(frozen=True)
class ApprovalRequest:
    """What the approver (the TUI's modal, the CLI's ``--approve``) is asked about."""

    call_id: str
    tool_id: str
    tier: RiskTier
    args: dict[str, Any]
    decision: PolicyDecision  # action "confirm", with the rule that asks for approval
    preview: dict[str, Any] | None  # e.g. {"kind": "diff", "diff": ...} or {"kind": "command", ...}
    session_pattern: dict[str, Any]  # what "approve for session" would cover
    description: str
    source: str
    # Who asked, beyond ``source``: for a model's call {"turn_id", "model", "tool_call_id", "step"}.
    origin: dict[str, Any] = field(default_factory=dict)


class Approver(Protocol):
    """Sync or async callable; the TUI awaits its modal, the CLI answers at once."""

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision | Awaitable[ApprovalDecision]: ...


def approve_all(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision.once()


def deny_all(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision.deny("approval required; no operator is available to approve")


@dataclass
class ToolCallRequest:
    tool_id: str
    args: Any
    source: str = "operator"  # operator | assistant | plan | cli
    run_id: str | None = None
    step_index: int | None = None
    call_id: str | None = None
    turn_id: str | None = None  # the conversation turn that asked (a model's turn, an operator command)
    tool_call_id: str | None = None  # the model's own id for this call, when a model asked
    turn_step: int | None = None  # position inside the turn
    model: str | None = None  # provider:model, when a model asked

    def origin(self) -> dict[str, Any]:
        fields = {
            "turn_id": self.turn_id,
            "model": self.model,
            "tool_call_id": self.tool_call_id,
            "step": self.turn_step,
        }
        return {key: value for key, value in fields.items() if value is not None}


def _new_id(prefix: str) -> str:
    return f"{prefix}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"


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
    ) -> None:
        self.workspace = workspace
        self.policy = policy or default_policy()
        self.bound: BoundPolicy = self.policy.bind(workspace.root, mode=mode)
        if registry is None:
            from services.tools.builtin import default_registry

            registry = default_registry()
        self.registry = registry
        self.approver = approver
        self.source = source
        self.check_outputs = check_outputs
        self.audit = AuditStore.for_workspace(workspace.root)
        self.run_mode = run_mode
        self.run_id = self._start_run()
        self._known_runs = {self.run_id}
        self._grants: dict[tuple[str, str], dict[str, Any]] = {}
        self._processes: ProcessManager | None = None
        self._step = 0
        self._lock = threading.Lock()
        self._closed = False

    def _start_run(self) -> str:
        run_id = _new_id("r")
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
        bound = policy.bind(self.workspace.root, mode=mode)
        with self._lock:
            self.policy, self.bound = policy, bound
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
            from services.tools.shell import ProcessManager

            self._processes = ProcessManager()
            atexit.register(self._processes.close)
        return self._processes

    def grants(self) -> list[dict[str, Any]]:
        return [{"tool_id": tool_id, "pattern": pattern} for (tool_id, _), pattern in self._grants.items()]

    def revoke_grant_at(self, position: int) -> dict[str, Any] | None:
        """Forget the grant at ``position`` (0-based, in ``grants()`` order); returns it, or None."""
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
    ) -> ToolResult:
        request = ToolCallRequest(
            tool_id,
            args,
            source or self.source,
            run_id,
            step_index,
            turn_id=turn_id,
            tool_call_id=tool_call_id,
            turn_step=turn_step,
            model=model,
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
        """What the policy would decide for this call (nothing runs, nothing is recorded)."""
        spec = self.registry.get(tool_id)
        problem = _schema_problem(self.registry, spec, args)
        if problem is not None:
            return PolicyDecision("deny", "input.schema", problem, tool_id, spec.tier, self.mode, "InvalidInput")
        return self.bound.evaluate(spec, args)

    async def preview(self, tool_id: str, args: Any) -> dict[str, Any] | None:
        """The approval preview of a call the policy does not deny (e.g. the diff a write would make)."""
        spec = self.registry.get(tool_id)
        decision = self.explain(tool_id, args)
        if decision.action == "deny" or spec.preview is None:
            return None
        return await _preview(self, spec, _new_id("v"), args, decision)

    def last_decision(self) -> dict[str, Any] | None:
        return self.audit.last_decision()

    def list_tools(self) -> list[dict[str, Any]]:
        return describe_tools(self.registry, self.policy)

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
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


# -- the pipeline -------------------------------------------------------------------------------
def describe_tools(registry: ToolRegistry, policy: Policy) -> list[dict[str, Any]]:
    """Every registered tool with its class, risk tier, and whether ``policy`` enables it."""
    out = []
    for spec in registry.list():
        enabled = (
            policy.providers.get(spec.provider, False)
            and policy.tool_classes.get(spec.tool_class, False)
            and policy.tools.get(spec.tool_id, {}).get("enabled", True) is not False
        )
        out.append(
            {
                "id": spec.tool_id,
                "class": spec.tool_class,
                "tier": str(spec.tier),
                "enabled": bool(enabled),
                "description": spec.description,
            }
        )
    return out


def _schema_problem(registry: ToolRegistry, spec: ToolSpec, args: Any) -> str | None:
    """One line naming the failing field (``ToolRegistry.validate``), or None when ``args`` fit."""
    from services.errors import InvalidInput

    try:
        registry.validate(spec.tool_id, args)
    except InvalidInput as exc:
        return exc.message
    return None


def session_pattern(spec: ToolSpec, facts: dict[str, Any]) -> dict[str, Any]:
    """What "approve for session" covers: the tool plus the facts its spec names."""
    pattern: dict[str, Any] = {}
    for key in spec.session_keys:
        node: Any = facts
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if key == "paths" and isinstance(node, list):
            node = sorted(p["path"] for p in node)
        elif isinstance(node, list):
            node = sorted(node)
        pattern[key] = node
    return pattern


async def _call(
    spec: ToolSpec, handler: Any, is_async: bool, ctx: ToolContext, args: dict[str, Any], timeout: float
) -> Any:
    cap = _issue(spec.tool_id, ctx.call_id)
    try:
        if is_async:
            return await asyncio.wait_for(handler(cap, ctx, args), timeout)
        return await asyncio.wait_for(asyncio.to_thread(handler, cap, ctx, args), timeout)
    finally:
        # Timed out, cancelled or done: a tool still working in a thread sees it and stops.
        ctx.cancel.set()
        _revoke(cap)


def _context(gateway: ToolGateway, spec: ToolSpec, call_id: str, decision: PolicyDecision) -> ToolContext:
    timeout = float(gateway.bound.limits.tool_timeout_s)
    return ToolContext(
        call_id=call_id,
        tool_id=spec.tool_id,
        policy=gateway.bound,
        workspace=gateway.workspace,
        processes=gateway.processes if spec.tool_class == "shell" else None,
        facts=decision.facts,
        deadline=time.monotonic() + timeout,
    )


async def _preview(
    gateway: ToolGateway, spec: ToolSpec, call_id: str, args: dict[str, Any], decision: PolicyDecision
) -> dict[str, Any] | None:
    if spec.preview is None:
        return None
    ctx = _context(gateway, spec, call_id, decision)
    try:
        value = await _call(spec, spec.preview, spec.preview_is_async, ctx, args, 30.0)
    except Exception as exc:  # a failing preview must not block the approval
        return {"kind": "error", "note": error_from_exception(exc).message}
    return dict(value) if isinstance(value, dict) else None


# Seconds this call spent waiting for the operator; kept out of ``duration_ms`` (the work itself).
_APPROVAL_WAIT: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("approval_wait", default=None)


async def _ask(approver: Approver, request: ApprovalRequest) -> ApprovalDecision:
    asked = time.perf_counter()
    try:
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = await answer
    finally:
        waited = _APPROVAL_WAIT.get()
        if waited is not None:
            waited.append(time.perf_counter() - asked)
    if not isinstance(answer, ApprovalDecision):
        return ApprovalDecision.deny(f"the approver returned {type(answer).__name__}, not a decision")
    return answer


async def execute_tool_call_with_policy(
    gateway: ToolGateway,
    request: ToolCallRequest,
    *,
    approver: Approver | None = None,
    transcript: Recorder | None = None,
) -> ToolResult:
    """Validate, evaluate the policy, ask for approval, dispatch, record. Never raises for a
    tool's failure or a denial: those come back as structured error results."""
    started_mono = time.perf_counter()
    started_at = utc_now()
    waited: list[float] = []
    _APPROVAL_WAIT.set(waited)
    call_id = request.call_id or _new_id("call")
    run_id = request.run_id or gateway.run_id
    tool_id = request.tool_id
    args = request.args
    if gateway._closed:
        raise RuntimeError("this tool gateway is closed")
    step = request.step_index if request.step_index is not None else gateway._next_step()
    spec: ToolSpec | None = gateway.registry.get(tool_id) if tool_id in gateway.registry else None
    try:
        gateway.ensure_run(run_id)
        gateway.audit.record_call(
            call_id=call_id,
            run_id=run_id,
            step_index=step,
            tool_name=str(tool_id),
            args=args,
            created_at=started_at,
            source=request.source,
            tier=str(spec.tier) if spec else None,
        )
    except Exception as exc:  # fail closed: a call that cannot be recorded does not run
        return ToolResult.failure(
            ErrorType.INTERNAL_ERROR,
            f"the audit store refused the call record: {exc}",
            meta={"call_id": call_id, "tool_id": tool_id, "duration_ms": 0.0, "bytes": 0, "truncated": False},
        )

    cancelled: BaseException | None = None
    try:
        decision, output, error = await _decide_and_dispatch(gateway, spec, request, call_id, approver)
    except asyncio.CancelledError as exc:  # recorded, then passed on
        cancelled = exc
        decision = _gateway_decision(gateway, spec, tool_id, "gateway.cancelled", "the call was cancelled")
        decision.error_type = "Cancelled"
        output, error = None, ToolError(ErrorType.CANCELLED, decision.reason, True, {"rule": decision.rule})
    except Exception as exc:  # a gateway bug still yields a recorded, typed result
        decision = _gateway_decision(gateway, spec, tool_id, "gateway.error", f"{type(exc).__name__}: {exc}")
        output, error = None, ToolError(ErrorType.INTERNAL_ERROR, decision.reason[:500], False, {"rule": decision.rule})

    approval_wait_ms = round(sum(waited) * 1000, 3)
    duration_ms = round((time.perf_counter() - started_mono) * 1000 - approval_wait_ms, 3)
    meta: dict[str, Any] = {"call_id": call_id, "tool_id": tool_id}
    data_json: str | None = None
    if output is not None:
        data_json = canonical_json(output.data)
        if gateway.check_outputs and spec is not None:
            from jsonschema import Draft202012Validator

            Draft202012Validator(spec.output_schema).validate(output.data)
        meta.update(output.meta)
        meta.setdefault("bytes", len(data_json))
        meta.setdefault("truncated", False)
        result = ToolResult("ok", output.data, None, meta)
        status = "success"
    else:
        assert error is not None
        meta.setdefault("bytes", 0)
        meta.setdefault("truncated", False)
        result = ToolResult("error", None, error, meta)
        refused = decision.action == "deny" and decision.error_type not in ("InternalError", "Cancelled")
        status = "denied" if error.type is ErrorType.POLICY_DENIED or refused else "error"
    meta["duration_ms"] = duration_ms
    if waited:
        meta["approval_wait_ms"] = approval_wait_ms
    decision_dict = decision.to_dict()
    meta["decision"] = {
        "action": decision.action,
        "rule": decision.rule,
        "approved_by": decision.approved_by,
        "tier": str(decision.tier),
        "mode": decision.mode,
    }
    try:
        gateway.audit.record_result(
            call_id=call_id,
            run_id=run_id,
            status=status,
            output_json=data_json,
            error_json=canonical_json(error.to_dict()) if error is not None else None,
            decision=decision_dict,
            started_at=started_at,
            ended_at=utc_now(),
            duration_ms=duration_ms,
            input_hash=content_hash({"tool": tool_id, "args": args}),
            output_hash=_sha256(data_json) if data_json is not None else None,
            workspace=gateway.workspace.name,
            tier=str(decision.tier),  # the tier the decision used (arguments may raise it)
        )
    except Exception as exc:  # the result still reaches the caller, flagged
        meta["audit_error"] = str(exc)[:300]
    if transcript is not None:
        _append_transcript(transcript, result, request, duration_ms)
    if cancelled is not None:
        raise cancelled
    return result


def _sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _gateway_decision(
    gateway: ToolGateway, spec: ToolSpec | None, tool_id: str, rule: str, reason: str
) -> PolicyDecision:
    tier = spec.tier if spec is not None else RiskTier.READ_ONLY
    return PolicyDecision("deny", rule, reason, str(tool_id), tier, gateway.mode, "InternalError")


async def _decide_and_dispatch(
    gateway: ToolGateway,
    spec: ToolSpec | None,
    request: ToolCallRequest,
    call_id: str,
    approver: Approver | None,
) -> tuple[PolicyDecision, ToolOutput | None, ToolError | None]:
    tool_id = request.tool_id
    args = request.args
    decision: PolicyDecision
    output: ToolOutput | None = None
    error: ToolError | None = None
    if spec is None:
        decision = PolicyDecision(
            "deny",
            "registry.unknown_tool",
            f"no tool {tool_id!r} is registered",
            str(tool_id),
            RiskTier.READ_ONLY,
            gateway.mode,
            "NotFound",
        )
        error = ToolError(ErrorType.NOT_FOUND, decision.reason, False, {"rule": decision.rule})
    else:
        problem = _schema_problem(gateway.registry, spec, args)
        if problem is not None:
            decision = PolicyDecision("deny", "input.schema", problem, tool_id, spec.tier, gateway.mode, "InvalidInput")
            error = ToolError(ErrorType.INVALID_INPUT, problem, False, {"rule": "input.schema"})
        else:
            decision = gateway.bound.evaluate(spec, args)
            if decision.action == "confirm":
                decision, error = await _approval(gateway, spec, call_id, args, decision, approver, request)
            elif decision.action == "deny":
                kind = ErrorType(decision.error_type or "PolicyDenied")
                error = ToolError(kind, decision.reason, False, {"rule": decision.rule, **decision.facts})
            if error is None:
                ctx = _context(gateway, spec, call_id, decision)
                try:
                    value = await _call(
                        spec, spec.handler, spec.is_async, ctx, args, float(gateway.bound.limits.tool_timeout_s)
                    )
                    if not isinstance(value, ToolOutput):
                        raise TypeError(f"{tool_id} returned {type(value).__name__}, not ToolOutput")
                    output = value
                except TimeoutError:
                    error = ToolError(
                        ErrorType.TIMEOUT,
                        f"{tool_id} did not finish within {gateway.bound.limits.tool_timeout_s:g} s",
                        True,
                        {},
                    )
                except Exception as exc:  # every failure becomes a typed result
                    error = error_from_exception(exc)

    return decision, output, error


async def _approval(
    gateway: ToolGateway,
    spec: ToolSpec,
    call_id: str,
    args: dict[str, Any],
    decision: PolicyDecision,
    approver: Approver | None,
    call: ToolCallRequest,
) -> tuple[PolicyDecision, ToolError | None]:
    pattern = session_pattern(spec, decision.facts)
    key = (spec.tool_id, canonical_json(pattern))
    if key in gateway._grants:
        decision.approved_by = "operator_session"
        decision.facts = {**decision.facts, "session_pattern": pattern}
        return decision, None
    approver = approver or gateway.approver
    policy_rule = decision.rule
    if approver is None:
        denied = PolicyDecision(
            "deny",
            "approval.no_approver",
            f"{decision.reason}, and no approver is available",
            spec.tool_id,
            decision.tier,
            decision.mode,
            "PolicyDenied",
            {**decision.facts, "policy_rule": policy_rule},
        )
        return denied, ToolError(
            ErrorType.POLICY_DENIED, denied.reason, False, {"rule": denied.rule, "policy_rule": policy_rule}
        )
    preview = await _preview(gateway, spec, call_id, args, decision)
    request = ApprovalRequest(
        call_id,
        spec.tool_id,
        decision.tier,
        args,
        decision,
        preview,
        pattern,
        spec.description,
        call.source,
        call.origin(),
    )
    try:
        answer = await _ask(approver, request)
    except Exception as exc:  # a broken approver denies
        answer = ApprovalDecision.deny(f"the approver failed: {type(exc).__name__}: {exc}")
    if answer.choice is ApprovalChoice.APPROVE_ONCE:
        decision.approved_by = "operator_once"
        return decision, None
    if answer.choice is ApprovalChoice.APPROVE_SESSION:
        gateway._grants[key] = pattern
        decision.approved_by = "operator_session"
        decision.facts = {**decision.facts, "session_pattern": pattern}
        return decision, None
    reason = f"denied by the operator: {answer.reason}" if answer.reason else "denied by the operator"
    denied = PolicyDecision(
        "deny",
        "approval.operator_denied",
        reason,
        spec.tool_id,
        decision.tier,
        decision.mode,
        "PolicyDenied",
        {**decision.facts, "policy_rule": policy_rule},
    )
    return denied, ToolError(
        ErrorType.POLICY_DENIED,
        reason,
        False,
        {"rule": denied.rule, "policy_rule": policy_rule, "operator_reason": answer.reason},
    )


def _summary(result: ToolResult, tool_id: str) -> str:
    if result.ok:
        return f"{tool_id}: ok"
    assert result.error is not None
    rule = result.error.details.get("rule")
    suffix = f" (rule {rule})" if rule else ""
    return f"{tool_id}: {result.error.type}: {result.error.message}{suffix}"[:1000]


_TRANSCRIPT_OUTPUT_CAP = 1_000_000


def _append_transcript(recorder: Recorder, result: ToolResult, request: ToolCallRequest, duration_ms: float) -> None:
    from services.conversation import Conversation, ToolCallRecord

    conversation = recorder if isinstance(recorder, Conversation) else Conversation(recorder)
    output = result.to_dict()
    if len(canonical_json(output)) > _TRANSCRIPT_OUTPUT_CAP:
        output = {**output, "data": {"omitted": "too large for the transcript; see the audit store"}}
    event = ToolCallRecord(
        tool_id=request.tool_id,
        input=request.args,
        output=output,
        ok=result.ok,
        duration_ms=duration_ms,
        call_id=result.meta.get("call_id"),
        summary=_summary(result, request.tool_id),
        tool_call_id=request.tool_call_id,
        source=request.source,
        turn_id=request.turn_id,
        step=request.turn_step,
    )
    try:
        conversation.record(event)
    except AriesError as exc:
        result.meta["transcript_error"] = exc.message
    except OSError as exc:  # the call happened and is audited; the transcript could not take it
        result.meta["transcript_error"] = f"{type(exc).__name__}: {exc}"


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


__all__ = [
    "ApprovalChoice",
    "ApprovalDecision",
    "ApprovalRequest",
    "Approver",
    "ToolCallRequest",
    "ToolGateway",
    "ToolResult",
    "approve_all",
    "deny_all",
    "execute_tool_call_with_policy",
    "execute_tool_call_with_policy_sync",
]
