"""The gateway: the only way in, approvals, structured denials, failures, audit and transcript."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import MISSING, BaseModel, ConfigDict, model_validator

from services.errors import InvalidInput
from services.policy import PathUse, RiskTier
from services.policy.model import ToolPermissionDenied
from services.tools import fs
from services.tools.args import ARGS_MODELS, ToolArgs
from services.tools.builtin import BuiltinProvider, default_registry
from services.tools.calls import ApprovalDecision, ApprovalRequest, ToolCallRequest, deny_all
from services.tools.gateway import ToolGateway, execute_tool_call_with_policy, execute_tool_call_with_policy_sync
from services.tools.registry import (
    Capability,
    ToolContext,
    ToolRegistry,
    ToolSpec,
    issue_capability,
    revoke_capability,
    tool,
)
from services.tools.results import ToolOutput
from services.tools.schemas import schema_of
from tests.tools.conftest import Sandbox, make_policy, policy_data

pytestmark = pytest.mark.timeout(60)


class Recorder:
    """An approver that answers from a script and remembers what it was asked."""

    def __init__(self, *answers: ApprovalDecision) -> None:
        self.answers = list(answers)
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        return self.answers.pop(0) if self.answers else ApprovalDecision.deny("script exhausted")


# -- the only way in ------------------------------------------------------------------------------
def test_tool_functions_refuse_to_run_without_the_gateway(sandbox: Sandbox, gateway: ToolGateway) -> None:
    ctx = ToolContext("call-x", "builtin:fs:read_text", gateway.bound, sandbox.workspace, None)
    args = {"path": "hello.txt"}
    spec = default_registry().get("builtin:fs:read_text")
    with pytest.raises(TypeError):
        fs.read_text(ctx, args)  # type: ignore[call-arg, arg-type]
    with pytest.raises(ToolPermissionDenied):
        fs.read_text(None, ctx, args)  # type: ignore[arg-type]
    with pytest.raises(ToolPermissionDenied):
        spec.handler(Capability("builtin:fs:read_text", "call-x", "forged"), ctx, args)
    other = issue_capability("builtin:fs:list_dir", "call-x")  # live, but for another tool
    try:
        with pytest.raises(ToolPermissionDenied):
            spec.handler(other, ctx, args)
    finally:
        revoke_capability(other)
    stale = issue_capability("builtin:fs:read_text", "call-x")
    revoke_capability(stale)  # what a finished call leaves behind
    with pytest.raises(ToolPermissionDenied):
        spec.handler(stale, ctx, args)
    wrong_call = issue_capability("builtin:fs:read_text", "call-y")  # live, right tool, other call's context
    try:
        with pytest.raises(ToolPermissionDenied):
            spec.handler(wrong_call, ctx, args)
    finally:
        revoke_capability(wrong_call)
    write = default_registry().get("builtin:fs:write_text")
    assert write.preview is not None
    with pytest.raises(ToolPermissionDenied):
        write.preview(None, ctx, {"path": "x.txt", "text": "y"})  # type: ignore[arg-type]


def test_every_registered_handler_is_guarded(sandbox: Sandbox, gateway: ToolGateway) -> None:
    for spec in default_registry().list():
        ctx = ToolContext("c", spec.tool_id, gateway.bound, sandbox.workspace, None)
        with pytest.raises(ToolPermissionDenied):
            outcome = spec.handler(None, ctx, {})  # type: ignore[arg-type]
            if asyncio.iscoroutine(outcome):
                asyncio.run(outcome)


def test_the_gateway_runs_what_direct_calls_cannot(gateway: ToolGateway) -> None:
    result = gateway.execute_sync("builtin:fs:read_text", {"path": "hello.txt"})
    assert result.ok and result.data is not None and result.data["text"].startswith("hello")


# -- validation and lookup -----------------------------------------------------------------------
def test_unknown_tool_is_a_structured_not_found(gateway: ToolGateway) -> None:
    result = gateway.execute_sync("builtin:fs:format_disk", {})
    assert result.error is not None and result.error.type == "NotFound"
    row = gateway.audit.last_decision()
    assert row is not None and row["rule_id"] == "registry.unknown_tool" and row["status"] == "denied"


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"path": 5},
        {"path": "hello.txt", "unexpected": True},
        {"path": "hello.txt", "max_bytes": 0},
        ["not", "an", "object"],
        None,
    ],
)
def test_schema_violations_are_invalid_input(args: Any, gateway: ToolGateway) -> None:
    result = gateway.execute_sync("builtin:fs:read_text", args)
    assert result.error is not None and result.error.type == "InvalidInput"
    assert result.error.details["rule"] == "input.schema"
    assert gateway.audit.last_decision()["rule_id"] == "input.schema"  # type: ignore[index]


# -- approvals ------------------------------------------------------------------------------------
def test_approve_once_asks_every_time(gateway_factory: Callable[..., ToolGateway]) -> None:
    approver = Recorder(ApprovalDecision.once(), ApprovalDecision.once())
    gateway = gateway_factory(approver=approver)
    for i in range(2):
        result = gateway.execute_sync("builtin:fs:write_text", {"path": "a.txt", "text": f"v{i}"})
        assert result.ok
        assert result.meta["decision"]["approved_by"] == "operator_once"
    assert len(approver.requests) == 2
    request = approver.requests[0]
    assert request.tool_id == "builtin:fs:write_text" and request.tier is RiskTier.WRITE_DESTRUCTIVE
    assert request.decision.action == "confirm" and request.decision.rule == "mode.guide.requires_approval"
    assert request.preview is not None and request.preview["kind"] == "diff"
    assert "+v0" in request.preview["diff"]
    assert request.session_pattern == {"paths": [str(gateway.bound.roots[0] / "a.txt")]}


def test_approve_for_session_covers_the_same_pattern_only(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    approver = Recorder(ApprovalDecision.session(), ApprovalDecision.deny("not that one"))
    gateway = gateway_factory(approver=approver)
    first = gateway.execute_sync("builtin:fs:write_text", {"path": "a.txt", "text": "1"})
    again = gateway.execute_sync("builtin:fs:write_text", {"path": "a.txt", "text": "2"})
    other = gateway.execute_sync("builtin:fs:write_text", {"path": "b.txt", "text": "3"})
    assert first.ok and again.ok
    assert again.meta["decision"]["approved_by"] == "operator_session"
    assert len(approver.requests) == 2  # asked for a.txt once, then for b.txt
    assert other.error is not None and other.error.type == "PolicyDenied"
    assert other.error.details["rule"] == "approval.operator_denied"
    assert other.error.details["policy_rule"] == "mode.guide.requires_approval"
    assert other.error.details["operator_reason"] == "not that one"
    assert (sandbox.root / "a.txt").read_text() == "2" and not (sandbox.root / "b.txt").exists()
    assert [{k: g[k] for k in ("scope", "tool_id", "pattern")} for g in gateway.grants()] == [
        {"scope": "session", "tool_id": "builtin:fs:write_text", "pattern": {"paths": [str(sandbox.root / "a.txt")]}}
    ]
    gateway.revoke_grants()
    assert gateway.grants() == []


def test_shell_session_grant_is_per_executable(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    approver = Recorder(ApprovalDecision.session(), ApprovalDecision.once())
    gateway = gateway_factory(approver=approver)
    assert gateway.execute_sync("builtin:shell:run", {"argv": ["echo", "a"]}).ok
    assert gateway.execute_sync("builtin:shell:run", {"argv": ["echo", "b", "c"]}).ok
    assert gateway.execute_sync("builtin:shell:run", {"argv": ["true"]}).ok
    assert len(approver.requests) == 2
    assert approver.requests[0].preview is not None and approver.requests[0].preview["command"] == "echo a"


def test_no_approver_means_denied(gateway_factory: Callable[..., ToolGateway]) -> None:
    gateway = gateway_factory(approver=None)
    result = gateway.execute_sync("builtin:fs:write_text", {"path": "a.txt", "text": "x"})
    assert result.error is not None and result.error.type == "PolicyDenied"
    assert result.error.details["rule"] == "approval.no_approver"


def test_deny_all_and_broken_approvers_deny(gateway_factory: Callable[..., ToolGateway]) -> None:
    def broken(request: ApprovalRequest) -> ApprovalDecision:
        raise RuntimeError("modal crashed")

    def junk(request: ApprovalRequest) -> Any:
        return "yes please"

    for approver in (deny_all, broken, junk):
        gateway = gateway_factory(approver=approver)
        result = gateway.execute_sync("builtin:fs:write_text", {"path": "a.txt", "text": "x"})
        assert result.error is not None and result.error.type == "PolicyDenied", approver
        assert result.error.details["rule"] == "approval.operator_denied"


async def test_async_approver_and_async_execute(gateway_factory: Callable[..., ToolGateway]) -> None:
    asked: list[str] = []

    async def modal(request: ApprovalRequest) -> ApprovalDecision:
        await asyncio.sleep(0.01)
        asked.append(request.tool_id)
        return ApprovalDecision.once()

    gateway = gateway_factory(approver=None)
    result = await gateway.execute("builtin:fs:write_text", {"path": "a.txt", "text": "x"}, approver=modal)
    assert result.ok and asked == ["builtin:fs:write_text"]
    result = await execute_tool_call_with_policy(gateway, ToolCallRequest("builtin:fs:list_dir", {"path": "."}))
    assert result.ok
    with pytest.raises(RuntimeError):
        gateway.execute_sync("builtin:fs:list_dir", {})


async def test_time_waiting_for_the_operator_is_not_counted_as_work(
    gateway_factory: Callable[..., ToolGateway],
) -> None:
    async def slow_operator(request: ApprovalRequest) -> ApprovalDecision:
        await asyncio.sleep(0.3)
        return ApprovalDecision.once()

    gateway = gateway_factory(approver=None)
    result = await gateway.execute("builtin:fs:write_text", {"path": "w.txt", "text": "x"}, approver=slow_operator)
    assert result.ok
    assert result.meta["approval_wait_ms"] >= 300
    assert result.meta["duration_ms"] < result.meta["approval_wait_ms"]
    read = await gateway.execute("builtin:fs:read_text", {"path": "w.txt"})
    assert "approval_wait_ms" not in read.meta  # nobody was asked


async def test_a_cancelled_call_is_still_recorded(gateway_factory: Callable[..., ToolGateway]) -> None:
    waiting = asyncio.Event()

    async def never_answers(request: ApprovalRequest) -> ApprovalDecision:
        waiting.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    gateway = gateway_factory(approver=never_answers)
    task = asyncio.create_task(gateway.execute("builtin:fs:write_text", {"path": "a.txt", "text": "x"}))
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    row = gateway.audit.last_decision()
    assert row is not None and row["status"] == "error" and row["rule_id"] == "gateway.cancelled"


def test_sync_wrapper_function(gateway: ToolGateway) -> None:
    result = execute_tool_call_with_policy_sync(
        gateway, ToolCallRequest("builtin:fs:list_dir", {"path": "."}, source="plan", step_index=7)
    )
    assert result.ok
    call = gateway.audit.get_call(result.meta["call_id"])
    assert call is not None and call["step_index"] == 7 and call["source"] == "plan"


def test_preview_and_explain(sandbox: Sandbox, gateway: ToolGateway) -> None:
    preview = asyncio.run(gateway.preview("builtin:fs:write_text", {"path": "hello.txt", "text": "hello world\n"}))
    assert preview is not None and "-second line" in preview["diff"] and preview["creates"] is False
    assert asyncio.run(gateway.preview("builtin:fs:write_text", {"path": "../x", "text": ""})) is None
    decision = gateway.explain("builtin:fs:read_text", {"path": "../outside/secret.txt"})
    assert decision.action == "deny" and decision.rule == "fs.traversal"
    assert gateway.explain("builtin:fs:read_text", {"nope": 1}).rule == "input.schema"
    assert gateway.audit.calls() == []  # explain and preview record nothing


def test_preview_does_not_show_content_the_policy_hides(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    data = policy_data(sandbox.root)
    data["filesystem"]["deny"].append({"id": "secrets-read", "glob": "secrets/**", "ops": ["read"]})
    (sandbox.root / "secrets").mkdir()
    (sandbox.root / "secrets" / "notes.txt").write_text("classified\n")
    from services.policy import parse_policy

    gateway = gateway_factory(parse_policy(json.dumps(data)))
    preview = asyncio.run(gateway.preview("builtin:fs:write_text", {"path": "secrets/notes.txt", "text": "new"}))
    assert preview is not None and "classified" not in json.dumps(preview) and preview["note"]


# -- failures -------------------------------------------------------------------------------------
TEST_TOOLS: list[ToolSpec] = []


def _explode(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    raise RuntimeError("kaboom")


async def _sleepy(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    await asyncio.sleep(5)
    return ToolOutput({})


def _bad_return(ctx: ToolContext, args: dict[str, Any]) -> Any:
    return {"not": "a ToolOutput"}


def _invalid(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    raise InvalidInput("bad thing")


def _sabotage_audit(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    import sqlite3

    assert ctx.workspace is not None
    with sqlite3.connect(ctx.workspace.root / "audit.db") as conn:
        conn.execute("DROP TABLE tool_results")
    return ToolOutput({"sabotaged": True})


class AnyArgs(BaseModel):
    """Any object: a test tool that takes what it is given."""

    model_config = ConfigDict(extra="allow")


class EchoArgs(ToolArgs):
    """A test tool's arguments: what the tool sees of them is echoed back."""

    word: str
    times: int = 2
    tail: str | MISSING = MISSING


def _echo(ctx: ToolContext, args: EchoArgs) -> ToolOutput:
    return ToolOutput({"type": type(args).__name__, "seen": args.model_dump(), "tail_given": args.tail is not MISSING})


tool(
    "testprov:misc:echo",
    tier=RiskTier.READ_ONLY,
    description="echo",
    args=EchoArgs,
    output_schema={"type": "object"},
    registry=TEST_TOOLS,
    resources=lambda args: [] if isinstance(args, EchoArgs) else [PathUse("/not-a-model", "read", arg="x")],
)(_echo)


VALIDATED: list[str] = []
"""Every time a ``CountedArgs`` is validated: the word."""


class CountedArgs(ToolArgs):
    """A test tool's arguments that count how often they are validated."""

    word: str

    @model_validator(mode="after")
    def _counted(self) -> CountedArgs:
        VALIDATED.append(self.word)
        return self


def _counted_preview(ctx: ToolContext, args: CountedArgs) -> dict[str, Any]:
    assert isinstance(args, CountedArgs)
    return {"kind": "text", "note": f"would echo {args.word}"}


def _counted(ctx: ToolContext, args: CountedArgs) -> ToolOutput:
    assert isinstance(args, CountedArgs)
    return ToolOutput({"word": args.word})


tool(
    "testprov:misc:counted",
    tier=RiskTier.READ_ONLY,
    description="counted",
    args=CountedArgs,
    output_schema={"type": "object"},
    registry=TEST_TOOLS,
    resources=lambda args: [] if isinstance(args, CountedArgs) else [PathUse("/not-a-model", "read", arg="x")],
    tier_fn=lambda args, facts: RiskTier.READ_ONLY if isinstance(args, CountedArgs) else RiskTier.EXEC_PRIVILEGED,
    preview=_counted_preview,
)(_counted)


for _name, _impl in (
    ("explode", _explode),
    ("sleepy", _sleepy),
    ("bad_return", _bad_return),
    ("invalid", _invalid),
    ("sabotage_audit", _sabotage_audit),
):
    tool(
        f"testprov:misc:{_name}",
        tier=RiskTier.READ_ONLY,
        description=_name,
        args=AnyArgs,
        output_schema={"type": "object"},
        registry=TEST_TOOLS,
    )(_impl)


class TestProvider:
    name = "testprov"

    def tools(self) -> list[ToolSpec]:
        return list(TEST_TOOLS)


@pytest.fixture
def test_gateway(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> ToolGateway:
    registry = ToolRegistry([BuiltinProvider(), TestProvider()])
    data = policy_data(sandbox.root)
    data["providers"]["testprov"] = {"enabled": True}
    data["tool_classes"]["misc"] = "enabled"
    data["limits"]["tool_timeout_s"] = 0.3
    from services.policy import parse_policy

    return gateway_factory(parse_policy(json.dumps(data)), registry=registry)


def test_arguments_are_validated_once_per_call(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    """The policy (resources, tier), the approval preview and the tool all take the one model the
    call validated; so does ``explain``/``preview`` without a call."""
    registry = ToolRegistry([BuiltinProvider(), TestProvider()])
    data = policy_data(sandbox.root)
    data["providers"]["testprov"] = {"enabled": True}
    data["tool_classes"]["misc"] = "enabled"
    data.setdefault("tools", {})["testprov:misc:counted"] = {"require_approval": True}
    from services.policy import parse_policy

    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision.once()

    gateway = gateway_factory(parse_policy(json.dumps(data)), registry=registry, approver=approver)
    VALIDATED.clear()
    result = gateway.execute_sync("testprov:misc:counted", {"word": "once"})
    assert result.ok and result.data == {"word": "once"}, result.error
    assert VALIDATED == ["once"]
    assert len(asked) == 1 and asked[0].preview == {"kind": "text", "note": "would echo once"}
    assert asked[0].args == {"word": "once"} and asked[0].decision.tier is RiskTier.READ_ONLY
    assert gateway.explain("testprov:misc:counted", {"word": "again"}).action == "confirm"
    assert VALIDATED == ["once", "again"]
    bad = gateway.execute_sync("testprov:misc:counted", {"word": 3})
    assert bad.error is not None and bad.error.type == "InvalidInput" and VALIDATED == ["once", "again"]


def test_tool_crash_is_an_internal_error_result(test_gateway: ToolGateway) -> None:
    result = test_gateway.execute_sync("testprov:misc:explode", {})
    assert result.error is not None and result.error.type == "InternalError"
    assert "kaboom" in result.error.message and result.error.retryable is False
    row = test_gateway.audit.last_decision()
    assert row is not None and row["status"] == "error" and row["decision"] == "allow"


def test_tool_timeout_is_a_timeout_result(test_gateway: ToolGateway) -> None:
    result = test_gateway.execute_sync("testprov:misc:sleepy", {})
    assert result.error is not None and result.error.type == "Timeout" and result.error.retryable


def test_tool_returning_garbage_is_an_internal_error(test_gateway: ToolGateway) -> None:
    result = test_gateway.execute_sync("testprov:misc:bad_return", {})
    assert result.error is not None and result.error.type == "InternalError"


def test_typed_errors_keep_their_type(test_gateway: ToolGateway) -> None:
    result = test_gateway.execute_sync("testprov:misc:invalid", {})
    assert result.error is not None and result.error.type == "InvalidInput"


def test_a_tool_receives_its_validated_argument_model(test_gateway: ToolGateway) -> None:
    """The handler, the preview and the policy's resources function get the model, defaults filled in."""
    result = test_gateway.execute_sync("testprov:misc:echo", {"word": "hi"})
    assert result.ok and result.data == {"type": "EchoArgs", "seen": {"word": "hi", "times": 2}, "tail_given": False}
    refused = test_gateway.execute_sync("testprov:misc:echo", {"word": "hi", "times": "2"})
    assert refused.error is not None and refused.error.type == "InvalidInput"
    assert refused.error.message.startswith("times: ")  # named by the published schema, before any tool code


def test_every_builtin_tool_declares_its_model() -> None:
    for spec in default_registry().list():
        assert spec.args_model is ARGS_MODELS[spec.tool_id], spec.tool_id
        assert spec.input_schema == schema_of(spec.args_model), spec.tool_id


def test_a_failing_audit_write_is_flagged_on_the_result(test_gateway: ToolGateway) -> None:
    result = test_gateway.execute_sync("testprov:misc:sabotage_audit", {})
    assert result.ok and "no such table" in result.meta["audit_error"]


def test_a_failing_transcript_is_flagged_on_the_result(sandbox: Sandbox, gateway: ToolGateway) -> None:
    from services.workspace.transcripts import Transcript

    blocker = sandbox.base / "not-a-directory"
    blocker.write_text("x")
    result = gateway.execute_sync("builtin:fs:list_dir", {}, transcript=Transcript(blocker))
    assert result.ok and "transcript_error" in result.meta


def test_disabled_provider_is_denied(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    registry = ToolRegistry([BuiltinProvider(), TestProvider()])
    gateway = gateway_factory(make_policy(sandbox.root), registry=registry)
    result = gateway.execute_sync("testprov:misc:explode", {})
    assert result.error is not None and result.error.details["rule"] == "providers.testprov"


def test_a_provider_cannot_register_foreign_ids() -> None:
    class Impostor:
        name = "mcp"

        def tools(self) -> list[ToolSpec]:
            return list(TEST_TOOLS)

    with pytest.raises(ValueError):
        ToolRegistry([Impostor()])
    with pytest.raises(ValueError):
        ToolRegistry([BuiltinProvider(), BuiltinProvider()])


def test_audit_failure_fails_closed(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    gateway = gateway_factory()
    gateway.audit.close()
    result = gateway.execute_sync("builtin:fs:write_text", {"path": "never.txt", "text": "x"})
    assert result.error is not None and result.error.type == "InternalError"
    assert not (sandbox.root / "never.txt").exists()
    gateway._closed = True  # the store is gone; nothing left to close


def test_closed_gateway_refuses(gateway_factory: Callable[..., ToolGateway]) -> None:
    gateway = gateway_factory()
    gateway.close()
    with pytest.raises(RuntimeError):
        gateway.execute_sync("builtin:fs:list_dir", {})


def test_list_tools_reflects_the_policy(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    gateway = gateway_factory(make_policy(sandbox.root, tool_classes={"fs": "enabled", "web": "disabled"}))
    tools = {t["id"]: t for t in gateway.list_tools()}
    assert len(tools) == 16
    assert tools["builtin:fs:read_text"]["enabled"] and not tools["builtin:web:fetch"]["enabled"]
    assert not tools["builtin:shell:run"]["enabled"]
    assert tools["builtin:shell:poll"]["tier"] == "READ_ONLY"
