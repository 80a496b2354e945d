"""The MCP provider's settings, read from the policy file's ``providers.mcp`` block.

```yaml
providers:
  mcp:
    enabled: true            # off by default: with it off, no MCP server is ever started
    servers:
      time:                  # tool ids are mcp:time:<tool>
        command: mcp-server-time
        args: ["--local-timezone", "UTC"]
        env: [TZ]            # allow-list: names of variables passed on from Aries's environment
        tier: WRITE_DESTRUCTIVE   # the risk tier of its tools (default), raised by annotations
        tools: {get_current_time: READ_ONLY}   # per-tool tiers
        timeout_s: 30        # one call (and the start-up handshake)
        max_output_bytes: 262144
      remote:
        url: http://127.0.0.1:8123/mcp   # streamable HTTP, loopback hosts only
```

``${workspace}`` and ``${home}`` in ``command``, ``args`` and ``cwd`` are replaced when a workspace
binds the policy.  The JSON Schema of the block is ``MCP_SCHEMA`` (part of the policy schema), so a
mistake is reported with the policy file's line like any other policy error.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from services.errors import ConfigError
from services.hashing import sha256_hex
from services.policy.model import RiskTier

SERVER_NAME = "^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$"
_TIERS = [str(t) for t in RiskTier]

MCP_SERVER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "oneOf": [{"required": ["command"]}, {"required": ["url"]}],
    "properties": {
        "command": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
        "env": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}},
        "cwd": {"type": "string", "minLength": 1},
        "url": {"type": "string", "pattern": "^https?://"},
        "tier": {"enum": _TIERS},
        "tools": {"type": "object", "additionalProperties": {"enum": _TIERS}},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
        "start_timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
        "max_output_bytes": {"type": "integer", "minimum": 1024},
    },
}

MCP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "enabled": {"type": "boolean"},
        "servers": {
            "type": "object",
            "propertyNames": {"pattern": SERVER_NAME},
            "additionalProperties": MCP_SERVER_SCHEMA,
        },
    },
}

DEFAULT_TIER = RiskTier.WRITE_DESTRUCTIVE
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_MAX_OUTPUT_BYTES = 256 << 10


@dataclass(frozen=True)
class McpServerConfig:
    """One declared server: a command started over stdio, or a loopback streamable-HTTP URL."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env_allow: tuple[str, ...] = ()
    cwd: str | None = None
    url: str | None = None
    tier: RiskTier = DEFAULT_TIER
    tool_tiers: dict[str, RiskTier] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def env(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """The variables the allow-list passes on (only those that are set)."""
        source = os.environ if environ is None else environ
        return {name: source[name] for name in self.env_allow if name in source}

    def describe(self) -> dict[str, Any]:
        where = self.url if self.url else " ".join([self.command or "", *self.args]).strip()
        return {"name": self.name, "transport": self.transport, "target": where, "tier": str(self.tier)}


@dataclass(frozen=True)
class McpSettings:
    enabled: bool = False
    servers: dict[str, McpServerConfig] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """A digest of the settings: a gateway rebinding to the same settings keeps its servers."""
        data = {name: repr(cfg) for name, cfg in sorted(self.servers.items())}
        text = json.dumps({"enabled": self.enabled, "servers": data}, sort_keys=True)
        return sha256_hex(text)


def _expand(text: str, variables: dict[str, str]) -> str:
    for name, value in variables.items():
        text = text.replace("${" + name + "}", value)
    return text


def check_loopback_url(url: str, *, server: str) -> str:
    """``url`` if its host is a loopback address (or ``localhost``), else a ``ConfigError``."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    loopback = host == "localhost"
    if not loopback:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
    if parts.scheme not in ("http", "https") or not loopback:
        raise ConfigError(
            f"providers.mcp.servers.{server}.url: only loopback hosts (127.0.0.1, ::1, localhost) are allowed, "
            f"not {host or url!r}"
        )
    return url


def mcp_settings(policy_data: dict[str, Any], workspace_root: Path | None = None) -> McpSettings:
    """The ``providers.mcp`` block of a (schema-checked) policy document."""
    block = (policy_data.get("providers") or {}).get("mcp") or {}
    enabled = bool(block.get("enabled", False))
    variables = {"home": os.path.expanduser("~")}
    if workspace_root is not None:
        variables["workspace"] = str(workspace_root)
    servers: dict[str, McpServerConfig] = {}
    for name, raw in sorted((block.get("servers") or {}).items()):
        url = raw.get("url")
        servers[name] = McpServerConfig(
            name=name,
            command=_expand(raw["command"], variables) if raw.get("command") else None,
            args=tuple(_expand(a, variables) for a in raw.get("args") or ()),
            env_allow=tuple(raw.get("env") or ()),
            cwd=_expand(raw["cwd"], variables) if raw.get("cwd") else None,
            url=check_loopback_url(url, server=name) if url else None,
            tier=RiskTier(raw.get("tier", DEFAULT_TIER)),
            tool_tiers={tool: RiskTier(tier) for tool, tier in (raw.get("tools") or {}).items()},
            timeout_s=float(raw.get("timeout_s", DEFAULT_TIMEOUT_S)),
            start_timeout_s=float(raw.get("start_timeout_s", DEFAULT_START_TIMEOUT_S)),
            max_output_bytes=int(raw.get("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES)),
        )
    return McpSettings(enabled, servers)


# -- risk tiers: annotations raise, never lower ------------------------------------------------
_RANK = {
    RiskTier.READ_ONLY: 0,
    RiskTier.WRITE_SAFE: 1,
    RiskTier.WRITE_DESTRUCTIVE: 2,
    RiskTier.NETWORK: 2,
    RiskTier.EXEC_USERSPACE: 3,
    RiskTier.EXEC_PRIVILEGED: 4,
}


def raise_tier(tier: RiskTier, other: RiskTier) -> RiskTier:
    """The higher of two tiers (``tier`` on a tie): a hint can only make a tool riskier."""
    return other if _RANK[other] > _RANK[tier] else tier


def tool_tier(config: McpServerConfig, tool: str, annotations: dict[str, Any] | None) -> RiskTier:
    """The policy's tier for ``tool`` (per-tool, else the server's), raised by the server's hints.

    ``destructiveHint: true`` raises to WRITE_DESTRUCTIVE, ``openWorldHint: true`` to NETWORK;
    ``readOnlyHint: true`` lowers nothing: the policy decides how low a tool may go.
    """
    tier = config.tool_tiers.get(tool, config.tier)
    hints = annotations or {}
    if hints.get("destructiveHint") is True and hints.get("readOnlyHint") is not True:
        tier = raise_tier(tier, RiskTier.WRITE_DESTRUCTIVE)
    if hints.get("openWorldHint") is True:
        tier = raise_tier(tier, RiskTier.NETWORK)
    return tier


__all__ = [
    "MCP_SCHEMA",
    "McpServerConfig",
    "McpSettings",
    "check_loopback_url",
    "mcp_settings",
    "raise_tier",
    "tool_tier",
]
