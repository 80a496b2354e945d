"""The policy file as pydantic models: what each section may hold, with its types and defaults.

``PolicyDocument.model_validate(data)`` checks a parsed policy (strict types: no ``"5"`` for 5, no
``1`` for ``true``; unknown keys refused) and gives typed access to it; :func:`problem` turns the
first failure into the dotted path of the setting and one line saying what is wrong, which the
loader prefixes with the file and the line (``policy.yaml:7: filesystem.deny.0.color: …``).
The ``providers.mcp`` block is :class:`services.policy.mcp.McpBlock`.  What the models cannot say
— a deny rule's ``match:``/``not_match:`` examples, domain patterns, ``allow_private`` entries,
unique rule ids — is checked when the loader builds the rules from them, with the same file:line.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    MISSING,
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
)
from pydantic_core import ErrorDetails

from services.approval_mode import ApprovalMode
from services.policy.exec_table import DEFAULT_ENV_ALLOW
from services.policy.mcp import McpBlock
from services.policy.model import DEFAULT_VISIBLE, Limits, PathOp


class Section(BaseModel):
    """A mapping of the policy file: known keys only, strict types, read-only once loaded."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _switch(value: Any) -> Any:
    if value is True or value is False:
        return value
    if value in ("enabled", "disabled"):
        return value == "enabled"
    raise ValueError("must be enabled, disabled, true or false")


def _unique(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError("lists an operation twice")
    return values


Switch = Annotated[bool, BeforeValidator(_switch)]
"""``enabled`` / ``disabled`` (or ``true`` / ``false``)."""
Id = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
"""A rule id: letters, digits, ``_.-``, at most 64 characters; the decision names it."""
Text = Annotated[str, Field(min_length=1)]
Ops = Annotated[list[PathOp], Field(min_length=1), AfterValidator(_unique)]
Port = Annotated[int, Field(ge=1, le=65535)]


# -- filesystem ----------------------------------------------------------------------------------------
class Examples(Section):
    """Examples a rule must match (``match``) and must not (``not_match``), checked at load."""

    match: list[str] = []
    not_match: list[str] = []


class DenyGlob(Examples):
    id: Id
    glob: Text
    ops: Ops | None = None
    """Operations the rule denies (default: read, write and list)."""


class DenyExtensions(Examples):
    id: Id
    extensions: list[Text]
    ops: Ops | None = None


class Filesystem(Section):
    allowed_roots: list[Text] = []
    allow_hardlinks: bool = False
    deny: list[DenyGlob] = []
    deny_extensions: list[DenyExtensions] = []
    write_extensions: list[Text] | None = None
    """When a list, only these extensions may be written."""


# -- shell ------------------------------------------------------------------------------------------------
class Executables(Examples):
    id: Id
    names: list[Text]


class Shell(Section):
    executables: list[Executables] = []
    privileged: list[Text] = []
    env_passthrough: list[Text] = []
    env_allow: list[Text] = list(DEFAULT_ENV_ALLOW)
    inert_programs: list[Text] = []
    check_path_arguments: bool = True
    search_path: list[Text] | None = None
    sandbox: Literal["auto", "bubblewrap", "landlock", "off"] = "auto"
    network: bool = False
    outside_root: Literal["read_only", "hidden"] = "read_only"
    visible_paths: list[Text] = list(DEFAULT_VISIBLE)


# -- web ----------------------------------------------------------------------------------------------------
class PrivateHost(Section):
    host: Text
    ports: list[Port]


class Web(Section):
    searxng_url: str | None = None
    schemes: list[Literal["http", "https"]] = []
    """Empty: https only."""
    allow_domains: list[Text] = []
    deny_domains: list[Text] = []
    allow_private: list[Annotated[Text | PrivateHost, Field(union_mode="left_to_right")]] = []


# -- the rest -----------------------------------------------------------------------------------------------
class AutoApprove(Section):
    id: Id
    tools: list[Text]
    domains: list[Text] | MISSING = MISSING
    paths: list[Text] | MISSING = MISSING
    executables: list[Text] | MISSING = MISSING


class ProviderSwitch(Section):
    enabled: bool = False


class Providers(Section):
    """``builtin: {enabled: …}``, any other provider the same way, and the ``mcp`` block."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, ProviderSwitch] = Field(init=False)

    mcp: McpBlock = McpBlock()

    def enabled(self) -> dict[str, bool]:
        """Provider name → whether the policy enables it (only the providers the file names)."""
        named = {name: switch.enabled for name, switch in (self.__pydantic_extra__ or {}).items()}
        if "mcp" in self.model_fields_set:
            named["mcp"] = self.mcp.enabled
        return named


class ToolOverride(Section):
    enabled: bool | MISSING = MISSING
    require_approval: bool | MISSING = MISSING


# -- hooks ------------------------------------------------------------------------------------------------
MAX_HOOK_TIMEOUT_S = 60.0


def _program(argv: list[str]) -> list[str]:
    first = argv[0]
    if "/" in first and not first.startswith("/"):
        raise ValueError("the program must be a name found on the search path or an absolute path")
    return argv


class Hook(Section):
    """A command run around the tool calls it matches (``services.policy.hooks``,
    ``services.tools.hooks``): argv without a shell; the call reaches it as JSON on its standard input."""

    id: Id
    command: Annotated[list[Text], Field(min_length=1), AfterValidator(_program)]
    """argv: a program (a name on the search path, or an absolute path) and its fixed arguments."""
    tools: Annotated[list[Text], Field(min_length=1)]
    """Tool ids it runs for, with ``*`` and ``?`` (``builtin:shell:*``)."""
    args: dict[Text, Text] = {}
    """Argument (dotted: ``argv.0``) → a pattern its value must match (``*``: any characters; a list
    of strings is matched as the words joined by spaces, quoted as a shell would)."""
    timeout_s: Annotated[float, Field(gt=0, le=MAX_HOOK_TIMEOUT_S)] = 10.0


class AfterHook(Hook):
    add_to_context: bool = False
    """Its standard output is added to what the model is given of the call, as untrusted data."""


class Hooks(Section):
    before: list[Hook] = []
    """Run before a call the policy does not deny; exit code 2 (or ``{"decision": "deny", "reason": …}``
    on stdout) denies it with a reason; any other failure denies it too (fail closed)."""
    after: list[AfterHook] = []
    """Run after the tool ran; a failure is reported and the call's result stands."""


class PolicyDocument(Section):
    """A whole policy file (after a capsule policy is translated, see :mod:`services.policy.capsule`)."""

    version: Literal[1]
    mode: Annotated[ApprovalMode, Field(strict=False)] = ApprovalMode.GUIDE
    providers: Providers = Providers()
    tool_classes: dict[str, Switch] = {}
    tools: dict[str, ToolOverride] = {}
    limits: Limits = Limits()
    filesystem: Filesystem = Filesystem()
    shell: Shell = Shell()
    web: Web = Web()
    auto_approve: list[AutoApprove] = []
    hooks: Hooks = Hooks()


# -- one line for the first problem ---------------------------------------------------------------------
_MESSAGES = {
    "missing": "is required",
    "extra_forbidden": "is not a setting Aries knows here",
}
_NO_INPUT = frozenset({"missing", "extra_forbidden", "value_error", "assertion_error"})


def problem(exc: ValidationError, data: Any) -> tuple[list[str | int], str]:
    """The first problem of ``exc`` as (its path in ``data``, ``"dotted.path: what is wrong"``).

    The path holds only keys and indexes that exist in ``data`` (pydantic adds the name of a union
    member it tried), plus a missing key; of a union's problems, the one that reached deepest into
    ``data`` is told.
    """
    best: tuple[int, list[str | int], ErrorDetails] | None = None
    for error in exc.errors():
        path, depth = _walk(data, error["loc"])
        if error["type"] == "missing" and error["loc"]:
            path, depth = [*path, error["loc"][-1]], depth + 1
        if best is None or depth > best[0]:
            best = (depth, path, error)
    assert best is not None
    _, path, chosen = best
    message = _MESSAGES.get(chosen["type"]) or str(chosen["msg"]).removeprefix("Value error, ")
    given = chosen.get("input")
    if chosen["type"] not in _NO_INPUT and isinstance(given, str | int | float | bool):
        shown = repr(given)
        message += f" (not {shown[:57] + '…' if len(shown) > 60 else shown})"
    where = ".".join(str(p) for p in path) or "(top level)"
    return path, f"{where}: {message}"


def _walk(data: Any, loc: tuple[int | str, ...]) -> tuple[list[str | int], int]:
    path: list[str | int] = []
    node = data
    for key in loc:
        if isinstance(node, dict) and isinstance(key, str) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            continue  # a union member's name, or a key that is not there
        path.append(key)
    return path, len(path)


__all__ = [
    "MAX_HOOK_TIMEOUT_S",
    "AfterHook",
    "AutoApprove",
    "DenyExtensions",
    "DenyGlob",
    "Executables",
    "Filesystem",
    "Hook",
    "Hooks",
    "PolicyDocument",
    "PrivateHost",
    "Providers",
    "Shell",
    "ToolOverride",
    "Web",
    "problem",
]
