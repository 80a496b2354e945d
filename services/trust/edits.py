"""Edits of authority files made through Aries: a trusted workspace stays trusted.

An outside edit of ``commands/NAME.md`` (an editor, a sync tool, a ``git pull``) after the operator
trusted an imported workspace makes it *changed* (``services.trust.records``); the same edit made
through Aries is the operator's own step, so the trust record takes the new fingerprint
(``records.operator_edit``). The editor (Ctrl+G on a command) calls :func:`write_command`.
"""

from __future__ import annotations

from pathlib import Path

from services.errors import ConfigError


def write_command(workspace_root: Path, name: str, text: str, *, ephemeral: bool = False) -> Path:
    """Write the workspace command ``name`` (its whole file, front matter and template) atomically,
    after checking it reads as a command (ConfigError, one line: nothing is written); the trust
    record follows when the workspace was trusted. Returns the file written."""
    from services.files.atomic import atomic_write_text
    from services.project.commands import RESERVED, command_path, parse_command
    from services.trust.records import operator_edit

    path = command_path(workspace_root, name)
    if name in RESERVED:
        raise ConfigError(f"/{name} is a built-in command, which always wins: choose another name")
    parse_command(name, text, source=f"commands/{path.name}")
    with operator_edit(workspace_root, ephemeral=ephemeral):
        path.parent.mkdir(exist_ok=True)
        atomic_write_text(path, text)
    return path


__all__ = ["write_command"]
