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
binds the policy.  The block's model is :class:`McpBlock` (part of the policy document,
:mod:`services.policy.document`), so a mistake is reported with the policy file's line like any
other policy error.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from services.errors import ConfigError
from services.hashing import sha256_hex
from services.policy.model import RiskTier

SERVER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$"
DEFAULT_TIER = RiskTier.WRITE_DESTRUCTIVE
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_MAX_OUTPUT_BYTES = 256 << 10


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


def _loopback(url: str) -> str:
    try:
        return check_loopback_url(url, server="?")
    except ConfigError as exc:
        raise ValueError(exc.message.split(": ", 1)[1]) from None


class McpServerFile(BaseModel):
    """One server of the ``providers.mcp.servers`` block: ``command`` (stdio) or ``url`` (loopback HTTP)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    command: Annotated[str, Field(min_length=1)] | None = None
    args: list[str] = []
    env: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = []
    cwd: Annotated[str, Field(min_length=1)] | None = None
    url: Annotated[str, Field(pattern=r"^https?://"), AfterValidator(_loopback)] | None = None
    tier: Annotated[RiskTier, Field(strict=False)] = DEFAULT_TIER
    tools: dict[str, Annotated[RiskTier, Field(strict=False)]] = {}
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = DEFAULT_TIMEOUT_S
    start_timeout_s: Annotated[float, Field(gt=0, le=600)] = DEFAULT_START_TIMEOUT_S
    max_output_bytes: Annotated[int, Field(ge=1024)] = DEFAULT_MAX_OUTPUT_BYTES

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerFile:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (a program started over stdio) and url (loopback HTTP)")
        return self


class McpBlock(BaseModel):
    """``providers.mcp``: off unless ``enabled``; the servers by name."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    enabled: bool = False
    servers: dict[Annotated[str, Field(pattern=SERVER_NAME)], McpServerFile] = {}


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


def mcp_settings(policy_data: dict[str, Any], workspace_root: Path | None = None) -> McpSettings:
    """The ``providers.mcp`` block of a policy document (checked by :class:`McpBlock`)."""
    block = McpBlock.model_validate((policy_data.get("providers") or {}).get("mcp") or {})
    variables = {"home": os.path.expanduser("~")}
    if workspace_root is not None:
        variables["workspace"] = str(workspace_root)
    servers: dict[str, McpServerConfig] = {}
    for name, raw in sorted(block.servers.items()):
        servers[name] = McpServerConfig(
            name=name,
            command=_expand(raw.command, variables) if raw.command else None,
            args=tuple(_expand(a, variables) for a in raw.args),
            env_allow=tuple(raw.env),
            cwd=_expand(raw.cwd, variables) if raw.cwd else None,
            url=raw.url,
            tier=raw.tier,
            tool_tiers=dict(raw.tools),
            timeout_s=raw.timeout_s,
            start_timeout_s=raw.start_timeout_s,
            max_output_bytes=raw.max_output_bytes,
        )
    return McpSettings(block.enabled, servers)


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
    "McpBlock",
    "McpServerConfig",
    "McpSettings",
    "check_loopback_url",
    "mcp_settings",
    "raise_tier",
    "tool_tier",
]
