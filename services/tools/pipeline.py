"""The pipeline of one governed call: ``run_call(site, request)``, run for the gateway by
``services.tools.site.execute_tool_call_with_policy``.

``CallSite`` is what the call needs of the gateway that runs it, taken once when the call starts:
the workspace, the registry, the bound policy, the audit store and run, the session grants, the
approver, the backends, and the gateway's step counter and run bookkeeping.  In order:

1. record the call in the audit store (no record, no call: a failing audit store fails closed);
2. look the tool up and validate the arguments against its input schema (``InvalidInput``);
3. evaluate the policy (``deny`` becomes a structured ``PolicyDenied`` result, with its rule),
   then run the policy's matching ``before`` hooks (``services.tools.hooks``: one that denies or
   fails makes the call a ``PolicyDenied`` result, rule ``hooks.before.<id>``);
4. when the policy says ``confirm``: reuse a session grant for the same tool and argument
   pattern, or a lasting grant of the workspace whose pattern covers the call (``services.grants``;
   not in strict mode), or ask the approver (approve once / for the session / always in this
   workspace / deny with a reason); a call read from the model's text (``request.from_text``)
   neither uses nor leaves a grant;
5. dispatch with a one-call capability (sync tools in a worker thread, with a time limit and the
   call's cancel token); the tool receives its validated argument model (``ToolSpec.parse``);
   then the matching ``after`` hooks (their failures reported, their output optionally kept as
   untrusted context for the model: ``meta.hooks``, ``meta.hook_context``);
6. record the result, the decision, the matched rule and who approved; record the conversation's
   tool-call event when a recorder is given.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.clock import monotonic, utc_now
from services.errors import InvalidInput
from services.hashing import canonical_json, content_hash, sha256_tagged
from services.policy import PolicyDecision, RiskTier
from services.tools.calls import (
    ApprovalChoice,
    ApprovalDecision,
    ApprovalRequest,
    Approver,
    ToolCallRequest,
    new_id,
)
from services.tools.hooks import HookCall, HookLog, run_after, run_before
from services.tools.records import parse_arguments, record_tool_call
from services.tools.registry import ToolContext, ToolRegistry, ToolSpec, issue_capability, revoke_capability
from services.tools.results import ErrorType, ToolError, ToolOutput, ToolResult, error_from_exception

if TYPE_CHECKING:
    from services.audit.log import AuditStore
    from services.conversation import Conversation
    from services.grants.store import GrantStore
    from services.policy import BoundPolicy
    from services.tools.processes import ProcessManager
    from services.workspace.manager import Workspace
    from services.workspace.transcripts import Transcript

    Recorder = Conversation | Transcript

Grants = dict[tuple[str, str], dict[str, Any]]
"""Session grants: (tool id, canonical pattern) → the pattern "approve for session" covered."""


@dataclass(frozen=True)
class CallSite:
    """What one call needs of the gateway that runs it, taken when the call starts (a policy or
    mode change while it waits for approval applies to the calls that come next)."""

    workspace: Workspace
    registry: ToolRegistry
    bound: BoundPolicy
    audit: AuditStore
    run_id: str
    approver: Approver | None
    grants: Grants  # the gateway's own dict: an "approve for session" answer adds to it
    backends: Mapping[str, Any]
    check_outputs: bool
    processes: Callable[[], ProcessManager]  # the gateway's process manager, made on first use
    next_step: Callable[[], int]
    ensure_run: Callable[[str], None]
    lasting: GrantStore | None = None  # the workspace's lasting grants (None: ephemeral, nothing lasts)

    @property
    def mode(self) -> str:
        return self.bound.mode


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


async def _call(spec: ToolSpec, handler: Any, is_async: bool, ctx: ToolContext, parsed: Any, timeout: float) -> Any:
    """Run ``handler`` (the tool or its preview) on the parsed arguments, with a one-call capability."""
    cap = issue_capability(spec.tool_id, ctx.call_id)
    try:
        if is_async:
            return await asyncio.wait_for(handler(cap, ctx, parsed), timeout)
        return await asyncio.wait_for(asyncio.to_thread(handler, cap, ctx, parsed), timeout)
    finally:
        # Timed out, cancelled or done: a tool still working in a thread sees it and stops.
        ctx.cancel.set()
        revoke_capability(cap)


def _context(site: CallSite, spec: ToolSpec, call_id: str, decision: PolicyDecision) -> ToolContext:
    timeout = float(site.bound.limits.tool_timeout_s)
    return ToolContext(
        call_id=call_id,
        tool_id=spec.tool_id,
        policy=site.bound,
        workspace=site.workspace,
        processes=site.processes() if spec.tool_class == "shell" else None,
        facts=decision.facts,
        deadline=time.monotonic() + timeout,
        backends=site.backends,
    )


async def preview_call(
    site: CallSite, spec: ToolSpec, call_id: str, parsed: Any, decision: PolicyDecision
) -> dict[str, Any] | None:
    """The approval preview of a call (e.g. the diff a write would make), on its parsed arguments
    (``services.tools.records.parse_arguments``)."""
    if spec.preview is None:
        return None
    ctx = _context(site, spec, call_id, decision)
    try:
        value = await _call(spec, spec.preview, spec.preview_is_async, ctx, parsed, 30.0)
    except Exception as exc:  # a failing preview must not block the approval
        return {"kind": "error", "note": error_from_exception(exc).message}
    return dict(value) if isinstance(value, dict) else None


# Seconds this call spent waiting for the operator; kept out of ``duration_ms`` (the work itself).
_APPROVAL_WAIT: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("approval_wait", default=None)


async def _ask(approver: Approver, request: ApprovalRequest) -> ApprovalDecision:
    asked = monotonic()
    try:
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = await answer
    finally:
        waited = _APPROVAL_WAIT.get()
        if waited is not None:
            waited.append(monotonic() - asked)
    if not isinstance(answer, ApprovalDecision):
        return ApprovalDecision.deny(f"the approver returned {type(answer).__name__}, not a decision")
    return answer


async def run_call(
    site: CallSite,
    request: ToolCallRequest,
    *,
    approver: Approver | None = None,
    transcript: Recorder | None = None,
) -> ToolResult:
    """Validate, evaluate the policy, ask for approval, dispatch, record. Never raises for a
    tool's failure or a denial: those come back as structured error results."""
    started_mono = monotonic()
    started_at = utc_now()
    waited: list[float] = []
    _APPROVAL_WAIT.set(waited)
    call_id = request.call_id or new_id("call")
    run_id = request.run_id or site.run_id
    tool_id = request.tool_id
    step = request.step_index if request.step_index is not None else site.next_step()
    if site.registry.lazy and isinstance(tool_id, str) and tool_id not in site.registry:
        await asyncio.to_thread(site.registry.load_for, tool_id)  # an MCP server starts on first use
    spec: ToolSpec | None = site.registry.get(tool_id) if tool_id in site.registry else None
    refused = _record_call(site, spec, request, call_id, run_id, step, started_at)
    if refused is not None:
        return refused

    cancelled: BaseException | None = None
    hooks = HookLog()
    try:
        decision, output, error = await _decide_and_dispatch(site, spec, request, call_id, approver, hooks)
    except asyncio.CancelledError as exc:  # recorded, then passed on
        cancelled = exc
        decision = _gateway_decision(site, spec, tool_id, "gateway.cancelled", "the call was cancelled")
        decision.error_type = "Cancelled"
        output, error = None, ToolError(ErrorType.CANCELLED, decision.reason, True, {"rule": decision.rule})
    except Exception as exc:  # a gateway bug still yields a recorded, typed result
        decision = _gateway_decision(site, spec, tool_id, "gateway.error", f"{type(exc).__name__}: {exc}")
        output, error = None, ToolError(ErrorType.INTERNAL_ERROR, decision.reason[:500], False, {"rule": decision.rule})

    approval_wait_ms = round(sum(waited) * 1000, 3)
    duration_ms = round((monotonic() - started_mono) * 1000 - approval_wait_ms, 3)
    result, status, data_json = _result(site, spec, call_id, tool_id, decision, output, error)
    hooks.annotate(result.meta)
    result.meta["duration_ms"] = duration_ms
    if waited:
        result.meta["approval_wait_ms"] = approval_wait_ms
    result.meta["decision"] = {
        "action": decision.action,
        "rule": decision.rule,
        "approved_by": decision.approved_by,
        "tier": str(decision.tier),
        "mode": decision.mode,
    }
    _record_result(site, request, result, decision, status, data_json, run_id, started_at, duration_ms)
    if transcript is not None:
        record_tool_call(transcript, result, request, duration_ms)
        hooks.notify(transcript)
    if cancelled is not None:
        raise cancelled
    return result


def _record_call(
    site: CallSite,
    spec: ToolSpec | None,
    request: ToolCallRequest,
    call_id: str,
    run_id: str,
    step: int,
    started_at: str,
) -> ToolResult | None:
    """Step 1: the audit row of the call, before anything runs; a failing audit store fails closed
    (the returned result)."""
    try:
        site.ensure_run(run_id)
        site.audit.record_call(
            call_id=call_id,
            run_id=run_id,
            step_index=step,
            tool_name=str(request.tool_id),
            args=request.args,
            created_at=started_at,
            source=request.source,
            tier=str(spec.tier) if spec else None,
        )
    except Exception as exc:  # fail closed: a call that cannot be recorded does not run
        meta = {"call_id": call_id, "tool_id": request.tool_id, "duration_ms": 0.0, "bytes": 0, "truncated": False}
        return ToolResult.failure(
            ErrorType.INTERNAL_ERROR, f"the audit store refused the call record: {exc}", meta=meta
        )
    return None


def _result(
    site: CallSite,
    spec: ToolSpec | None,
    call_id: str,
    tool_id: str,
    decision: PolicyDecision,
    output: ToolOutput | None,
    error: ToolError | None,
) -> tuple[ToolResult, str, str | None]:
    """The call's result (its meta without the timing and the decision yet), its audit status, and
    the canonical JSON of its output (``None`` for an error)."""
    meta: dict[str, Any] = {"call_id": call_id, "tool_id": tool_id}
    if output is not None:
        data_json = canonical_json(output.data)
        if site.check_outputs and spec is not None:
            from jsonschema import Draft202012Validator

            Draft202012Validator(spec.output_schema).validate(output.data)
        meta.update(output.meta)
        meta.setdefault("bytes", len(data_json))
        meta.setdefault("truncated", False)
        return ToolResult("ok", output.data, None, meta), "success", data_json
    assert error is not None
    meta.setdefault("bytes", 0)
    meta.setdefault("truncated", False)
    refused = decision.action == "deny" and decision.error_type not in ("InternalError", "Cancelled")
    status = "denied" if error.type is ErrorType.POLICY_DENIED or refused else "error"
    return ToolResult("error", None, error, meta), status, None


def _record_result(
    site: CallSite,
    request: ToolCallRequest,
    result: ToolResult,
    decision: PolicyDecision,
    status: str,
    data_json: str | None,
    run_id: str,
    started_at: str,
    duration_ms: float,
) -> None:
    """The audit row of the outcome; a failing audit store flags the result (``audit_error``)."""
    error = result.error
    try:
        site.audit.record_result(
            call_id=str(result.meta["call_id"]),
            run_id=run_id,
            status=status,
            output_json=data_json,
            error_json=canonical_json(error.to_dict()) if error is not None else None,
            decision=decision.to_dict(),
            started_at=started_at,
            ended_at=utc_now(),
            duration_ms=duration_ms,
            input_hash=content_hash({"tool": request.tool_id, "args": request.args}),
            output_hash=sha256_tagged(data_json) if data_json is not None else None,
            workspace=site.workspace.name,
            tier=str(decision.tier),  # the tier the decision used (arguments may raise it)
            artifacts=result.meta.get("artifacts") or None,  # links to what the call stored (snapshots.py)
        )
    except Exception as exc:  # the result still reaches the caller, flagged
        result.meta["audit_error"] = str(exc)[:300]


def _gateway_decision(site: CallSite, spec: ToolSpec | None, tool_id: str, rule: str, reason: str) -> PolicyDecision:
    tier = spec.tier if spec is not None else RiskTier.READ_ONLY
    return PolicyDecision("deny", rule, reason, str(tool_id), tier, site.mode, "InternalError")


async def _decide_and_dispatch(
    site: CallSite,
    spec: ToolSpec | None,
    request: ToolCallRequest,
    call_id: str,
    approver: Approver | None,
    hooks: HookLog,
) -> tuple[PolicyDecision, ToolOutput | None, ToolError | None]:
    """Steps 2 to 5: the arguments validated once into the tool's model, the policy's decision on
    them, the before hooks (``services.tools.hooks``), the approval it may need, the dispatch of the
    tool with them, and the after hooks."""
    tool_id = request.tool_id
    if spec is None:
        return _unknown_tool(site, tool_id)
    try:
        parsed = parse_arguments(site.registry, spec, request.args)
    except InvalidInput as exc:
        decision = PolicyDecision("deny", "input.schema", exc.message, tool_id, spec.tier, site.mode, "InvalidInput")
        return decision, None, ToolError(ErrorType.INVALID_INPUT, exc.message, False, {"rule": "input.schema"})
    decision = site.bound.evaluate(spec, parsed, from_text=request.from_text)
    if request.only is not None and tool_id not in request.only[1] and decision.action != "deny":
        name = request.only[0]
        reason = f"tool {tool_id} is not among the tools of the workspace command /{name}"
        decision = PolicyDecision("deny", f"command.{name}", reason, tool_id, spec.tier, site.mode, "PolicyDenied")
    if request.from_text:  # said on the audit row's decision
        decision.facts = {**decision.facts, "from_text": True}
    error: ToolError | None = None
    call = HookCall(tool_id, request.args, call_id, request.run_id or site.run_id, request.source)
    if decision.action != "deny":
        refused = await run_before(site, call, decision, hooks)
        if refused is not None:
            return refused[0], None, refused[1]
    if decision.action == "confirm":
        decision, error = await _approval(site, spec, call_id, parsed, decision, approver, request)
    elif decision.action == "deny":
        kind = ErrorType(decision.error_type or "PolicyDenied")
        error = ToolError(kind, decision.reason, False, {"rule": decision.rule, **decision.facts})
    if error is not None:
        return decision, None, error
    output, error = await _dispatch(site, spec, call_id, parsed, decision)
    ran = {"status": "ok" if output is not None else "error", "data": output.data if output is not None else None}
    await run_after(site, call, {**ran, "error": error.to_dict() if error is not None else None}, hooks)
    return decision, output, error


def _unknown_tool(site: CallSite, tool_id: str) -> tuple[PolicyDecision, None, ToolError]:
    why = site.registry.missing_reason(tool_id)  # e.g. its MCP server failed to start
    decision = PolicyDecision(
        "deny",
        "registry.unknown_tool" if why is None else "registry.provider_failed",
        f"no tool {tool_id!r} is registered" if why is None else f"{tool_id} is unavailable: {why}",
        str(tool_id),
        RiskTier.READ_ONLY,
        site.mode,
        "NotFound" if why is None else "InternalError",
    )
    kind = ErrorType.NOT_FOUND if why is None else ErrorType.INTERNAL_ERROR
    return decision, None, ToolError(kind, decision.reason, why is not None, {"rule": decision.rule})


async def _dispatch(
    site: CallSite, spec: ToolSpec, call_id: str, parsed: Any, decision: PolicyDecision
) -> tuple[ToolOutput | None, ToolError | None]:
    """Run the tool on its parsed arguments; every failure becomes a typed error."""
    ctx = _context(site, spec, call_id, decision)
    timeout = float(site.bound.limits.tool_timeout_s)
    try:
        value = await _call(spec, spec.handler, spec.is_async, ctx, parsed, timeout)
        if not isinstance(value, ToolOutput):
            raise TypeError(f"{spec.tool_id} returned {type(value).__name__}, not ToolOutput")
        return value, None
    except TimeoutError:
        message = f"{spec.tool_id} did not finish within {site.bound.limits.tool_timeout_s:g} s"
        return None, ToolError(ErrorType.TIMEOUT, message, True, {})
    except Exception as exc:  # every failure becomes a typed result
        return None, error_from_exception(exc)


def session_grant_id(tool_id: str, key: str) -> str:
    """A session grant's id, in the same space as lasting grants' (``g`` and 6 hex digits)."""
    return "g" + sha256_tagged(f"{tool_id}\0{key}").rsplit(":", 1)[-1][:6]


async def _granted(
    site: CallSite, spec: ToolSpec, decision: PolicyDecision, call: ToolCallRequest, key: tuple[str, str]
) -> PolicyDecision | None:
    """The decision approved by a session grant or a lasting grant that covers the call (None: none)."""
    if call.from_text:  # a call read from text is never approved by a grant
        return None
    if key in site.grants:
        decision.approved_by = "operator_session"
        grant = {"id": session_grant_id(*key), "scope": "session"}
        decision.facts = {**decision.facts, "session_pattern": site.grants[key], "grant": grant}
        return decision
    if site.lasting is None or decision.mode == "strict" or not isinstance(call.args, dict):
        return None
    from services.errors import ConfigError
    from services.grants.pattern import words

    store = site.lasting
    try:
        found = await asyncio.to_thread(store.find, spec.tool_id, decision.facts, call.args, site.bound.roots)
        if found is not None:
            await asyncio.to_thread(store.used, found.grant.id)
    except ConfigError as exc:  # an unreadable store grants nothing; the operator is asked
        decision.facts = {**decision.facts, "grants_unreadable": exc.message}
        return None
    if found is None:
        return None
    decision.approved_by = "operator_grant"
    grant = {"id": found.grant.id, "scope": "workspace", "pattern": words(found.grant.pattern), "why": found.reason}
    decision.facts = {**decision.facts, "grant": grant}
    return decision


def _proposal(site: CallSite, spec: ToolSpec, decision: PolicyDecision, call: ToolCallRequest) -> Any:
    """What "always in this workspace" would store for this call, with how each choice would combine
    with the workspace's grants into running code unasked (None: not offered)."""
    if site.lasting is None or call.from_text or decision.mode == "strict" or not isinstance(call.args, dict):
        return None
    from dataclasses import replace

    from services.errors import ConfigError
    from services.grants.proposal import propose
    from services.grants.store import combined_warning

    proposal = propose(spec.tool_id, decision.facts, call.args, site.bound.roots)
    if proposal is None:
        return None
    try:
        existing = site.lasting.list()
    except ConfigError:
        return None  # an unreadable store: nothing can be stored either
    warnings = tuple(combined_warning(spec.tool_id, choice, existing) for choice in proposal.choices)
    return replace(proposal, warnings=warnings)


async def _keep_always(
    site: CallSite, spec: ToolSpec, decision: PolicyDecision, call: ToolCallRequest, call_id: str, pattern: Any
) -> PolicyDecision:
    """Store the lasting grant the operator chose (one of the request's proposal), then approve."""
    from services.grants.matcher import matches
    from services.grants.pattern import words
    from services.settings.operator import GrantOrigin, GrantPattern

    if site.lasting is None or not isinstance(pattern, GrantPattern) or not isinstance(call.args, dict):
        decision.approved_by = "operator_once"
        decision.facts = {**decision.facts, "lasting_grant": "not kept: no grant can be stored for this call"}
        return decision
    if not matches(pattern, decision.facts, call.args, site.bound.roots):
        decision.approved_by = "operator_once"  # a pattern that does not cover the call is never stored
        decision.facts = {**decision.facts, "lasting_grant": "not kept: the pattern does not cover the call"}
        return decision
    from services.errors import ConfigError

    asked_by = call.source + (f" ({call.model})" if call.model else "")
    origin = GrantOrigin(by="approval", at=utc_now(), call_id=call_id, asked_by=asked_by)
    try:
        grant = await asyncio.to_thread(site.lasting.add, spec.tool_id, pattern, origin)
    except ConfigError as exc:  # the store does not read (or is locked): the call runs, nothing is kept
        decision.approved_by = "operator_once"
        decision.facts = {**decision.facts, "lasting_grant": f"not kept: {exc.message}"}
        return decision
    decision.approved_by = "operator_always"
    decision.facts = {**decision.facts, "grant": {"id": grant.id, "scope": "workspace", "pattern": words(pattern)}}
    return decision


async def _approval(
    site: CallSite,
    spec: ToolSpec,
    call_id: str,
    parsed: Any,
    decision: PolicyDecision,
    approver: Approver | None,
    call: ToolCallRequest,
) -> tuple[PolicyDecision, ToolError | None]:
    pattern = session_pattern(spec, decision.facts)
    key = (spec.tool_id, canonical_json(pattern))
    granted = await _granted(site, spec, decision, call, key)
    if granted is not None:
        return granted, None
    approver = approver or site.approver
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
    preview = await preview_call(site, spec, call_id, parsed, decision)
    request = ApprovalRequest(
        call_id,
        spec.tool_id,
        decision.tier,
        call.args,
        decision,
        preview,
        pattern,
        spec.description,
        call.source,
        call.origin(),
        _proposal(site, spec, decision, call),
    )
    try:
        answer = await _ask(approver, request)
    except Exception as exc:  # a broken approver denies
        answer = ApprovalDecision.deny(f"the approver failed: {type(exc).__name__}: {exc}")
    if answer.choice is ApprovalChoice.APPROVE_ONCE:
        decision.approved_by = "operator_once"
        return decision, None
    if answer.choice in (ApprovalChoice.APPROVE_SESSION, ApprovalChoice.APPROVE_ALWAYS) and call.from_text:
        decision.approved_by = "operator_once"  # no lasting grant comes from a call read from text
        decision.facts = {**decision.facts, "session_grant": "not kept: the call was read from the model's text"}
        return decision, None
    if answer.choice is ApprovalChoice.APPROVE_SESSION:
        site.grants[key] = pattern
        decision.approved_by = "operator_session"
        grant = {"id": session_grant_id(*key), "scope": "session"}
        decision.facts = {**decision.facts, "session_pattern": pattern, "grant": grant}
        return decision, None
    if answer.choice is ApprovalChoice.APPROVE_ALWAYS:
        return await _keep_always(site, spec, decision, call, call_id, answer.pattern), None
    return _operator_denied(spec, decision, answer, policy_rule)


def _operator_denied(
    spec: ToolSpec, decision: PolicyDecision, answer: ApprovalDecision, policy_rule: str
) -> tuple[PolicyDecision, ToolError]:
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


__all__ = ["CallSite", "Grants", "preview_call", "run_call", "session_grant_id", "session_pattern"]
