"""The policy file: parsing (bounded YAML, JSON Schema, file:line errors), ``Policy`` (a
validated document, not yet bound to a workspace) and the shipped default.

The file format is summarised in ``profiles/policy-default.yaml``; a policy may carry
``match:`` / ``not_match:`` examples on its rules, checked at load time.  Any problem is a
``ConfigError`` naming the file, the line and the reason, never a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from services.errors import ConfigError
from services.hashing import content_hash
from services.policy.exec_table import DEFAULT_ENV_ALLOW
from services.policy.globs import AutoApproveRule, DenyRule, ExecRule, glob_to_regex
from services.policy.model import DEFAULT_VISIBLE, MODES, PATH_OPS, Limits, ShellSandbox
from services.policy.network import NetworkRules
from services.policy.schema import POLICY_SCHEMA


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

    def __init__(
        self,
        data: dict[str, Any],
        *,
        source: str,
        tree: Any = None,
        restriction: tuple[str, frozenset[str]] | None = None,
    ) -> None:
        self.data = data
        self.source = source
        self._tree = tree
        # A profile's tool list: (profile name, the tool ids it enables). Every other tool is denied
        # (rule ``profile.<name>``) before any other rule is looked at.
        self.restriction = restriction
        hashed: dict[str, Any] = data
        if restriction is not None:
            hashed = {"policy": data, "profile": restriction[0], "profile_tools": sorted(restriction[1])}
        self.hash = content_hash(hashed)
        self.mode: str = data.get("mode", "guide")
        self.providers = {name: bool(v.get("enabled", False)) for name, v in (data.get("providers") or {}).items()}
        try:  # the MCP servers' block: URLs must be loopback (the schema checked the rest)
            from services.policy.mcp import mcp_settings

            mcp_settings(data)
        except ConfigError as exc:
            raise self._error(("providers", "mcp", "servers"), exc.message) from None
        self.tool_classes = {name: _switch(v) for name, v in (data.get("tool_classes") or {}).items()}
        self.tools: dict[str, dict[str, bool]] = dict(data.get("tools") or {})
        kinds = {f.name: {"int": int, "bool": bool}.get(str(f.type), float) for f in fields(Limits)}
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
        self.env_allow: tuple[str, ...] = tuple(sh.get("env_allow", DEFAULT_ENV_ALLOW))
        self.inert_programs: tuple[str, ...] = tuple(sh.get("inert_programs") or ())
        self.check_path_arguments = bool(sh.get("check_path_arguments", True))
        self.search_path: list[str] | None = sh.get("search_path")
        self.sandbox = ShellSandbox(
            mode=str(sh.get("sandbox", "auto")),
            network=bool(sh.get("network", False)),
            outside_root=str(sh.get("outside_root", "read_only")),
            visible=tuple(sh.get("visible_paths", DEFAULT_VISIBLE)),
        )
        for i, visible in enumerate(self.sandbox.visible):
            if not visible.startswith(("/", "${")):
                raise self._error(("shell", "visible_paths", i), f"visible path {visible!r} must be absolute")
        self.network = NetworkRules(data.get("web") or {}, self._error)
        self.searxng_url = self.network.searxng_url
        self.schemes = self.network.schemes
        self.allow_domains = self.network.allow_domains
        self.deny_domains = self.network.deny_domains
        self.allow_private_hosts = self.network.allow_private_hosts
        self.allow_private_nets = self.network.allow_private_nets
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
        return Policy(data, source=self.source, restriction=self.restriction)

    def restricted(self, profile: str, tools: frozenset[str] | None) -> Policy:
        """This policy under profile ``profile``: only ``tools`` may run (None: no restriction)."""
        if tools is None:
            return self if self.restriction is None else Policy(self.data, source=self.source, tree=self._tree)
        return Policy(self.data, source=self.source, tree=self._tree, restriction=(profile, frozenset(tools)))

    def allows_tool(self, tool_id: str) -> bool:
        """False when a profile's tool list leaves ``tool_id`` out."""
        return self.restriction is None or tool_id in self.restriction[1]


def parse_policy(text: str, *, source: str = "<policy>") -> Policy:
    from services.yamlio import parse_yaml_text

    tree = parse_yaml_text(text, source=source)
    if not isinstance(tree, dict):
        raise ConfigError(f"{source}:1: a policy is a mapping with at least 'version: 1'", path=source, line=1)
    data = _plain(tree)
    from services.policy.capsule import capsule_to_policy, is_capsule

    if is_capsule(tree):  # the capsule format, translated onto the shipped default (see its module)
        from services.yamlio import line_of

        data = capsule_to_policy(tree, default_policy().data, source=source, line_of=line_of)
        tree = None
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
