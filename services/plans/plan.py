"""Plan files (the capsule format): ``version`` and a list of ``steps``, each a tool and its arguments.

```yaml
version: "1.0"
steps:
  - tool: fs.read            # capsule names, or Aries ids such as builtin:fs:read_text
    args: {path: "README.md"}
  - tool: shell.run
    args: {cmd: ["echo", "hello"]}
```

Capsule names map onto the builtin tools (``CAPSULE_TOOLS``) with their argument names
(``cmd`` → ``argv``, ``content`` → ``text``). Errors name the file, the line and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.errors import ConfigError
from services.hashing import sha256_tagged

CAPSULE_TOOLS: dict[str, tuple[str, dict[str, str]]] = {
    "fs.read": ("builtin:fs:read_text", {}),
    "fs.write": ("builtin:fs:write_text", {"content": "text"}),
    "fs.list": ("builtin:fs:list_dir", {}),
    "fs.search": ("builtin:fs:search_text", {}),
    "shell.run": ("builtin:shell:run", {"cmd": "argv"}),
    "http.get": ("builtin:web:fetch", {}),
    "web.fetch": ("builtin:web:fetch", {}),
    "web.search": ("builtin:web:search", {}),
}
MAX_STEPS = 1000
PLAN_VERSIONS = ("1", "1.0")


@dataclass(frozen=True)
class Step:
    index: int
    tool: str
    """As written in the plan."""
    tool_id: str
    args: dict[str, Any]
    line: int | None


@dataclass(frozen=True)
class Plan:
    source: str
    text: str
    steps: list[Step]
    name: str | None = None

    @property
    def hash(self) -> str:
        return sha256_tagged(self.text)


def _error(source: str, line: int | None, message: str) -> ConfigError:
    where = f"{source}:{line}" if line else source
    return ConfigError(f"{where}: {message}", path=source, line=line, reason=message)


def resolve_tool(name: str) -> tuple[str, dict[str, str]]:
    if name in CAPSULE_TOOLS:
        return CAPSULE_TOOLS[name]
    return name, {}


def parse_plan(text: str, *, source: str = "<plan>", known_tools: set[str] | None = None) -> Plan:
    from services.files.yamlio import line_of, parse_yaml_text

    tree = parse_yaml_text(text, source=source)
    if not isinstance(tree, dict):
        raise _error(source, 1, "a plan is a mapping with 'version' and 'steps'")
    unknown = sorted(set(tree) - {"version", "name", "description", "steps"})
    if unknown:
        raise _error(source, line_of(tree, unknown[0]), f"{unknown[0]}: unknown field (known: version, name, steps)")
    version = str(tree.get("version", ""))
    if version not in PLAN_VERSIONS:
        raise _error(source, line_of(tree, "version"), f"version: {version or 'missing'}; this Aries reads 1.0")
    steps = tree.get("steps")
    if not isinstance(steps, list) or not steps:
        raise _error(source, line_of(tree, "steps"), "steps: a non-empty list of {tool, args}")
    if len(steps) > MAX_STEPS:
        raise _error(source, line_of(tree, "steps"), f"steps: {len(steps)} steps; at most {MAX_STEPS}")
    parsed: list[Step] = []
    for index, step in enumerate(steps):
        line = _item_line(steps, index)
        if not isinstance(step, dict):
            raise _error(source, line, f"steps[{index}]: a mapping with 'tool' and 'args'")
        extra = sorted(set(step) - {"tool", "args", "name"})
        if extra:
            raise _error(source, line_of(step, extra[0]) or line, f"steps[{index}].{extra[0]}: unknown field")
        tool = step.get("tool")
        if not isinstance(tool, str) or not tool:
            raise _error(source, line, f"steps[{index}].tool: a tool name such as fs.read or builtin:fs:read_text")
        tool_id, renames = resolve_tool(tool)
        if known_tools is not None and tool_id not in known_tools:
            known = ", ".join(sorted(CAPSULE_TOOLS))
            raise _error(source, line_of(step, "tool") or line, f"steps[{index}].tool: unknown tool {tool!r} ({known})")
        args = step.get("args", {})
        if not isinstance(args, dict):
            raise _error(source, line_of(step, "args") or line, f"steps[{index}].args: a mapping")
        plain = _plain(args)
        parsed.append(Step(index, tool, tool_id, {renames.get(k, k): v for k, v in plain.items()}, line))
    name = tree.get("name")
    return Plan(source, text, parsed, str(name) if name is not None else None)


def load_plan(path: Path, *, known_tools: set[str] | None = None) -> Plan:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found", path=str(path)) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid UTF-8", path=str(path)) from None
    return parse_plan(text, source=str(path), known_tools=known_tools)


def _item_line(items: Any, index: int) -> int | None:
    lc = getattr(items, "lc", None)
    try:
        return int(lc.item(index)[0]) + 1 if lc is not None else None
    except (AttributeError, KeyError, IndexError, TypeError):
        return None


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node
