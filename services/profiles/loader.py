"""Finding and loading profiles: shipped ones in ``profiles/`` and the operator's own in
``<workspace>/profiles/NAME.yaml`` (which win by name).

Every problem is a :class:`ProfileError` (a ``ConfigError``) of one line naming the file, the line
and the field: bad YAML, an unknown field, a wrong type, an ``output_schema`` that is not a valid
JSON Schema, a tool that does not exist, a prompt or policy file that cannot be read. A broken
profile never stops Aries: :func:`list_profiles` lists it with its error.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.errors import ConfigError, InvalidName
from services.text.names import validate_name
from services.workspace.paths import PROFILES_DIR

if TYPE_CHECKING:
    from services.profiles.model import ModelSpec, RetrievalSpec
    from services.workspace.bridge_config import BridgeConfig

DEFAULT_PROFILE = "default"
WORKSPACE_PROFILES = PROFILES_DIR  # <workspace>/profiles/NAME.yaml
SUFFIX = ".yaml"
MAX_PROMPT_BYTES = 256_000


class ProfileError(ConfigError):
    """A profile that cannot be used (file:line: field: reason)."""

    code = "profile_error"


@dataclass(frozen=True)
class ActiveProfile:
    """A loaded, checked profile, with its references resolved."""

    name: str
    description: str
    path: Path | None
    origin: str  # "shipped" | "workspace"
    text: str  # the YAML as written (``/profile show``)
    system_prompt: str | None
    tools: frozenset[str] | None  # tool ids enabled; None: whatever the policy enables
    tool_patterns: tuple[str, ...] | None
    policy_path: Path | None
    mode: str | None
    retrieval: RetrievalSpec
    model: ModelSpec
    output_schema: dict[str, Any] | None = None
    cloud: BridgeConfig | None = None  # the profile's cloud bridge block; None: the workspace's


@dataclass
class ProfileEntry:
    """One profile as ``/profile list`` shows it: loaded, or broken with its error."""

    name: str
    path: Path
    origin: str
    profile: ActiveProfile | None = None
    error: str | None = None

    @property
    def description(self) -> str:
        return self.profile.description if self.profile is not None else ""


def shipped_dir() -> Path:
    from importlib.resources import files

    return Path(str(files("profiles")))


def workspace_dir(workspace_root: Path | None) -> Path | None:
    return workspace_root / WORKSPACE_PROFILES if workspace_root is not None else None


def _candidates(workspace_root: Path | None) -> dict[str, tuple[Path, str]]:
    """name → (path, origin); the workspace's own win over the shipped ones."""
    found: dict[str, tuple[Path, str]] = {}
    for origin, folder in (("shipped", shipped_dir()), ("workspace", workspace_dir(workspace_root))):
        if folder is None or not folder.is_dir():
            continue
        for path in sorted(folder.glob(f"*{SUFFIX}")):
            if path.name.startswith("policy-") or not path.is_file():
                continue  # the shipped policy files live beside the profiles
            found[path.stem] = (path, origin)
    return found


def list_profiles(workspace_root: Path | None) -> list[ProfileEntry]:
    """Every profile, by name, each loaded or marked broken with its one-line error."""
    entries = []
    for name, (path, origin) in sorted(_candidates(workspace_root).items()):
        entry = ProfileEntry(name, path, origin)
        try:
            entry.profile = load_profile_file(path, origin=origin)
        except ConfigError as exc:
            entry.error = exc.message
        entries.append(entry)
    return entries


def profile_path(name: str, workspace_root: Path | None) -> tuple[Path, str]:
    """Where profile ``name`` is read from; ProfileError naming the known ones if none."""
    try:
        validate_name(name, "profile")
    except InvalidName as exc:
        raise ProfileError(exc.message) from None
    candidates = _candidates(workspace_root)
    if name not in candidates:
        known = ", ".join(sorted(candidates)) or "none"
        raise ProfileError(f"no profile named {name!r} (known: {known})", name=name)
    return candidates[name]


def load_profile(name: str, workspace_root: Path | None = None) -> ActiveProfile:
    """Profile ``name`` (the workspace's own file wins over the shipped one)."""
    path, origin = profile_path(name, workspace_root)
    return load_profile_file(path, origin=origin)


def load_profile_file(path: Path, *, origin: str = "workspace") -> ActiveProfile:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"{path}: file not found", path=str(path)) from None
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})", path=str(path)) from None
    except OSError as exc:
        raise ProfileError(f"{path}: cannot be read ({exc.strerror})", path=str(path)) from None
    return parse_profile(text, source=str(path), path=path, origin=origin)


def _fail(source: str, tree: Any, loc: Sequence[Any], reason: str) -> ProfileError:
    from services.files.yamlio import line_at

    line = line_at(tree, list(loc)) if tree is not None else None
    field_name = ".".join(str(p) for p in loc) or "(top level)"
    where = f"{source}:{line}" if line else source
    return ProfileError(f"{where}: {field_name}: {reason}", path=source, line=line, field=field_name)


def _pydantic_reason(error: Any) -> str:
    kind = str(error.get("type", ""))
    if kind == "extra_forbidden":
        from services.profiles.model import Profile, ToolsSpec

        return "unknown field" + _known(error.get("loc", ()), Profile, ToolsSpec)
    if kind == "missing":
        return "is required"
    message = str(error.get("msg", "invalid value"))
    return message.removeprefix("Value error, ").replace("Input should be", "must be")


def _known(loc: Sequence[Any], profile_cls: Any, tools_cls: Any) -> str:
    from services.profiles.model import ModelSpec, RetrievalSpec

    parent = str(loc[0]) if len(loc) > 1 else ""
    cls = {"tools": tools_cls, "retrieval": RetrievalSpec, "model": ModelSpec}.get(parent, profile_cls)
    return f" (known: {', '.join(cls.model_fields)})"


def parse_profile(
    text: str, *, source: str = "<profile>", path: Path | None = None, origin: str = "workspace"
) -> ActiveProfile:
    """Parse and check one profile document; ProfileError with file:line: field: reason."""
    from pydantic import ValidationError

    from services.files.yamlio import parse_yaml_text, plain
    from services.profiles.model import Profile

    try:
        tree = parse_yaml_text(text, source=source)
    except ConfigError as exc:
        raise ProfileError(exc.message, **exc.details) from None
    if not isinstance(tree, dict):
        raise ProfileError(f"{source}:1: a profile is a mapping with at least 'name:'", path=source, line=1)
    data = plain(tree)
    try:
        spec = Profile.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(error.get("loc", ()))
        raise _fail(source, tree, loc, _pydantic_reason(error)) from None
    if path is not None and spec.name != path.stem:
        raise _fail(source, tree, ("name",), f"{spec.name!r} does not match the file name {path.name!r}")
    try:
        validate_name(spec.name, "profile")
    except InvalidName as exc:
        raise _fail(source, tree, ("name",), exc.message) from None
    base = path.parent if path is not None else Path.cwd()
    prompt = spec.system_prompt
    if spec.system_prompt_file is not None:
        prompt = _read_prompt(base / spec.system_prompt_file, source, tree)
    if spec.output_schema is not None:
        _check_schema(spec.output_schema, source, tree)
    tools, patterns = None, None
    if spec.tools.enable is not None:
        patterns = tuple(spec.tools.enable)
        tools = resolve_tools(patterns, lambda i, reason: _fail(source, tree, ("tools", "enable", i), reason))
    policy_path = None
    if spec.tools.policy is not None:
        policy_path = (base / spec.tools.policy).expanduser()
        from services.policy import load_policy

        try:
            load_policy(policy_path)
        except ConfigError as exc:
            raise _fail(source, tree, ("tools", "policy"), exc.message) from None
    return ActiveProfile(
        name=spec.name,
        description=spec.description,
        path=path,
        origin=origin,
        text=text,
        system_prompt=prompt,
        tools=tools,
        tool_patterns=patterns,
        policy_path=policy_path,
        mode=spec.tools.mode,
        retrieval=spec.retrieval,
        model=spec.model,
        output_schema=spec.output_schema,
        cloud=spec.cloud,
    )


def _read_prompt(file: Path, source: str, tree: Any) -> str:
    try:
        if file.stat().st_size > MAX_PROMPT_BYTES:
            raise _fail(source, tree, ("system_prompt_file",), f"{file} is larger than {MAX_PROMPT_BYTES} bytes")
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _fail(source, tree, ("system_prompt_file",), f"{file}: file not found") from None
    except UnicodeDecodeError:
        raise _fail(source, tree, ("system_prompt_file",), f"{file}: not valid UTF-8") from None
    except OSError as exc:
        raise _fail(source, tree, ("system_prompt_file",), f"{file}: cannot be read ({exc.strerror})") from None


def _check_schema(schema: dict[str, Any], source: str, tree: Any) -> None:
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        inner = [str(p) for p in exc.absolute_path]
        where = ("output_schema", *inner)
        raise _fail(source, tree, where, f"not a valid JSON Schema: {exc.message}") from None


def tool_ids() -> list[str]:
    from services.tools.builtin import default_registry

    return [spec.tool_id for spec in default_registry().list()]


def resolve_tools(patterns: Sequence[str], fail: Any) -> frozenset[str]:
    """The tool ids that ``patterns`` (classes, ids, globs) name; ``fail(i, reason)`` for one that
    names no existing tool."""
    from services.tools.builtin import default_registry

    specs = default_registry().list()
    chosen: set[str] = set()
    for i, pattern in enumerate(patterns):
        hits = {
            s.tool_id for s in specs if pattern in (s.tool_class, s.tool_id) or fnmatch.fnmatchcase(s.tool_id, pattern)
        }
        if not hits:
            raise fail(i, f"no tool or tool class {pattern!r} exists (see 'aries tool list')")
        chosen |= hits
    return frozenset(chosen)


__all__ = [
    "DEFAULT_PROFILE",
    "ActiveProfile",
    "ProfileEntry",
    "ProfileError",
    "list_profiles",
    "load_profile",
    "load_profile_file",
    "parse_profile",
    "profile_path",
    "resolve_tools",
    "shipped_dir",
    "tool_ids",
    "workspace_dir",
]
