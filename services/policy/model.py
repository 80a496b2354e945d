"""The policy's vocabulary: risk tiers, what a tool call touches, decisions, limits and the
typed errors a refusal raises.  Nothing here knows about files, hosts or commands."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from services.approval_mode import MODE_NAMES
from services.errors import AriesError, InvalidInput
from services.workspace.paths import INTERNAL

MODES = MODE_NAMES  # declared in services.approval_mode
PATH_OPS = ("read", "write", "list")
MAX_PATH_CHARS = 4096
MAX_COMPONENT_BYTES = 255
WORKSPACE_INTERNAL = INTERNAL  # the workspace's own records (services.workspace.paths): no tool writes them

PathOp = Literal["read", "write", "list"]
Action = Literal["allow", "deny", "confirm"]


class RiskTier(StrEnum):
    READ_ONLY = "READ_ONLY"
    WRITE_SAFE = "WRITE_SAFE"
    WRITE_DESTRUCTIVE = "WRITE_DESTRUCTIVE"
    EXEC_USERSPACE = "EXEC_USERSPACE"
    EXEC_PRIVILEGED = "EXEC_PRIVILEGED"
    NETWORK = "NETWORK"


# -- typed refusals (re-exported by services.tools.results) ----------------------------------
class PolicyDenied(AriesError):
    """A call refused by the policy (or by the operator), with the rule that decided it."""

    code = "policy_denied"
    exit_code = 3

    def __init__(self, message: str, *, rule: str, **details: Any) -> None:
        super().__init__(message, rule=rule, **details)
        self.rule = rule


class ToolPermissionDenied(AriesError):
    """The operating system refused an operation (EACCES, EPERM) or a file changed under us."""

    code = "permission_denied"


def deny(rule: str, reason: str, **details: Any) -> PolicyDenied:
    return PolicyDenied(reason, rule=rule, **details)


def invalid(rule: str, reason: str) -> InvalidInput:
    return InvalidInput(reason, rule=rule)


def jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


# -- what a tool call touches (declared by each tool, checked here) --------------------------
@dataclass(frozen=True)
class PathUse:
    raw: Any
    op: PathOp
    arg: str = "path"
    base: str | None = None  # relative paths are taken from here (itself checked), else the first root


@dataclass(frozen=True)
class CommandUse:
    argv: Any
    cwd: Any = None
    env: Any = None


@dataclass(frozen=True)
class UrlUse:
    url: Any
    arg: str = "url"


@dataclass(frozen=True)
class SearchEndpointUse:
    """The configured SearXNG endpoint (``web.searxng_url``)."""


Resource = PathUse | CommandUse | UrlUse | SearchEndpointUse


class ToolDescriptor(Protocol):
    """What the policy needs to know about a tool (``services.tools.registry.ToolSpec``)."""

    @property
    def tool_id(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def tool_class(self) -> str: ...
    @property
    def tier(self) -> RiskTier: ...
    def resources(self, args: dict[str, Any]) -> list[Resource]: ...
    def effective_tier(self, args: dict[str, Any], facts: dict[str, Any]) -> RiskTier: ...


@dataclass
class PolicyDecision:
    action: Action
    rule: str
    reason: str
    tool_id: str
    tier: RiskTier
    mode: str
    error_type: str | None = None  # for "deny": PolicyDenied, or InvalidInput for malformed input
    facts: dict[str, Any] = field(default_factory=dict)
    approved_by: str | None = None  # operator_once / operator_session / mode / rule

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "rule": self.rule,
            "reason": self.reason,
            "tool_id": self.tool_id,
            "tier": str(self.tier),
            "mode": self.mode,
            "error_type": self.error_type,
            "approved_by": self.approved_by,
            "facts": self.facts,
        }


# -- the OS sandbox of shell commands ------------------------------------------------------
SANDBOX_MODES = ("auto", "bubblewrap", "landlock", "off")
OUTSIDE_ROOT = ("read_only", "hidden")
DEFAULT_VISIBLE = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")


@dataclass(frozen=True)
class ShellSandbox:
    """``shell.sandbox`` / ``shell.network`` / ``shell.outside_root`` / ``shell.visible_paths``:
    which OS sandbox shell commands run in (``services.tools.sandbox``).  The allowed roots are
    writable; the rest of the file system is read-only, or hidden except ``visible``."""

    mode: str = "auto"  # auto | bubblewrap | landlock | off
    network: bool = False  # may shell commands open network sockets
    outside_root: str = "read_only"  # read_only | hidden
    visible: tuple[str, ...] = DEFAULT_VISIBLE  # readable when outside_root is hidden


# -- limits ---------------------------------------------------------------------------------
Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0)]


class Limits(BaseModel):
    """Size, time and resource limits (the policy file's ``limits:``; an omitted one keeps its default).
    The ``child_*`` limits are rlimits applied to every shell child (0 disables one);
    ``child_no_new_privs`` sets PR_SET_NO_NEW_PRIVS on Linux."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    tool_timeout_s: Seconds = 300
    fs_read_max_bytes: Count = 1 << 20
    fs_write_max_bytes: Count = 4 << 20
    fs_list_max_entries: Count = 5000
    fs_search_max_matches: Count = 200
    fs_search_max_context_lines: Count = 5
    fs_search_max_files: Count = 5000
    fs_search_max_file_bytes: Count = 2 << 20
    fs_patch_max_bytes: Count = 1 << 20
    shell_timeout_s: Seconds = 60
    shell_max_timeout_s: Seconds = 600
    shell_output_max_bytes: Count = 64 << 10
    shell_max_processes: Count = 8
    shell_stall_after_s: Seconds = 30
    shell_kill_grace_s: Seconds = 3
    child_memory_bytes: Count = 4 << 30  # RLIMIT_AS: address space of each child process
    child_cpu_s: Count = 300  # RLIMIT_CPU: CPU seconds of each child process
    child_processes: Count = 256  # RLIMIT_NPROC: processes of the user, counted from the child
    child_file_bytes: Count = 1 << 30  # RLIMIT_FSIZE: largest file a child may write
    child_no_new_privs: bool = True  # PR_SET_NO_NEW_PRIVS (Linux; skipped with a note elsewhere)
    web_max_bytes: Count = 2 << 20
    web_connect_timeout_s: Seconds = 10
    web_read_timeout_s: Seconds = 30
    web_max_redirects: Count = 5
    web_search_max_results: Count = 20
