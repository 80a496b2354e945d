"""The MCP tool provider: each configured server's tools as ``mcp:<server>:<tool>`` specs.

Nothing is started when the provider is registered: a server's tools are added to the registry
the first time one of its ids is looked up (``ToolRegistry.load_for``) or the registry is listed
in full (``load_all``: ``aries tool list``, the doctor).  Each spec carries the server's input
schema, a risk tier from the policy raised by the server's annotations (``tool_tier``), and a
guarded handler like every builtin tool: it runs only with the gateway's capability, so MCP calls
go through the same policy, approval, audit and transcript as any other.

Results are capped at the server's ``max_output_bytes`` (text cut, other items dropped, with
``meta.truncated``); ``isError: true`` results become a typed ``McpToolError``.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from services.policy.mcp import McpServerConfig, tool_tier
from services.text.textsafe import neutralize
from services.tools.mcp_client import McpHub, McpServerError
from services.tools.registry import ToolContext, ToolSpec, guard_impl
from services.tools.results import ToolOutput

TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
MAX_DESCRIPTION = 1000

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["server", "tool", "content", "text"],
    "properties": {
        "server": {"type": "string"},
        "tool": {"type": "string"},
        "title": {"type": "string"},
        "content": {"type": "array", "items": {"type": "object"}},
        "text": {"type": "string"},
        "structured": {"type": ["object", "null"]},
    },
}


class McpToolError(McpServerError):
    """The MCP tool ran and reported a failure (``isError: true``)."""

    code = "mcp_tool_error"


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def cap_content(items: list[Any], cap: int) -> tuple[list[dict[str, Any]], bool]:
    """Content items in order until ``cap`` bytes: a text item is cut to fit, others are dropped."""
    kept: list[dict[str, Any]] = []
    used, truncated = 0, False
    for item in items:
        if not isinstance(item, dict):
            raise McpServerError(f"malformed content item: {type(item).__name__}, not an object")
        size = _size(item)
        if used + size <= cap:
            kept.append(item)
            used += size
            continue
        truncated = True
        room = cap - used - 64
        if item.get("type") == "text" and isinstance(item.get("text"), str) and room > 0:
            text = item["text"].encode("utf-8")[:room].decode("utf-8", errors="ignore")
            kept.append({"type": "text", "text": text})
            used = cap
        break
    return kept, truncated


def mcp_output(server: str, tool: str, data: dict[str, Any], cap: int) -> ToolOutput:
    """A ``tools/call`` result (wire JSON) as the tool's output, capped at ``cap`` bytes."""
    raw = data.get("content") or []
    if not isinstance(raw, list):
        raise McpServerError(f"MCP server {server!r} sent a malformed result (content is not a list)")
    received = _size(data)
    content, truncated = cap_content(raw, cap)
    text = "\n".join(str(i.get("text")) for i in content if i.get("type") == "text" and "text" in i)
    if data.get("isError"):
        message = neutralize(" ".join(text.split()), single_line=True)[:300] or "no message"
        raise McpToolError(f"mcp:{server}:{tool} reported an error: {message}", server=server, tool=tool)
    structured = data.get("structuredContent")
    if structured is not None and (not isinstance(structured, dict) or _size(structured) > cap):
        structured, truncated = None, truncated or isinstance(structured, dict)
    out = {
        "server": server,
        "tool": tool,
        "title": f"mcp:{server}:{tool}",
        "content": content,
        "text": text,
        "structured": structured,
    }
    return ToolOutput(out, {"truncated": truncated, "bytes_received": received})


def _tool_schema(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The tool's input schema if it is a valid JSON Schema of an object, else None."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    schema = entry.get("inputSchema")
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return None
    schema = {k: v for k, v in schema.items() if k != "$schema"}  # checked as draft 2020-12
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return None
    return schema


class McpProvider:
    """The tools of the configured MCP servers (see the module docstring)."""

    name = "mcp"

    def __init__(self, hub: McpHub) -> None:
        self.hub = hub
        self.skipped: dict[str, list[str]] = {}  # per server: tools left out, with why

    def tools(self) -> list[ToolSpec]:
        return []  # nothing at registration: servers start when their tools are first needed

    def groups(self) -> list[str]:
        """The configured servers (the registry loads each on demand)."""
        return self.hub.names()

    def group_for(self, tool_id: str) -> str | None:
        """The configured server an ``mcp:<server>:<tool>`` id belongs to, or None."""
        parts = tool_id.split(":", 2) if isinstance(tool_id, str) else []
        if len(parts) == 3 and parts[0] == self.name and parts[1] in self.hub.names():
            return parts[1]
        return None

    def load(self, server: str) -> list[ToolSpec]:
        """Start ``server`` if needed and build its specs (raises ``McpServerError`` if it fails)."""
        config = self.hub.config(server)
        specs: list[ToolSpec] = []
        skipped: list[str] = []
        for entry in self.hub.list_tools(server):
            name = entry.get("name") if isinstance(entry, dict) else None
            if not isinstance(name, str) or not TOOL_NAME.match(name):
                skipped.append(f"{neutralize(str(name), single_line=True)[:60]!r}: not a valid tool name")
                continue
            schema = _tool_schema(entry)
            if schema is None:
                skipped.append(f"{name}: its input schema is not a valid JSON Schema of an object")
                continue
            specs.append(self._spec(config, name, entry, schema))
        self.skipped[server] = skipped
        return sorted(specs, key=lambda s: s.tool_id)

    def _spec(self, config: McpServerConfig, name: str, entry: dict[str, Any], schema: dict[str, Any]) -> ToolSpec:
        server = config.name
        tool_id = f"mcp:{server}:{name}"
        hub = self.hub
        annotations = entry.get("annotations") if isinstance(entry.get("annotations"), dict) else None

        async def call(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
            timeout = config.timeout_s
            if ctx.deadline is not None:
                timeout = max(0.1, min(timeout, ctx.deadline - time.monotonic()))
            data = await hub.call_tool(server, name, args, timeout)
            return mcp_output(server, name, data, config.max_output_bytes)

        call.__name__ = f"mcp_{server}_{name}".replace(".", "_").replace("-", "_")
        call.__doc__ = f"The MCP tool {name!r} of server {server!r}."
        description = neutralize(str(entry.get("description") or entry.get("title") or name), single_line=True)
        return ToolSpec(
            tool_id=tool_id,
            provider=self.name,
            tool_class=f"mcp:{server}",
            tier=tool_tier(config, name, annotations),
            description=description[:MAX_DESCRIPTION],
            input_schema=schema,
            output_schema=OUTPUT_SCHEMA,
            handler=guard_impl(tool_id, call),
            is_async=True,
        )


__all__ = ["OUTPUT_SCHEMA", "McpProvider", "McpToolError", "cap_content", "mcp_output"]
