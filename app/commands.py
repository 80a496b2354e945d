"""The slash-command table. It dispatches commands and feeds ``/help`` and completion.

Each command maps to ``AriesApp.command_<handler>(args: list[str])``.  Adding a row here
is the only step needed for ``/help``, the suggester and the dispatcher to know it.
"""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class SlashCommand:
    name: str
    usage: str
    summary: str
    handler: str


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("help", "/help", "List commands and keys.", "help"),
    SlashCommand(
        "workspace",
        "/workspace [list | new NAME | open NAME]",
        "Switch, create or open workspaces (no argument: the switcher).",
        "workspace",
    ),
    SlashCommand(
        "artifact", "/artifact add PATH [DESCRIPTION] | list", "Add a file to the artifacts, or list them.", "artifact"
    ),
    SlashCommand(
        "rag",
        "/rag index add PATH [--name ID] | index list | index use ID | index drop ID | query TEXT [-k N] | "
        "show HANDLE | last | cancel",
        "Build and select indexes; search; open a chunk by handle; show the last retrieved set.",
        "rag",
    ),
    SlashCommand(
        "fs",
        "/fs ls [PATH] [-r] | read PATH | write PATH TEXT… | search QUERY [PATH] | patch DIFF_FILE",
        "Filesystem tools, through the policy gateway.",
        "fs",
    ),
    SlashCommand(
        "shell",
        "/shell run CMD [ARG…] | start CMD [ARG…] | poll ID | kill ID",
        "Shell tools (psutil-managed processes), through the policy gateway.",
        "shell",
    ),
    SlashCommand(
        "web",
        "/web search QUERY… | fetch URL | extract ARTIFACT_ID",
        "Web tools (SearXNG search, fetch into artifacts), through the policy gateway.",
        "web",
    ),
    SlashCommand("tool", "/tool TOOL_ID [JSON]", "Call any registered tool with JSON arguments.", "tool"),
    SlashCommand(
        "policy",
        "/policy explain-last | show | reload | mode [guide|commander|strict]",
        "Explain the last decision and its rule; show which policy file is in force; reload it after an edit; "
        "show or set the approval mode.",
        "policy",
    ),
    SlashCommand(
        "grants",
        "/grants [list] | revoke N | revoke all",
        "List the session grants ('approve for this session') and revoke them.",
        "grants",
    ),
    SlashCommand(
        "doctor", "/doctor", "Check that tools are registered, the policy loads and the gateway works.", "doctor"
    ),
    SlashCommand(
        "model",
        "/model [list] | use PROVIDER:MODEL | use offline",
        "List what each provider serves (offline, Ollama, OpenAI-compatible) and choose the model for this workspace.",
        "model",
    ),
    SlashCommand("new", "/new", "Start a new conversation in this workspace.", "new"),
    SlashCommand("quit", "/quit", "Leave Aries.", "quit"),
)

BY_NAME = {command.name: command for command in COMMANDS}


class CommandError(ValueError):
    """A slash command that cannot be run as typed; the message says what to do instead."""


def parse(line: str) -> tuple[SlashCommand, list[str]]:
    """Split ``/name args…`` into its command row and arguments, or raise CommandError."""
    text = line.strip()
    if not text.startswith("/") or text == "/":
        raise CommandError("commands start with '/': type /help for the list")
    try:
        words = shlex.split(text[1:])
    except ValueError as exc:
        raise CommandError(f"cannot parse the command: {exc}") from exc
    name, args = words[0].lower(), words[1:]
    command = BY_NAME.get(name)
    if command is None:
        close = difflib.get_close_matches(name, BY_NAME, n=1)
        hint = f" Did you mean /{close[0]}?" if close else ""
        raise CommandError(f"Unknown command /{name}.{hint} Type /help for the list.")
    return command, args


def suggestions() -> list[str]:
    """Completions for the prompt: every command name with its leading slash."""
    return [f"/{command.name}" for command in COMMANDS]
