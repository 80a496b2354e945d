"""Workspace commands in the slash grammar: ``commands/NAME.md`` of the workspace as ``/NAME``.

A workspace command is declared like any other (:class:`~widgets.command_spec.CommandSpec`), so its
usage, Tab completion, ``/help`` row and palette row come from the one grammar; it registers at run
time in the App's :class:`~widgets.command_spec.CommandRegistry`, where a built-in's name is never
taken (built-ins always win). Its words reach the handler as typed (:class:`WorkspaceRun`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from widgets.command_spec import Arg, CommandSpec, Form


@dataclass(frozen=True)
class WorkspaceRun:
    """``/NAME args…`` of a workspace command: its name and the arguments as typed."""

    name: str
    text: str = ""

    def words(self) -> list[str]:
        """The arguments, shell-style (quotes group words); as whitespace-separated words when the
        quoting does not close."""
        try:
            return shlex.split(self.text)
        except ValueError:
            return self.text.split()


def workspace_spec(name: str, description: str, arguments: tuple[str, ...], source: str) -> CommandSpec:
    """The spec of the workspace command ``name`` (``source``: its file, said in the help)."""
    words = [f"[{a[:-1]}]" if a.endswith("?") else a for a in arguments]
    metavar = " ".join(words) if words else "[ARGUMENTS…]"
    summary = f"{description or 'A workspace command.'} (workspace command: {source})"
    form = Form((), (Arg("text", metavar, raw=True, empty_ok=True),), into=WorkspaceRun, preset=(("name", name),))
    return CommandSpec(name, summary, (form,), "")


__all__ = ["WorkspaceRun", "workspace_spec"]
