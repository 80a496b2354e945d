"""YAML through ruamel.yaml (round trip keeps comments), with file/line in every error."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from services.atomic import atomic_write_text
from services.errors import ConfigError

MAX_YAML_BYTES = 1_000_000


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.preserve_quotes = True
    return yaml


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
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        return _yaml().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(f"{where}: {exc.problem or exc.context}", path=str(path), line=line) from exc
    except YAMLError as exc:
        raise ConfigError(f"{path}: {exc}", path=str(path)) from exc


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
