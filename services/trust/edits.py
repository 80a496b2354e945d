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


def editable(workspace_root: Path, name: str, *, ephemeral: bool = False) -> Path:
    """The file of the workspace command ``name``, when the operator may edit it through Aries.
    ConfigError, one line: a bad or built-in name, or a workspace whose settings wait for review (an
    untrusted import, or one changed since trusted: an edit through Aries must not make trusted what
    the operator has not reviewed)."""
    from services.project.commands import RESERVED, command_path
    from services.trust.records import workspace_trust

    path = command_path(workspace_root, name)
    if name in RESERVED:
        raise ConfigError(f"/{name} is a built-in command, which always wins: choose another name")
    state = workspace_trust(workspace_root, ephemeral=ephemeral)
    if state.needs_review:
        raise ConfigError(f"Workspace commands cannot be edited while the workspace is {state.label}: /trust first.")
    return path


def command_draft(workspace_root: Path, name: str, *, ephemeral: bool = False) -> str:
    """What the editor opens for ``/instructions edit NAME``: the command file as it is, or a new
    file's :data:`TEMPLATE` (ConfigError as :func:`editable`, or a file that cannot be read)."""
    path = editable(workspace_root, name, ephemeral=ephemeral)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return TEMPLATE.replace("NAME", name)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"commands/{path.name} cannot be read ({exc})") from None


TEMPLATE = """---
format_version: 1
description: What /NAME does, in one line
arguments: []        # e.g. [FILE, FOCUS?]: $1, $2 in the text below (a trailing ? makes one optional)
---
The prompt /NAME sends. $ARGUMENTS is everything typed after the name.
"""
"""A new command's file, as the editor first shows it (``NAME`` replaced)."""

__all__ = ["TEMPLATE", "command_draft", "editable", "write_command"]
