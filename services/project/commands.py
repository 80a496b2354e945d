"""Workspace commands: ``commands/NAME.md`` becomes ``/NAME`` (the TUI) and ``aries ask --command NAME``.

A command file is optional YAML front matter between ``---`` lines, then the prompt template::

    ---
    format_version: 1
    description: Review a file for bugs
    arguments: [FILE, FOCUS?]     # names shown in the usage; a trailing ? makes one optional
    tools: [fs]                   # or `profile: NAME`: the tools the command may use (optional)
    ---
    Review $1 for bugs, looking at $2 first. Everything typed: $ARGUMENTS

``$ARGUMENTS`` is every argument as typed (words joined by one space), ``$1``…``$9`` one each (empty
when not given), ``$$`` a dollar sign. The expanded text is the operator's message: it reaches the
model as instructions, which is why the file is authority (``services.trust.authority``) and is read
only while the workspace's settings are in force.

Names are plain ASCII words, ``[a-z][a-z0-9-]*`` (at most :data:`MAX_NAME` characters): a look-alike
(``rеview`` with a Cyrillic ``е``), an upper-case or a dotted name is refused with one line. A name a
built-in command holds (:data:`RESERVED`) is listed as shadowed and never runs: built-ins always win.

A command runs with the intersection of its tools and the active profile's (:func:`allowed_tools`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.errors import ConfigError
from services.project.files import SUFFIX, CommandFile, read_command_files
from services.workspace.paths import COMMANDS_DIR

COMMAND_FORMAT = 1
"""The format version of a command file this Aries reads (``format_version`` in its front matter)."""
MAX_NAME = 32
NAME_RULE = "a command name is a plain ASCII word: a lowercase letter, then lowercase letters, digits or '-'"
_NAME = re.compile(r"[a-z][a-z0-9-]*")
_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9]|\$)")

RESERVED = frozenset(
    {
        "artifact", "context", "copy", "desktop", "doctor", "fork", "fs", "grants", "help", "history", "model",
        "new", "notify", "policy", "profile", "quit", "rag", "replay", "resume", "runs", "serve", "shell",
        "theme", "tool", "trust", "undo", "usage", "web", "workspace", "instructions", "pin", "unpin",
        "checkpoint", "checkpoints", "rewind", "tools", "compact",
    }
)  # fmt: skip
"""Names the built-in slash commands hold (``widgets.commands``; a test keeps the two in step): a
workspace command of one of these names is shadowed — listed, never run."""


class CommandFront(BaseModel):
    """The front matter of a command file."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = COMMAND_FORMAT
    """The file's format; a newer one than :data:`COMMAND_FORMAT` is refused."""
    description: str = Field(default="", max_length=400)
    """One line for ``/help``, completion and the trust review."""
    arguments: list[str] = Field(default_factory=list, max_length=9)
    """The arguments' names, for the usage line (``FOCUS?``: optional)."""
    profile: str | None = None
    """The command uses this profile's tools (intersected with the active profile's)."""
    tools: list[str] | None = None
    """Or: the tools it may use, as a profile's ``tools.enable`` names them (classes, ids, globs)."""


@dataclass(frozen=True)
class WorkspaceCommand:
    """One command file, read and checked."""

    name: str
    source: str
    """Where it came from: ``commands/NAME.md`` of the workspace."""
    body: str
    description: str = ""
    arguments: tuple[str, ...] = ()
    profile: str | None = None
    tools: tuple[str, ...] | None = None

    @property
    def required(self) -> int:
        return sum(1 for name in self.arguments if not name.endswith("?"))

    @property
    def usage(self) -> str:
        words = [f"[{name[:-1]}]" if name.endswith("?") else name for name in self.arguments]
        return " ".join([f"/{self.name}", *words]) if words else f"/{self.name} [ARGUMENTS…]"

    def expand(self, words: list[str]) -> str:
        """The template with the arguments put in; CommandUsageError (one line) when one is missing."""
        if len(words) < self.required:
            raise CommandUsageError(f"/{self.name} needs {self.required} argument(s): {self.usage}")

        def put(match: re.Match[str]) -> str:
            key = match.group(1)
            if key == "$":
                return "$"
            if key == "ARGUMENTS":
                return " ".join(words)
            index = int(key) - 1
            return words[index] if index < len(words) else ""

        return _PLACEHOLDER.sub(put, self.body).strip()


class CommandUsageError(ConfigError):
    """A workspace command called without the arguments it needs."""


@dataclass
class Commands:
    """The commands of one workspace folder, and what is wrong with the files that are not commands."""

    commands: list[WorkspaceCommand] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """One line per file that is no usable command (a bad name, bad front matter, a shadowed name)."""
    shadowed: list[str] = field(default_factory=list)

    def get(self, name: str) -> WorkspaceCommand | None:
        return next((command for command in self.commands if command.name == name), None)


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a command's name (None: it can)."""
    if not name.isascii() or _NAME.fullmatch(name) is None:
        return NAME_RULE
    if len(name) > MAX_NAME:
        return f"a command name has at most {MAX_NAME} characters"
    return None


def _split(text: str, source: str) -> tuple[Any, str]:
    """``(parsed front matter or None, body)``."""
    if not text.startswith("---"):
        return None, text
    first, _, rest = text.partition("\n")
    if first.strip() != "---":
        return None, text
    match = re.search(r"(?m)^---[ \t]*$", rest)
    if match is None:
        raise ConfigError(f"{source}:1: front matter: no closing '---' line", path=source, line=1)
    from services.files.yamlio import parse_yaml_text

    tree = parse_yaml_text(rest[: match.start()], source=source)
    return tree, rest[match.end() :].lstrip("\n")


def parse_command(name: str, text: str, *, source: str) -> WorkspaceCommand:
    """The command ``name`` from the text of its file; ConfigError (one line, ``source:line: field:
    reason``) when the front matter is wrong."""
    from services.files.yamlio import line_at, plain

    problem = name_problem(name)
    if problem is not None:
        raise ConfigError(f"{source}: {problem}", path=source)
    tree, body = _split(text, source)
    data = plain(tree) if tree is not None else {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}:2: front matter: a mapping of description, arguments, profile or tools", path=source
        )
    try:
        front = CommandFront.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = [str(part) for part in error.get("loc", ())]
        line = line_at(tree, loc) if tree is not None and loc else None
        reason = "unknown field" if error.get("type") == "extra_forbidden" else str(error.get("msg", "invalid"))
        where = f"{source}:{line + 1}" if line else source  # +1: the opening '---'
        raise ConfigError(f"{where}: {'.'.join(loc) or 'front matter'}: {reason}", path=source) from None
    if front.format_version > COMMAND_FORMAT:
        raise ConfigError(
            f"{source}: format_version {front.format_version} is newer than this Aries reads ({COMMAND_FORMAT})",
            path=source,
        )
    if front.profile is not None and front.tools is not None:
        raise ConfigError(f"{source}: front matter: give a profile or a tool list, not both", path=source)
    if not body.strip():
        raise ConfigError(f"{source}: the command has no prompt after its front matter", path=source)
    return WorkspaceCommand(
        name=name,
        source=source,
        body=body,
        description=" ".join(front.description.split()),
        arguments=tuple(front.arguments),
        profile=front.profile,
        tools=tuple(front.tools) if front.tools is not None else None,
    )


def parse_commands(files: tuple[CommandFile, ...], reserved: frozenset[str] = RESERVED) -> Commands:
    """The commands of ``files`` (read by :func:`services.project.files.read_command_files`); a file that
    is not a usable command is one line of ``problems``."""
    found = Commands()
    for file in files:
        if file.problem:
            found.problems.append(file.problem)
            continue
        try:
            command = parse_command(file.name, file.text, source=file.source)
        except ConfigError as exc:
            message = exc.message if exc.message.startswith(file.source) else f"{file.source}: {exc.message}"
            found.problems.append(message)
            continue
        if file.name in reserved:
            found.shadowed.append(file.name)
            found.problems.append(
                f"{file.source}: /{file.name} is a built-in command, which always wins: this one never runs"
            )
            continue
        found.commands.append(command)
    return found


def load_commands(root: Path, reserved: frozenset[str] = RESERVED) -> Commands:
    """Every command of the workspace folder ``root`` (the caller decides whether its settings are in
    force)."""
    return parse_commands(read_command_files(root), reserved)


def command_tools(command: WorkspaceCommand, profiles_root: Path | None) -> frozenset[str] | None:
    """The tool ids the command names (its profile's, or its tool list); None: it names none."""
    if command.profile is not None:
        from services.profiles import load_profile

        return load_profile(command.profile, profiles_root).tools
    if command.tools is not None:
        from services.profiles.loader import resolve_tools

        def fail(index: int, reason: str) -> ConfigError:
            return ConfigError(f"{command.source}: tools.{index}: {reason}", path=command.source)

        return resolve_tools(command.tools, fail)
    return None


def allowed_tools(
    command: WorkspaceCommand, active: frozenset[str] | None, profiles_root: Path | None
) -> frozenset[str] | None:
    """The tools a run of ``command`` may use: the intersection of its own and the active profile's
    (``active``; None: whatever the policy enables). None: no narrowing beyond the profile's."""
    own = command_tools(command, profiles_root)
    if own is None:
        return active
    return own if active is None else own & active


def command_path(root: Path, name: str) -> Path:
    """Where the command ``name`` lives in the workspace folder ``root`` (ConfigError: a bad name)."""
    problem = name_problem(name)
    if problem is not None:
        raise ConfigError(f"{name!r}: {problem}")
    return root / COMMANDS_DIR / f"{name}{SUFFIX}"


__all__ = [
    "COMMAND_FORMAT",
    "RESERVED",
    "CommandFront",
    "CommandUsageError",
    "Commands",
    "WorkspaceCommand",
    "SUFFIX",
    "allowed_tools",
    "command_path",
    "command_tools",
    "load_commands",
    "name_problem",
    "parse_command",
    "parse_commands",
]
