"""The tool policy: a deny-by-default YAML document and its evaluation.

A policy says which providers and tool classes are enabled, which approval mode applies
(guide / commander / strict, as the builtin-tools spec defines them), where files may be
touched (``allowed_roots``, deny globs, extension lists), which executables may run, which
hosts may be reached, and the size and time limits.  ``Policy.bind(workspace_root)`` turns
it into a ``BoundPolicy`` whose ``evaluate(tool, args)`` returns a ``PolicyDecision``:
``allow``, ``deny`` or ``confirm`` (ask the operator), always with the id of the rule that
decided it.

Paths are checked by ``PathGuard``: syntax first (NUL, control characters, encoded or
look-alike separators, ``~`` and ``$VAR``), then the lexical path and the real path (after
``realpath``) must both lie inside an allowed root, then the file itself (no FIFOs, devices,
sockets, hard links) and the deny rules (globs and extensions, matched on both paths).

The file format is summarised in ``profiles/policy-default.yaml``; a policy may carry
``match:`` / ``not_match:`` examples on its rules, checked at load time.  Any problem is a
``ConfigError`` naming the file, the line and the reason.
"""

from __future__ import annotations

import fnmatch
import hashlib
import ipaddress
import json
import os
import re
import shutil
import stat
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from services.errors import ConfigError, InvalidInput
from services.tools.results import PolicyDenied

MODES = ("guide", "commander", "strict")
PATH_OPS = ("read", "write", "list")
MAX_PATH_CHARS = 4096
MAX_COMPONENT_BYTES = 255
WORKSPACE_INTERNAL = (
    "audit.db",
    "audit.db-wal",
    "audit.db-shm",
    "audit.db-journal",
    "workspace.yaml",
    "policy.yaml",  # a workspace's own tool policy: tools must not be able to loosen it
    ".aries-session.json",
    "transcripts",
    "artifacts",
    "indexes",
)

PathOp = Literal["read", "write", "list"]
Action = Literal["allow", "deny", "confirm"]


class RiskTier(StrEnum):
    READ_ONLY = "READ_ONLY"
    WRITE_SAFE = "WRITE_SAFE"
    WRITE_DESTRUCTIVE = "WRITE_DESTRUCTIVE"
    EXEC_USERSPACE = "EXEC_USERSPACE"
    EXEC_PRIVILEGED = "EXEC_PRIVILEGED"
    NETWORK = "NETWORK"


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


# -- limits ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limits:
    tool_timeout_s: float = 300
    fs_read_max_bytes: int = 1 << 20
    fs_write_max_bytes: int = 4 << 20
    fs_list_max_entries: int = 5000
    fs_search_max_matches: int = 200
    fs_search_max_context_lines: int = 5
    fs_search_max_files: int = 5000
    fs_search_max_file_bytes: int = 2 << 20
    fs_patch_max_bytes: int = 1 << 20
    shell_timeout_s: float = 60
    shell_max_timeout_s: float = 600
    shell_output_max_bytes: int = 64 << 10
    shell_max_processes: int = 8
    shell_stall_after_s: float = 30
    shell_kill_grace_s: float = 3
    web_max_bytes: int = 2 << 20
    web_connect_timeout_s: float = 10
    web_read_timeout_s: float = 30
    web_max_redirects: int = 5
    web_search_max_results: int = 20


# -- glob matching ----------------------------------------------------------------------------
def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """``**`` spans directories, ``*`` and ``?`` stay inside one; case-insensitive (safer)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == n:
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape("["))
                i += 1
                continue
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("^" + "".join(out) + "$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class DenyRule:
    id: str
    ops: frozenset[str]
    glob: str | None = None
    regex: re.Pattern[str] | None = None
    extensions: frozenset[str] = frozenset()

    def matches(self, rel: str, absolute: str) -> bool:
        if self.regex is not None:
            target = absolute if (self.glob or "").startswith("/") else rel
            return bool(self.regex.match(target))
        name = rel.rsplit("/", 1)[-1].lower()
        return any(name.endswith(ext) for ext in self.extensions)


@dataclass(frozen=True)
class ExecRule:
    id: str
    names: tuple[str, ...]

    def matches(self, name: str) -> bool:
        return exec_name_matches(name, self.names)


def exec_name_matches(name: str, names: Iterable[str]) -> bool:
    if os.name == "nt":  # pragma: no cover - portability: names are case-insensitive, suffixes optional
        base = re.sub(r"\.(exe|cmd|bat|com)$", "", name, flags=re.IGNORECASE).lower()
        return base in {n.lower() for n in names}
    return name in set(names)


@dataclass(frozen=True)
class AutoApproveRule:
    id: str
    tools: tuple[str, ...]
    domains: tuple[str, ...] | None = None
    paths: tuple[re.Pattern[str], ...] | None = None
    executables: tuple[str, ...] | None = None


def domain_matches(host: str, pattern: str) -> bool:
    pattern = pattern.lower().rstrip(".")
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern


# -- the policy file --------------------------------------------------------------------------
_RULE_EXAMPLES = {
    "match": {"type": "array", "items": {"type": "string"}},
    "not_match": {"type": "array", "items": {"type": "string"}},
}
_ID = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"}
_OPS = {"type": "array", "items": {"enum": list(PATH_OPS)}, "minItems": 1, "uniqueItems": True}
_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}
_SWITCH = {"oneOf": [{"type": "boolean"}, {"enum": ["enabled", "disabled"]}]}

POLICY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["version"],
    "properties": {
        "version": {"const": 1},
        "mode": {"enum": list(MODES)},
        "providers": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"enabled": {"type": "boolean"}},
            },
        },
        "tool_classes": {"type": "object", "additionalProperties": _SWITCH},
        "tools": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"enabled": {"type": "boolean"}, "require_approval": {"type": "boolean"}},
            },
        },
        "limits": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                f.name: {"type": "integer" if f.type == "int" else "number", "minimum": 0} for f in fields(Limits)
            },
        },
        "filesystem": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "allowed_roots": _STRINGS,
                "allow_hardlinks": {"type": "boolean"},
                "deny": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["id", "glob"],
                        "properties": {
                            "id": _ID,
                            "glob": {"type": "string", "minLength": 1},
                            "ops": _OPS,
                            **_RULE_EXAMPLES,
                        },
                    },
                },
                "deny_extensions": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["id", "extensions"],
                        "properties": {"id": _ID, "extensions": _STRINGS, "ops": _OPS, **_RULE_EXAMPLES},
                    },
                },
                "write_extensions": {"oneOf": [{"type": "null"}, _STRINGS]},
            },
        },
        "shell": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "executables": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["id", "names"],
                        "properties": {"id": _ID, "names": _STRINGS, **_RULE_EXAMPLES},
                    },
                },
                "privileged": _STRINGS,
                "env_passthrough": _STRINGS,
                "check_path_arguments": {"type": "boolean"},
                "search_path": {"oneOf": [{"type": "null"}, _STRINGS]},
            },
        },
        "web": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "searxng_url": {"type": ["string", "null"]},
                "schemes": {"type": "array", "items": {"enum": ["http", "https"]}},
                "allow_domains": _STRINGS,
                "deny_domains": _STRINGS,
                "allow_private": _STRINGS,
            },
        },
        "auto_approve": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "tools"],
                "properties": {
                    "id": _ID,
                    "tools": _STRINGS,
                    "domains": _STRINGS,
                    "paths": _STRINGS,
                    "executables": _STRINGS,
                },
            },
        },
    },
}


def _plain(node: Any) -> Any:
    """ruamel's round-trip containers to plain dicts, lists and scalars."""
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    return node


def _line_at(root: Any, path: Sequence[Any]) -> int | None:
    """1-based line of the deepest node on ``path`` that ruamel knows a position for."""
    node, line = root, None
    for key in path:
        try:
            if isinstance(key, int):
                pos = node.lc.item(key)
            else:
                pos = node.lc.key(key)
            line = int(pos[0]) + 1
            node = node[key]
        except Exception:
            break
    if line is None:
        try:
            line = int(root.lc.line) + 1
        except Exception:
            line = None
    return line


def _switch(value: Any) -> bool:
    return value is True or value == "enabled"


class Policy:
    """A validated policy document (not yet bound to a workspace)."""

    def __init__(self, data: dict[str, Any], *, source: str, tree: Any = None) -> None:
        self.data = data
        self.source = source
        self._tree = tree
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        self.hash = "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        self.mode: str = data.get("mode", "guide")
        self.providers = {name: bool(v.get("enabled", False)) for name, v in (data.get("providers") or {}).items()}
        self.tool_classes = {name: _switch(v) for name, v in (data.get("tool_classes") or {}).items()}
        self.tools: dict[str, dict[str, bool]] = dict(data.get("tools") or {})
        kinds = {f.name: (int if f.type == "int" else float) for f in fields(Limits)}
        values: dict[str, Any] = {k: kinds[k](v) for k, v in (data.get("limits") or {}).items()}
        self.limits = Limits(**values)
        fs = data.get("filesystem") or {}
        self.allowed_roots: list[str] = list(fs.get("allowed_roots") or [])
        self.allow_hardlinks = bool(fs.get("allow_hardlinks", False))
        self.deny_rules: list[DenyRule] = []
        for i, rule in enumerate(fs.get("deny") or []):
            deny = DenyRule(
                id=rule["id"],
                ops=frozenset(rule.get("ops") or PATH_OPS),
                glob=rule["glob"],
                regex=glob_to_regex(rule["glob"]),
            )
            self._check_examples(deny.matches, rule, ("filesystem", "deny", i), path_like=True)
            self.deny_rules.append(deny)
        for i, rule in enumerate(fs.get("deny_extensions") or []):
            exts = frozenset(e.lower() if e.startswith(".") else "." + e.lower() for e in rule["extensions"])
            deny = DenyRule(id=rule["id"], ops=frozenset(rule.get("ops") or PATH_OPS), extensions=exts)
            self._check_examples(deny.matches, rule, ("filesystem", "deny_extensions", i), path_like=True)
            self.deny_rules.append(deny)
        write_ext = fs.get("write_extensions")
        self.write_extensions: frozenset[str] | None = (
            None
            if write_ext is None
            else frozenset(e.lower() if e.startswith(".") else "." + e.lower() for e in write_ext)
        )
        sh = data.get("shell") or {}
        self.exec_rules: list[ExecRule] = []
        for i, rule in enumerate(sh.get("executables") or []):
            ex = ExecRule(id=rule["id"], names=tuple(rule["names"]))
            self._check_examples(lambda name, _abs, ex=ex: ex.matches(name), rule, ("shell", "executables", i))
            self.exec_rules.append(ex)
        self.privileged: tuple[str, ...] = tuple(sh.get("privileged") or ())
        self.env_passthrough: tuple[str, ...] = tuple(sh.get("env_passthrough") or ())
        self.check_path_arguments = bool(sh.get("check_path_arguments", True))
        self.search_path: list[str] | None = sh.get("search_path")
        web = data.get("web") or {}
        self.searxng_url: str | None = web.get("searxng_url")
        self.schemes: tuple[str, ...] = tuple(web.get("schemes") or ("https",))
        self.allow_domains: tuple[str, ...] = tuple(d.lower() for d in web.get("allow_domains") or ())
        self.deny_domains: tuple[str, ...] = tuple(d.lower() for d in web.get("deny_domains") or ())
        self.allow_private_hosts: set[str] = set()
        self.allow_private_nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for i, entry in enumerate(web.get("allow_private") or []):
            try:
                self.allow_private_nets.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                if not re.fullmatch(r"[A-Za-z0-9.-]+", entry):
                    reason = f"{entry!r} is neither a host nor a network"
                    raise self._error(("web", "allow_private", i), reason) from None
                self.allow_private_hosts.add(entry.lower().rstrip("."))
        self.auto_approve: list[AutoApproveRule] = []
        for rule in data.get("auto_approve") or []:
            self.auto_approve.append(
                AutoApproveRule(
                    id=rule["id"],
                    tools=tuple(rule["tools"]),
                    domains=tuple(rule["domains"]) if "domains" in rule else None,
                    paths=tuple(glob_to_regex(p) for p in rule["paths"]) if "paths" in rule else None,
                    executables=tuple(rule["executables"]) if "executables" in rule else None,
                )
            )
        ids = [r.id for r in self.deny_rules] + [r.id for r in self.exec_rules] + [r.id for r in self.auto_approve]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise self._error((), f"rule ids must be unique; repeated: {', '.join(dupes)}")

    # -- load-time checks ----------------------------------------------------------------
    def _error(self, path: Sequence[Any], reason: str) -> ConfigError:
        line = _line_at(self._tree, path) if self._tree is not None else None
        where = f"{self.source}:{line}" if line else self.source
        return ConfigError(f"{where}: {reason}", path=self.source, line=line, reason=reason)

    def _check_examples(
        self, matcher: Any, rule: dict[str, Any], path: tuple[Any, ...], *, path_like: bool = False
    ) -> None:
        for key, expected in (("match", True), ("not_match", False)):
            for j, example in enumerate(rule.get(key) or []):
                absolute = example if example.startswith("/") else "/" + example
                if bool(matcher(example.lstrip("/") if path_like else example, absolute)) != expected:
                    verb = "should match but does not" if expected else "should not match but does"
                    raise self._error((*path, key, j), f"rule {rule['id']!r}: example {example!r} {verb}")

    # -- variants ------------------------------------------------------------------------
    def with_mode(self, mode: str) -> Policy:
        if mode not in MODES:
            raise ConfigError(f"approval mode must be one of {', '.join(MODES)}, not {mode!r}")
        data = dict(self.data)
        data["mode"] = mode
        return Policy(data, source=self.source)

    def bind(self, workspace_root: Path | None, *, mode: str | None = None) -> BoundPolicy:
        return BoundPolicy(self, workspace_root, mode=mode or self.mode)


def parse_policy(text: str, *, source: str = "<policy>") -> Policy:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        tree = YAML(typ="rt").load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        where = f"{source}:{line}" if line else source
        raise ConfigError(f"{where}: {exc.problem or exc.context}", path=source, line=line) from exc
    except YAMLError as exc:
        raise ConfigError(f"{source}: {exc}", path=source) from exc
    if not isinstance(tree, dict):
        raise ConfigError(f"{source}:1: a policy is a mapping with at least 'version: 1'", path=source, line=1)
    data = _plain(tree)
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    error = best_match(Draft202012Validator(POLICY_SCHEMA).iter_errors(data))
    if error is not None:
        path = list(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
            extra = [k for k in error.instance if k not in known]
            if extra:
                path.append(extra[0])
        line = _line_at(tree, path)
        where = f"{source}:{line}" if line else source
        field_name = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        reason = f"{field_name}: {error.message}"
        raise ConfigError(f"{where}: {reason}", path=source, line=line, reason=reason)
    return Policy(data, source=source, tree=tree)


def load_policy(path: Path | str | None = None) -> Policy:
    """Load a policy file; ``None`` loads the shipped safe default."""
    if path is None:
        return default_policy()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: file not found", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8", path=str(path)) from exc
    return parse_policy(text, source=str(path))


_DEFAULT: Policy | None = None


def default_policy_text() -> str:
    from importlib.resources import files

    return (files("profiles") / "policy-default.yaml").read_text(encoding="utf-8")


def default_policy() -> Policy:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = parse_policy(default_policy_text(), source="profiles/policy-default.yaml")
    return _DEFAULT


# -- paths ------------------------------------------------------------------------------------
_LOOKALIKES = set("\u2024\u2025\u2026\uff0e\ufe52\u2215\u2044\uff0f\u29f8\u2571\uff3c\u2216\ufe68\uff5e\u02dc\u2e31")
_ENCODED = re.compile(r"%(?:[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4})")
_VARIABLE = re.compile(r"\$(?:\{|\(|[A-Za-z_])|%[A-Za-z_][A-Za-z0-9_]*%")


@dataclass(frozen=True)
class ResolvedPath:
    raw: str
    path: Path  # the real path (no symlinks), absolute
    root: Path
    rel: str  # posix path relative to ``root`` ("." for the root itself)
    exists: bool
    kind: str  # file | dir | missing
    dev_ino: tuple[int, int] | None
    lexical_rel: str

    def to_fact(self, arg: str) -> dict[str, Any]:
        return {
            "arg": arg,
            "raw": self.raw,
            "path": str(self.path),
            "root": str(self.root),
            "rel": self.rel,
            "kind": self.kind,
        }


def _deny(rule: str, reason: str, **details: Any) -> PolicyDenied:
    return PolicyDenied(reason, rule=rule, **details)


def _invalid(rule: str, reason: str) -> InvalidInput:
    return InvalidInput(reason, rule=rule)


def _within(path: str, root: str) -> bool:
    path_c, root_c = os.path.normcase(path), os.path.normcase(root)
    return path_c == root_c or path_c.startswith(root_c.rstrip(os.sep) + os.sep)


class PathGuard:
    """Every filesystem path a tool touches is resolved and checked here (twice: by the policy
    before the call, and again by the tool right before it opens the file)."""

    def __init__(self, policy: Policy, roots: list[Path], workspace_root: Path | None) -> None:
        self.policy = policy
        self.roots = roots
        self.workspace_root = workspace_root

    def root_of(self, path: str) -> Path | None:
        best: Path | None = None
        for root in self.roots:
            if _within(path, str(root)) and (best is None or len(str(root)) > len(str(best))):
                best = root
        return best

    @staticmethod
    def check_syntax(raw: Any, arg: str = "path") -> str:
        if not isinstance(raw, str):
            raise _invalid("fs.path_syntax", f"{arg} must be a string")
        if raw == "":
            raise _invalid("fs.path_syntax", f"{arg} must not be empty")
        if len(raw) > MAX_PATH_CHARS:
            raise _invalid("fs.path_syntax", f"{arg} is {len(raw)} characters long; the limit is {MAX_PATH_CHARS}")
        if "\x00" in raw:
            raise _invalid("fs.path_syntax", f"{arg} contains a NUL character")
        for char in raw:
            category = unicodedata.category(char)
            if category in {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}:
                raise _invalid("fs.path_syntax", f"{arg} contains a control or invisible character U+{ord(char):04X}")
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", raw):
            raise _invalid("fs.path_syntax", f"{arg} looks like a URL; give a filesystem path")
        if os.sep != "\\" and "\\" in raw:
            raise _invalid("fs.path_syntax", f"{arg} contains a backslash, which is not a separator here")
        for part in re.split(r"[/\\]", raw):
            if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
                raise _invalid("fs.path_syntax", f"{arg} has a component longer than {MAX_COMPONENT_BYTES} bytes")
        for match in _ENCODED.finditer(raw):
            escape = match.group(0)
            char = chr(int(escape[1:], 16)) if len(escape) == 3 else "%u"
            if char in "/\\.~%:" or char == "%u" or ord(char) < 32 or ord(char) >= 0x80:
                raise _deny(
                    "fs.encoded_path",
                    f"{arg} contains the percent-encoded character {escape}; "
                    "paths are taken literally and encoded path characters are refused",
                )
        if any(c in _LOOKALIKES for c in raw):
            raise _deny("fs.unicode_lookalike", f"{arg} contains a look-alike of '.', '/', '\\' or '~'")
        nfkc = unicodedata.normalize("NFKC", raw)
        if nfkc != raw and any(nfkc.count(c) != raw.count(c) for c in "./\\~:"):
            raise _deny("fs.unicode_lookalike", f"{arg} normalizes (NFKC) to a different path")
        if raw.startswith("~"):
            raise _deny("fs.home_expansion", f"{arg} starts with '~'; home expansion is not done, use a real path")
        if _VARIABLE.search(raw):
            raise _deny(
                "fs.variable_expansion", f"{arg} contains an environment variable reference; variables are not expanded"
            )
        return raw

    def resolve(self, raw: Any, op: PathOp, *, arg: str = "path", base: Path | None = None) -> ResolvedPath:
        text = self.check_syntax(raw, arg)
        if not self.roots:
            raise _deny("fs.allowed_roots", "the policy allows no filesystem roots")
        joined = Path(text)
        if not joined.is_absolute():
            joined = (base or self.roots[0]) / joined
        lexical = os.path.normpath(str(joined))
        lexical_root = self.root_of(lexical)
        if lexical_root is None:
            parts = re.split(r"[/\\]", text)
            rule = "fs.traversal" if ".." in parts else "fs.allowed_roots"
            raise _deny(rule, f"{arg} {text!r} is outside the allowed roots", path=text)
        real = os.path.realpath(str(joined))
        root = self.root_of(real)
        if root is None:
            raise _deny(
                "fs.symlink_escape", f"{arg} {text!r} resolves (through a link) outside the allowed roots", path=text
            )
        try:
            st = os.stat(real)
        except FileNotFoundError:
            st = None
        except NotADirectoryError:
            raise _invalid("fs.path_syntax", f"{arg} {text!r}: a parent is not a directory") from None
        except OSError as exc:
            raise _deny("fs.special_file", f"{arg} {text!r} cannot be examined ({exc.strerror})") from None
        kind = "missing"
        dev_ino = None
        if st is not None:
            dev_ino = (st.st_dev, st.st_ino)
            if stat.S_ISDIR(st.st_mode):
                kind = "dir"
            elif stat.S_ISREG(st.st_mode):
                kind = "file"
                if st.st_nlink > 1 and not self.policy.allow_hardlinks:
                    raise _deny(
                        "fs.hardlink",
                        f"{arg} {text!r} has {st.st_nlink} hard links; files with several links are refused",
                        path=text,
                    )
            else:
                raise _deny(
                    "fs.special_file",
                    f"{arg} {text!r} is not a regular file or directory (FIFO, device or socket)",
                    path=text,
                )
        rel = Path(real).relative_to(root).as_posix()
        lexical_rel = Path(lexical).relative_to(lexical_root).as_posix()
        self.check_rules(rel, real, op, arg=arg, raw=text)
        if lexical_rel != rel:
            self.check_rules(lexical_rel, lexical, op, arg=arg, raw=text)
        return ResolvedPath(text, Path(real), root, rel, st is not None, kind, dev_ino, lexical_rel)

    def check_rules(self, rel: str, absolute: str, op: PathOp, *, arg: str = "path", raw: str = "") -> None:
        """Deny globs, extension lists and workspace internals for an already resolved path."""
        for rule in self.policy.deny_rules:
            if op in rule.ops and rule.matches(rel, absolute):
                kind = "fs.deny" if rule.regex is not None else "fs.deny_extensions"
                raise _deny(
                    f"{kind}.{rule.id}", f"{arg} {raw or rel!r} is denied for {op} by rule {rule.id!r}", path=raw or rel
                )
        if op == "write":
            if self.policy.write_extensions is not None and rel != ".":
                name = rel.rsplit("/", 1)[-1].lower()
                if not any(name.endswith(ext) for ext in self.policy.write_extensions):
                    raise _deny(
                        "fs.write_extensions",
                        f"{arg} {raw or rel!r}: only "
                        f"{', '.join(sorted(self.policy.write_extensions))} files may be written",
                    )
            if self.workspace_root is not None and _within(absolute, str(self.workspace_root)):
                inner = Path(absolute).relative_to(self.workspace_root).parts
                if not inner or inner[0] in WORKSPACE_INTERNAL:
                    raise _deny(
                        "fs.workspace_internal",
                        f"{arg} {raw or rel!r} is part of the workspace's own "
                        "records (audit, transcripts, artifacts) and cannot be written by tools",
                    )

    def entry_denied(self, path: Path, op: PathOp) -> str | None:
        """The rule that hides an entry met while walking a directory (no exception)."""
        root = self.root_of(str(path))
        if root is None:
            return "fs.allowed_roots"
        try:
            self.check_rules(path.relative_to(root).as_posix(), str(path), op)
        except PolicyDenied as exc:
            return exc.rule
        return None

    def verify_fd(self, fd: int, resolved: ResolvedPath) -> None:
        """After opening: the file is still the one that was checked, and still inside a root."""
        st = os.fstat(fd)
        if resolved.dev_ino is not None and (st.st_dev, st.st_ino) != resolved.dev_ino:
            from services.tools.results import ToolPermissionDenied

            raise ToolPermissionDenied(f"{resolved.raw!r} changed while it was being opened; refused")
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1 and not self.policy.allow_hardlinks:
            raise _deny("fs.hardlink", f"{resolved.raw!r} has several hard links; refused")
        proc_link = f"/proc/self/fd/{fd}"
        if os.path.exists("/proc/self/fd"):
            try:
                actual = os.readlink(proc_link)
            except OSError:
                return
            if actual.startswith("/") and self.root_of(actual) is None:
                raise _deny("fs.symlink_escape", f"{resolved.raw!r} was redirected outside the allowed roots")


# -- the bound policy and its evaluation -------------------------------------------------------
_PRIVATE_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def _ip_is_private(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return bool(
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


def _subst(template: str, variables: dict[str, str | None]) -> str | None:
    missing = False

    def repl(match: re.Match[str]) -> str:
        nonlocal missing
        value = variables.get(match.group(1))
        if value is None:
            missing = True
            return ""
        return value

    out = re.sub(r"\$\{(\w+)\}", repl, template)
    return None if missing else os.path.expanduser(out)


class BoundPolicy:
    """A policy applied to one workspace: roots resolved, ready to evaluate calls."""

    def __init__(self, policy: Policy, workspace_root: Path | None, *, mode: str) -> None:
        if mode not in MODES:
            raise ConfigError(f"approval mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.policy = policy
        self.mode = mode
        self.limits = policy.limits
        self.workspace_root = Path(os.path.realpath(workspace_root)) if workspace_root is not None else None
        self.warnings: list[str] = []
        variables = {
            "workspace": str(self.workspace_root) if self.workspace_root else None,
            "home": os.path.expanduser("~"),
            "cwd": os.getcwd(),
        }
        roots: list[Path] = []
        for template in policy.allowed_roots:
            value = _subst(template, variables)
            if value is None:
                self.warnings.append(f"allowed root {template!r} skipped: no value for its variable")
                continue
            real = Path(os.path.realpath(value))
            if not real.is_dir():
                self.warnings.append(f"allowed root {template!r} ({real}) is not an existing directory; skipped")
                continue
            if real not in roots:
                roots.append(real)
        self.roots = roots
        self.guard = PathGuard(policy, roots, self.workspace_root)

    # -- web ------------------------------------------------------------------------------
    def check_url(self, url: Any, *, arg: str = "url") -> dict[str, Any]:
        if not isinstance(url, str) or not url or len(url) > 8192:
            raise _invalid("web.url", f"{arg} must be a non-empty URL of at most 8192 characters")
        if any(ord(c) < 33 or ord(c) == 127 for c in url):
            raise _invalid("web.url", f"{arg} contains white space or control characters")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise _invalid("web.url", f"{arg} is not a valid URL ({exc})") from None
        scheme = parts.scheme.lower()
        if scheme not in self.policy.schemes:
            raise _deny(
                "web.schemes",
                f"scheme {scheme or '(none)'!r} is not allowed (allowed: {', '.join(self.policy.schemes)})",
                url=url,
            )
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            raise _deny("web.userinfo", "URLs with user information (user@host) are refused", url=url)
        host = (parts.hostname or "").rstrip(".")
        if not host:
            raise _invalid("web.url", f"{arg} has no host")
        try:
            host = host.encode("idna").decode("ascii").lower()
        except UnicodeError:
            raise _invalid("web.url", f"{arg} has a host that is not a valid domain name") from None
        self.check_host(host, url=url)
        return {"url": url, "scheme": scheme, "host": host, "port": port or (443 if scheme == "https" else 80)}

    def check_host(self, host: str, *, url: str = "") -> None:
        for pattern in self.policy.deny_domains:
            if domain_matches(host, pattern):
                raise _deny("web.deny_domains", f"host {host!r} is denied by {pattern!r}", url=url, host=host)
        if self.policy.allow_domains and not any(domain_matches(host, p) for p in self.policy.allow_domains):
            if host not in self.policy.allow_private_hosts and not self._ip_allowed_literal(host):
                raise _deny("web.allow_domains", f"host {host!r} is not on the allowed domain list", url=url, host=host)
        try:
            ip = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            if re.fullmatch(r"(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}", host):
                raise _deny(
                    "web.noncanonical_ip",
                    f"host {host!r} is a non-canonical IP address form; write the address in dotted decimal",
                    url=url,
                    host=host,
                ) from None
            if (host in _PRIVATE_NAMES or host.endswith(".localhost")) and host not in self.policy.allow_private_hosts:
                raise _deny(
                    "web.private_address",
                    f"host {host!r} is a loopback name; add it to web.allow_private to reach it",
                    url=url,
                    host=host,
                ) from None
            return
        self.check_address(ip, host=host, url=url)

    def _ip_allowed_literal(self, host: str) -> bool:
        try:
            ip = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return False
        return any(ip in net for net in self.policy.allow_private_nets)

    def check_address(
        self, ip: ipaddress.IPv4Address | ipaddress.IPv6Address | str, *, host: str = "", url: str = ""
    ) -> None:
        """Refuse loopback, private, link-local and other non-public addresses unless allowed."""
        if isinstance(ip, str):
            ip = ipaddress.ip_address(ip.split("%", 1)[0])
        if not _ip_is_private(ip):
            return
        if host and host in self.policy.allow_private_hosts:
            return
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        for net in self.policy.allow_private_nets:
            if ip.version == net.version and ip in net:
                return
            if mapped is not None and net.version == 4 and mapped in net:
                return
        raise _deny(
            "web.private_address",
            f"address {ip} ({host or 'literal'}) is loopback, private or reserved; "
            "add it to web.allow_private to reach it",
            url=url,
            host=host,
            address=str(ip),
        )

    # -- shell ----------------------------------------------------------------------------
    def resolve_executable(self, name: str) -> str | None:
        search = os.pathsep.join(self.policy.search_path) if self.policy.search_path else os.environ.get("PATH")
        found = shutil.which(name, path=search)
        return os.path.realpath(found) if found else None

    def check_command(self, use: CommandUse) -> dict[str, Any]:
        argv = use.argv
        if (
            not isinstance(argv, list)
            or not argv
            or not all(isinstance(a, str) for a in argv)
            or sum(len(a) for a in argv) > 256_000
        ):
            raise _invalid("shell.argv", "argv must be a non-empty list of strings (at most 256,000 characters)")
        if any("\x00" in a for a in argv):
            raise _invalid("shell.argv", "argv contains a NUL character")
        name = argv[0]
        if not name or "/" in name or "\\" in name:
            raise _deny("shell.executables", f"executable {name!r} must be a bare name from the allowlist, not a path")
        rule = next((r for r in self.policy.exec_rules if r.matches(name)), None)
        if rule is None:
            raise _deny("shell.executables", f"executable {name!r} is not on the shell allowlist", executable=name)
        privileged = exec_name_matches(name, self.policy.privileged)
        cwd = self.guard.resolve(
            use.cwd if use.cwd is not None else str(self.roots[0]) if self.roots else ".", "list", arg="cwd"
        )
        if cwd.kind != "dir":
            raise _invalid("shell.cwd", f"cwd {cwd.raw!r} is not a directory")
        env = use.env or {}
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise _invalid("shell.env", "env must map names to strings")
        for key, value in env.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or "\x00" in value:
                raise _invalid("shell.env", f"env name {key!r} or its value is not usable")
            if key.upper().startswith(("LD_", "DYLD_", "ARIES_")) or key.upper() in {
                "PYTHONSTARTUP",
                "BASH_ENV",
                "ENV",
                "PROMPT_COMMAND",
            }:
                raise _deny("shell.env", f"env variable {key!r} may not be set by a tool call")
        checked: list[str] = []
        if self.policy.check_path_arguments:
            for arg in argv[1:]:
                for candidate in _path_candidates(arg, cwd.path):
                    try:
                        self.guard.resolve(candidate, "read", arg="argument", base=cwd.path)
                    except (PolicyDenied, InvalidInput) as exc:
                        inner = exc.details.get("rule", "fs.path_syntax")
                        raise _deny(
                            "shell.path_argument",
                            f"argument {arg!r} names a path the policy refuses: {exc.message}",
                            argument=arg,
                            path_rule=inner,
                        ) from None
                    checked.append(candidate)
        return {
            "executable_name": name,
            "executable": self.resolve_executable(name),
            "cwd": str(cwd.path),
            "cwd_rel": cwd.rel,
            "exec_rule": f"shell.executables.{rule.id}",
            "privileged": privileged,
            "argv": list(argv),
            "checked_path_arguments": checked,
        }

    # -- evaluation -----------------------------------------------------------------------
    def evaluate(self, tool: ToolDescriptor, args: dict[str, Any]) -> PolicyDecision:
        def decide(
            action: Action,
            rule: str,
            reason: str,
            *,
            tier: RiskTier | None = None,
            error_type: str | None = None,
            facts: dict[str, Any] | None = None,
            approved_by: str | None = None,
        ) -> PolicyDecision:
            return PolicyDecision(
                action,
                rule,
                reason,
                tool.tool_id,
                tier or tool.tier,
                self.mode,
                error_type or ("PolicyDenied" if action == "deny" else None),
                facts or {},
                approved_by,
            )

        if not self.policy.providers.get(tool.provider, False):
            return decide("deny", f"providers.{tool.provider}", f"provider {tool.provider!r} is not enabled")
        if tool.tool_class not in self.policy.tool_classes:
            return decide(
                "deny", "default.deny", f"tool class {tool.tool_class!r} is not enabled by the policy (deny by default)"
            )
        if not self.policy.tool_classes[tool.tool_class]:
            return decide("deny", f"tool_classes.{tool.tool_class}", f"tool class {tool.tool_class!r} is disabled")
        override = self.policy.tools.get(tool.tool_id, {})
        if override.get("enabled") is False:
            return decide("deny", f"tools.{tool.tool_id}", f"tool {tool.tool_id} is disabled by the policy")
        facts: dict[str, Any] = {}
        try:
            facts = self.check_resources(tool.resources(args))
        except PolicyDenied as exc:
            details = {k: _jsonable(v) for k, v in exc.details.items() if k != "rule"}
            return decide("deny", exc.rule, exc.message, facts=details)
        except InvalidInput as exc:
            rule = str(exc.details.get("rule", "input.resources"))
            return decide("deny", rule, exc.message, error_type="InvalidInput")
        tier = tool.effective_tier(args, facts)
        if facts.get("command", {}).get("privileged"):
            tier = RiskTier.EXEC_PRIVILEGED
        if override.get("require_approval"):
            return decide(
                "confirm",
                f"tools.{tool.tool_id}.require_approval",
                f"the policy requires approval for {tool.tool_id}",
                tier=tier,
                facts=facts,
            )
        mode = self.mode
        if tier is RiskTier.READ_ONLY:
            return decide(
                "allow",
                f"mode.{mode}.read_only",
                "READ_ONLY tools run without approval",
                tier=tier,
                facts=facts,
                approved_by="mode",
            )
        if mode == "strict":
            return decide(
                "confirm",
                "mode.strict.requires_approval",
                f"strict mode: {tier} needs approval",
                tier=tier,
                facts=facts,
            )
        if mode == "guide":
            return decide(
                "confirm", "mode.guide.requires_approval", f"guide mode: {tier} needs approval", tier=tier, facts=facts
            )
        # commander
        if tier is RiskTier.EXEC_USERSPACE:
            rule = facts.get("command", {}).get("exec_rule") or "shell.own_processes"
            return decide(
                "allow",
                rule,
                "commander mode: allowlisted EXEC_USERSPACE runs without approval",
                tier=tier,
                facts=facts,
                approved_by="rule",
            )
        if tier is RiskTier.WRITE_SAFE:
            return decide(
                "allow",
                "mode.commander.write_safe",
                "commander mode: WRITE_SAFE (create-only) runs without approval",
                tier=tier,
                facts=facts,
                approved_by="mode",
            )
        auto = self._auto_approve(tool.tool_id, facts)
        if auto is not None:
            return decide(
                "allow",
                f"auto_approve.{auto.id}",
                f"commander mode: allowlisted by rule {auto.id!r}",
                tier=tier,
                facts=facts,
                approved_by="rule",
            )
        return decide(
            "confirm",
            "mode.commander.requires_approval",
            f"commander mode: {tier} needs approval",
            tier=tier,
            facts=facts,
        )

    def _auto_approve(self, tool_id: str, facts: dict[str, Any]) -> AutoApproveRule | None:
        for rule in self.policy.auto_approve:
            if not any(fnmatch.fnmatchcase(tool_id, p) for p in rule.tools):
                continue
            if rule.domains is not None:
                hosts = facts.get("hosts") or []
                if not hosts or not all(any(domain_matches(h, d) for d in rule.domains) for h in hosts):
                    continue
            if rule.paths is not None:
                rels = [p["rel"] for p in facts.get("paths") or []]
                if not rels or not all(any(rx.match(r) for rx in rule.paths) for r in rels):
                    continue
            if rule.executables is not None:
                name = facts.get("command", {}).get("executable_name")
                if name is None or not exec_name_matches(name, rule.executables):
                    continue
            return rule
        return None

    def check_resources(self, resources: Iterable[Resource]) -> dict[str, Any]:
        facts: dict[str, Any] = {}
        for use in resources:
            if isinstance(use, PathUse):
                base = None
                if use.base is not None:
                    base_resolved = self.guard.resolve(use.base, "list", arg="base")
                    if base_resolved.kind != "dir":
                        raise _invalid("fs.path_syntax", f"base {use.base!r} is not a directory")
                    base = base_resolved.path
                resolved = self.guard.resolve(use.raw, use.op, arg=use.arg, base=base)
                facts.setdefault("paths", []).append(resolved.to_fact(use.arg))
            elif isinstance(use, CommandUse):
                facts["command"] = self.check_command(use)
            elif isinstance(use, UrlUse):
                checked = self.check_url(use.url, arg=use.arg)
                facts.setdefault("urls", []).append(checked["url"])
                facts.setdefault("hosts", []).append(checked["host"])
            elif isinstance(use, SearchEndpointUse):
                if not self.policy.searxng_url:
                    raise _deny("web.searxng_url", "no SearXNG endpoint is configured (web.searxng_url)")
                checked = self.check_url(self.policy.searxng_url, arg="web.searxng_url")
                facts["endpoint"] = checked["url"]
                facts.setdefault("hosts", []).append(checked["host"])
        return facts


def _path_candidates(arg: str, cwd: Path) -> list[str]:
    """Parts of a command argument that name a file: checked like fs paths."""
    candidates: list[str] = []
    values = [arg]
    if arg.startswith("-"):
        values = []
        if "=" in arg:
            values.append(arg.split("=", 1)[1])
        elif not arg.startswith("--"):
            # -/path, -f/path, -I~/x: option letters glued to a path
            values.extend(v for v in (arg[1:], arg[2:]) if v[:1] in {"/", "~", ".", "$", "%"})
    for value in values:
        if not value or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value):
            continue
        looks_like_path = (
            value[0] in "/~.$%"
            or "/" in value
            or "\\" in value
            or "\x00" in value
            or any(c in _LOOKALIKES for c in value)
        )
        if not looks_like_path:
            try:
                looks_like_path = os.path.lexists(cwd / value)
            except (OSError, ValueError):
                looks_like_path = True
        if looks_like_path:
            candidates.append(value)
    return candidates


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)
