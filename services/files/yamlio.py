"""YAML through ruamel.yaml (round trip keeps comments), with file/line in every error.

Configuration files are untrusted input (a workspace's ``policy.yaml`` may come from anyone),
so parsing is bounded: at most ``MAX_YAML_BYTES`` of text and at most ``MAX_YAML_NODES`` nodes
*after alias expansion*.  The document is first composed into ruamel's node graph, where an
alias is a shared reference (cheap even for a "billion laughs" bomb); its expanded size is
counted with memoisation, and a document over the limit, or with a recursive alias, is refused
with a ``ConfigError`` naming the file and line before anything expands it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.errors import ConfigError
from services.files.atomic import atomic_write_text

MAX_YAML_BYTES = 1_000_000
MAX_YAML_NODES = 50_000


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.preserve_quotes = True
    return yaml


def _expanded_size(root: Any, source: str, limit: int) -> int:
    """Nodes in the document once every alias is expanded; ConfigError past ``limit``."""
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    sizes: dict[int, int] = {}
    active: set[int] = set()
    # iterative post-order walk (a deeply nested document must not exhaust the Python stack)
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            active.discard(key)
            children = _children(node, MappingNode, SequenceNode)
            total = 1 + sum(sizes[id(c)] for c in children)
            sizes[key] = total
            if total > limit:
                raise _limit_error(node, source, f"expands to more than {limit:,} nodes (alias expansion)")
            continue
        if key in sizes:
            continue
        if key in active:
            raise _limit_error(node, source, "contains a recursive alias")
        active.add(key)
        stack.append((node, True))
        for child in _children(node, MappingNode, SequenceNode):
            child_key = id(child)
            if child_key in active:
                raise _limit_error(child, source, "contains a recursive alias")
            if child_key not in sizes:
                stack.append((child, False))
    return sizes.get(id(root), 0)


def _children(node: Any, mapping: Any, sequence: Any) -> list[Any]:
    if isinstance(node, mapping):
        return [part for pair in node.value for part in pair]
    if isinstance(node, sequence):
        return list(node.value)
    return []


def _limit_error(node: Any, source: str, reason: str) -> ConfigError:
    mark = getattr(node, "start_mark", None)
    line = mark.line + 1 if mark is not None else None
    where = f"{source}:{line}" if line else source
    return ConfigError(f"{where}: the document {reason}; refused", path=source, line=line, reason=reason)


def parse_yaml_text(text: str, *, source: str = "<yaml>", max_nodes: int = MAX_YAML_NODES) -> Any:
    """Parse YAML text (round trip); bounded alias expansion; ConfigError with file:line."""
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(f"{source}: {len(text)} characters is more than the {MAX_YAML_BYTES} limit", path=source)
    try:
        node = _yaml().compose(text)
        if node is not None:
            _expanded_size(node, source, max_nodes)
        return _yaml().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        where = f"{source}:{line}" if line else source
        raise ConfigError(f"{where}: {exc.problem or exc.context}", path=source, line=line) from None
    except YAMLError as exc:
        raise ConfigError(
            f"{source}: {str(exc).splitlines()[0] if str(exc) else 'invalid YAML'}", path=source
        ) from None
    except RecursionError:
        raise ConfigError(f"{source}: the document is nested too deeply", path=source) from None


def load_yaml(path: Path) -> Any:
    """Parse ``path``; raise ConfigError naming the file and line on any problem."""
    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: file not found", path=str(path)) from exc
    if size > MAX_YAML_BYTES:
        raise ConfigError(f"{path}: {size} bytes is larger than the {MAX_YAML_BYTES}-byte limit", path=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})", path=str(path)) from exc
    return parse_yaml_text(text, source=str(path))


def dump_yaml(data: Any) -> str:
    stream = io.StringIO()
    _yaml().dump(data, stream)
    return stream.getvalue()


def write_yaml(path: Path, data: Any) -> None:
    atomic_write_text(path, dump_yaml(data))


def line_of(node: Any, key: str) -> int | None:
    """1-based line of ``key`` inside a ruamel mapping, when known."""
    try:
        return int(node.lc.key(key)[0]) + 1
    except Exception:
        return None


def plain(node: Any) -> Any:
    """ruamel's round-trip containers to plain dicts, lists and scalars."""
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    return node


def line_at(root: Any, path: Sequence[Any]) -> int | None:
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
