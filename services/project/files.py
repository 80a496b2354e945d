"""Reading the workspace's command files, without parsing them (no pydantic, no YAML reader: what is in
force reads them when the workspace's settings are, and parses them on first use)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from services.workspace.paths import COMMANDS_DIR

SUFFIX = ".md"
MAX_FILE_BYTES = 64 * 1024
"""A command file larger than this is refused (a prompt template, not a document)."""


@dataclass(frozen=True)
class CommandFile:
    """One ``commands/NAME.md`` as read when what is in force was resolved."""

    name: str
    source: str
    """``commands/NAME.md``."""
    text: str
    problem: str = ""
    """Why it could not be read ('' when it was)."""


def command_files(root: Path) -> list[Path]:
    """The ``*.md`` files directly in ``root/commands`` (sorted; symbolic links are not followed)."""
    folder = root / COMMANDS_DIR
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith(SUFFIX) and p.is_file() and not p.is_symlink())


def read_file(path: Path) -> CommandFile:
    """``path`` read (too large, not UTF-8, unreadable: a ``problem``, no text)."""
    name, source = path.name[: -len(SUFFIX)], f"{COMMANDS_DIR}/{path.name}"
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return CommandFile(name, source, "", f"{source}: cannot be read ({exc.strerror})")
    if len(data) > MAX_FILE_BYTES:
        return CommandFile(name, source, "", f"{source}: larger than {MAX_FILE_BYTES // 1024} KiB")
    try:
        return CommandFile(name, source, data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return CommandFile(name, source, "", f"{source}: not UTF-8 ({exc.reason} at byte {exc.start})")


def read_command_files(root: Path) -> tuple[CommandFile, ...]:
    """Every command file of the workspace folder ``root``, read."""
    return tuple(read_file(path) for path in command_files(root))


__all__ = ["MAX_FILE_BYTES", "SUFFIX", "CommandFile", "command_files", "read_command_files", "read_file"]
