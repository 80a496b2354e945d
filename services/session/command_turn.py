"""A workspace command made into a turn: its text (the operator's message) and the tools it may use.

The TUI's ``/NAME args`` and ``aries ask --command NAME ARGS…`` both come here, so a command reads the
same and is refused for the same reason (one line) on every surface. The text is the operator's:
the command is authority, read only while the workspace's settings are in force (``InForce.commands``
is empty otherwise), which is also why a command that is not there says whether it waits for review.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.errors import InvalidInput

if TYPE_CHECKING:
    from services.session.inforce import InForce


@dataclass(frozen=True)
class CommandTurn:
    name: str
    text: str
    """The expanded template: the turn's message."""
    source: str
    """``commands/NAME.md``: where the text came from."""
    only: tuple[str, frozenset[str]] | None
    """``(name, tool ids)`` the turn may use (the intersection of the command's tools and the active
    profile's); None: the command names no tools, the profile's apply as for any message."""


def command_turn(in_force: InForce, name: str, words: list[str]) -> CommandTurn:
    """The turn of the workspace command ``name`` with the arguments ``words``; InvalidInput (one line)
    when there is no such command in force, or it is called without the arguments it needs."""
    from services.errors import ConfigError
    from services.project.commands import allowed_tools

    command = next((c for c in in_force.commands if c.name == name), None)
    if command is None:
        raise InvalidInput(_missing(in_force, name))
    try:
        text = command.expand(words)
        tools = allowed_tools(
            command, in_force.profile.tools if in_force.profile else frozenset(), in_force.profiles_root
        )
    except ConfigError as exc:
        raise InvalidInput(exc.message) from None
    only = (name, tools) if tools is not None and (command.tools is not None or command.profile is not None) else None
    return CommandTurn(name, text, command.source, only)


def _missing(in_force: InForce, name: str) -> str:
    from services.project.commands import RESERVED, name_problem

    workspace = in_force.workspace.name
    problem = name_problem(name)
    if problem is not None:
        return f"{name!r}: {problem}"
    if name in RESERVED:
        return f"/{name} is a built-in command: a workspace command of that name never runs"
    if in_force.trust.status == "changed":
        return (
            f"workspace {workspace}'s settings changed since you trusted them: its commands are not in force "
            f"until you review them (aries workspace trust {workspace})"
        )
    if in_force.trust.pending:
        from services.trust.authority import pending

        waiting = pending(in_force.workspace.root)
        if waiting is not None and f"{name}.md" in waiting.commands:
            return f"command {name} came with an import and waits for your review: aries workspace trust {workspace}"
    for line in in_force.command_problems:
        if line.startswith(f"commands/{name}.md"):
            return line
    known = ", ".join(c.name for c in in_force.commands) or "none"
    return f"workspace {workspace} has no command {name!r} (its commands: {known})"


__all__ = ["CommandTurn", "command_turn"]
