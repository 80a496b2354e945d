"""What the gateway writes about a call besides the audit rows — the conversation's tool-call event —
and the helpers that describe tools and argument problems in one line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from services.errors import AriesError
from services.hashing import canonical_json
from services.policy import Policy
from services.tools.calls import ToolCallRequest
from services.tools.registry import ToolRegistry, ToolSpec
from services.tools.results import ToolResult

if TYPE_CHECKING:
    from services.conversation import Conversation
    from services.workspace.transcripts import Transcript

    Recorder = Conversation | Transcript


def describe_tools(registry: ToolRegistry, policy: Policy) -> list[dict[str, Any]]:
    """Every registered tool with its class, risk tier, and whether ``policy`` enables it."""
    out = []
    for spec in registry.list():
        switch = policy.tool_switch(spec.tool_id)
        class_on = policy.tool_classes.get(spec.tool_class, False)
        if spec.provider == "mcp" and spec.tool_class not in policy.tool_classes:
            class_on = switch is True  # an MCP tool may be enabled by name
        enabled = (
            policy.providers.get(spec.provider, False)
            and class_on
            and switch is not False
            and policy.allows_tool(spec.tool_id)
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


def parse_arguments(registry: ToolRegistry, spec: ToolSpec, args: Any) -> Any:
    """A call's arguments, validated once: checked against the tool's published input schema (the
    message names the failing field, ``ToolRegistry.validate``) and built into its typed argument
    model (``ToolSpec.parse``; a tool without one, e.g. an MCP tool, keeps the dict). The policy, the
    approval preview and the tool all take what this returns; ``InvalidInput`` (rule ``input.schema``)
    when the arguments do not fit."""
    registry.validate(spec.tool_id, args)
    return spec.parse(args)


def _summary(result: ToolResult, tool_id: str) -> str:
    if result.ok:
        return f"{tool_id}: ok"
    assert result.error is not None
    rule = result.error.details.get("rule")
    suffix = f" (rule {rule})" if rule else ""
    return f"{tool_id}: {result.error.type}: {result.error.message}{suffix}"[:1000]


_TRANSCRIPT_OUTPUT_CAP = 1_000_000


def record_tool_call(recorder: Recorder, result: ToolResult, request: ToolCallRequest, duration_ms: float) -> None:
    """The conversation's tool-call event of a finished call (its output cut when too large); a
    recorder that refuses it leaves ``transcript_error`` in the result's meta."""
    from services.conversation import Conversation, ToolCallRecord

    conversation = recorder if isinstance(recorder, Conversation) else Conversation(recorder)
    output = result.to_dict()
    if request.data_stored_in and result.ok:  # stored once, elsewhere in the conversation
        output = {**output, "data": {"omitted": f"stored once, in {request.data_stored_in}"}}
    elif len(canonical_json(output)) > _TRANSCRIPT_OUTPUT_CAP:
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
        artifacts=result.meta.get("artifacts") or None,
        from_text=request.from_text,
    )
    try:
        conversation.record(event)
    except AriesError as exc:
        result.meta["transcript_error"] = exc.message
    except OSError as exc:  # the call happened and is audited; the transcript could not take it
        result.meta["transcript_error"] = f"{type(exc).__name__}: {exc}"


__all__ = ["describe_tools", "parse_arguments", "record_tool_call"]
