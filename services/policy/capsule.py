"""The capsule policy format, accepted wherever an Aries policy file is (it is translated on load).

```yaml
boundary: deny_by_default
tools:
  fs.read:   {allow_paths: ["./docs/**"], max_size_bytes: 1024}
  shell.run: {allow_executables: ["echo", "git"]}
  http.get:  {allow_domains: ["example.org"]}
```

Translation onto the shipped default (its limits, deny rules and privileged list stay):

- every tool class and tool is off except the tools listed (capsule names or Aries ids);
- ``allow_paths`` become the file roots (``./x/**`` → ``${workspace}/x``) and the listed tools'
  auto-approve paths; ``max_size_bytes`` the read limit;
- ``allow_executables`` the shell allowlist, ``allow_domains`` the web allowlist (http and https;
  a loopback or private host is reachable only on the port listed with it: ``127.0.0.1:8080``);
- mode ``commander`` with one ``auto_approve`` rule per listed tool: what the capsule policy allows
  runs without asking, anything else is refused — deny by default.
"""

from __future__ import annotations

import copy
import ipaddress
from typing import Any

from services.errors import ConfigError

_TOOLS: dict[str, str] = {
    "fs.read": "builtin:fs:read_text",
    "fs.write": "builtin:fs:write_text",
    "fs.list": "builtin:fs:list_dir",
    "fs.search": "builtin:fs:search_text",
    "shell.run": "builtin:shell:run",
    "http.get": "builtin:web:fetch",
    "web.fetch": "builtin:web:fetch",
    "web.search": "builtin:web:search",
}
_RULE_KEYS = {"allow_paths", "max_size_bytes", "allow_executables", "allow_domains"}
_ALL_TOOLS = sorted(set(_TOOLS.values()) | {
    "builtin:fs:add_artifact", "builtin:fs:apply_patch", "builtin:shell:start", "builtin:shell:poll",
    "builtin:shell:kill", "builtin:web:extract", "builtin:fs:restore",
})  # fmt: skip


def is_capsule(tree: Any) -> bool:
    return isinstance(tree, dict) and "boundary" in tree


def _root(pattern: str) -> str:
    root = pattern
    for suffix in ("/**", "/*", "**"):
        if root.endswith(suffix):
            root = root[: -len(suffix)]
    root = root.rstrip("/") or "."
    if root in (".", "./"):
        return "${workspace}"
    if root.startswith("./"):
        return "${workspace}/" + root[2:]
    if not root.startswith("/") and not root.startswith("~"):
        return "${workspace}/" + root
    return root


def _host(domain: str) -> str:
    """``127.0.0.1:8080`` → ``127.0.0.1`` (a loopback or private host is reachable only on the ports
    listed with it, as in Aries's own ``web.allow_private``)."""
    if domain.startswith("["):
        return domain[1:].split("]", 1)[0]
    return domain.rsplit(":", 1)[0] if domain.count(":") == 1 else domain


def _private(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_private or address.is_loopback


def capsule_to_policy(tree: Any, default: dict[str, Any], *, source: str, line_of: Any) -> dict[str, Any]:
    """The Aries policy data for a capsule policy document (validated; errors name file:line: field)."""

    def fail(node: Any, key: str, message: str) -> ConfigError:
        line = line_of(node, key)
        where = f"{source}:{line}" if line else source
        return ConfigError(f"{where}: {message}", path=source, line=line, reason=message)

    extra = sorted(set(tree) - {"boundary", "tools", "version", "description"})
    if extra:
        raise fail(tree, extra[0], f"{extra[0]}: unknown field in a capsule policy (boundary, tools)")
    if tree.get("boundary") != "deny_by_default":
        raise fail(tree, "boundary", "boundary: only 'deny_by_default' is supported")
    tools = tree.get("tools") or {}
    if not isinstance(tools, dict):
        raise fail(tree, "tools", "tools: a mapping of tool name to its rules")
    data = copy.deepcopy(default)
    data["mode"] = "commander"
    data["tool_classes"] = {"fs": "enabled", "shell": "enabled", "web": "enabled"}
    enabled: dict[str, dict[str, Any]] = {}
    roots: list[str] = []
    executables: list[str] = []
    domains: list[str] = []
    auto: list[dict[str, Any]] = []
    for name, rules in tools.items():
        tool_id = _TOOLS.get(str(name), str(name))
        if tool_id not in _ALL_TOOLS:
            raise fail(tools, name, f"tools.{name}: unknown tool (known: {', '.join(sorted(_TOOLS))})")
        rules = rules or {}
        if not isinstance(rules, dict):
            raise fail(tools, name, f"tools.{name}: a mapping of rules ({', '.join(sorted(_RULE_KEYS))})")
        unknown = sorted(set(rules) - _RULE_KEYS)
        if unknown:
            raise fail(rules, unknown[0], f"tools.{name}.{unknown[0]}: unknown rule ({', '.join(sorted(_RULE_KEYS))})")
        for key in ("allow_paths", "allow_executables", "allow_domains"):
            value = rules.get(key)
            if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
                raise fail(rules, key, f"tools.{name}.{key}: a list of strings")
        size = rules.get("max_size_bytes")
        if size is not None:
            if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
                raise fail(rules, "max_size_bytes", f"tools.{name}.max_size_bytes: a positive number of bytes")
            data["limits"]["fs_read_max_bytes"] = min(int(size), int(data["limits"].get("fs_read_max_bytes", size)))
        enabled[tool_id] = {"enabled": True}
        rule: dict[str, Any] = {"id": "capsule-" + str(name).replace(".", "-").replace(":", "-"), "tools": [tool_id]}
        for pattern in rules.get("allow_paths") or []:
            roots.append(_root(pattern))
        executables += rules.get("allow_executables") or []
        hosts = [_host(d) for d in rules.get("allow_domains") or []]
        domains += rules.get("allow_domains") or []
        if rules.get("allow_executables"):
            rule["executables"] = list(rules["allow_executables"])
        if hosts:
            rule["domains"] = hosts
        auto.append(rule)
    data["tools"] = {tool_id: enabled.get(tool_id, {"enabled": False}) for tool_id in _ALL_TOOLS}
    data["filesystem"]["allowed_roots"] = sorted(set(roots)) or ["${workspace}"]
    data["shell"]["executables"] = [{"id": "capsule", "names": sorted(set(executables))}] if executables else []
    data["web"]["allow_domains"] = sorted({_host(d) for d in domains})
    data["web"]["schemes"] = ["http", "https"]
    data["web"]["allow_private"] = sorted({d for d in domains if _private(_host(d))})
    data["auto_approve"] = auto
    return data
