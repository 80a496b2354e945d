"""The slash-command table (lowest UI layer, so that screens and the App can both read it).

The one source for ``/help``, Tab completion, the suggester and the palette. Each row's ``handler``
names its entry in ``app.commands.HANDLERS``, which calls the controller of its area
(``app/commands/<area>.py``); a test checks that every row has one.
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
    raw: bool = False  # the handler reads the line as typed: an apostrophe in plain words is not a quote


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("help", "/help", "List commands and keys.", "help"),
    SlashCommand(
        "workspace",
        "/workspace [list | new NAME | open NAME | export PATH | import BUNDLE [NAME]]",
        "Switch, create, open, export or import workspaces (no argument: the switcher).",
        "workspace",
    ),
    SlashCommand(
        "artifact", "/artifact add PATH [DESCRIPTION] | list", "Add a file to the artifacts, or list them.", "artifact"
    ),
    SlashCommand(
        "rag",
        "/rag index add PATH [--name ID] | index list | index use ID | index drop ID | index repair ID | "
        "query TEXT [-k N] | "
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
    SlashCommand(
        "desktop",
        "/desktop REQUEST…",
        'A task in plain words (create notes/todo.md with "buy milk", list notes, run pytest, search the web for X '
        "and fetch the first result): the plan of tool steps is shown, then run through the policy gateway.",
        "desktop",
        raw=True,
    ),
    SlashCommand("tool", "/tool TOOL_ID [JSON]", "Call any registered tool with JSON arguments.", "tool"),
    SlashCommand(
        "undo",
        "/undo [CALL_ID]",
        "Undo a write or patch (default: the last one not yet undone) if its files are unchanged since; "
        "otherwise show what changed.",
        "undo",
    ),
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
    SlashCommand(
        "profile",
        "/profile [list] | use NAME | show NAME",
        "List the prompt profiles (broken ones marked), switch this workspace's profile, or read one's YAML.",
        "profile",
    ),
    SlashCommand(
        "context",
        "/context [ls [URI] | read URI | add PATH|URL [URI] | find QUERY | search QUERY | trace ID|last]",
        "Browse the axiom:// context tree (at URI), read a file, add a file or folder; find/search and their traces.",
        "context",
    ),
    SlashCommand(
        "serve",
        "/serve [start | stop | status]",
        "Start the local web viewer/editor of this workspace's documents (127.0.0.1, a token in its URL), "
        "stop it, or show its URL.",
        "serve",
    ),
    SlashCommand(
        "trust",
        "/trust",
        "Review what an imported workspace's settings would put in force (programs, connections, wider access, "
        "approval mode) and trust them.",
        "trust",
    ),
    SlashCommand("new", "/new", "Start a new conversation in this workspace.", "new"),
    SlashCommand(
        "history",
        "/history",
        "List this workspace's conversations (date, turns, model, first prompt); Enter resumes one, f forks it.",
        "history",
    ),
    SlashCommand(
        "resume",
        "/resume ID|last",
        "Continue a stored conversation (an id, a unique start of one, or last): the model sees its earlier turns.",
        "resume",
    ),
    SlashCommand(
        "fork",
        "/fork [N]",
        "Continue a copy of this conversation's first N turns (all by default); the original stays as it was.",
        "fork",
    ),
    SlashCommand(
        "copy",
        "/copy",
        "Copy the last answer to the clipboard (OSC 52: your terminal must allow it; inside tmux, set-clipboard on).",
        "copy",
    ),
    SlashCommand("replay", "/replay", "Pick a stored conversation and read it as it was (read-only).", "replay"),
    SlashCommand("runs", "/runs", "Plan runs of this workspace and their timelines.", "runs"),
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
        words = text[1:].split()
        if not BY_NAME.get(words[0].lower(), COMMANDS[0]).raw:
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


# -- completion (Tab at the prompt, the palette): the literal words of each row's usage ---------------
def _split_top(text: str, sep: str = "|") -> list[str]:
    """Split ``text`` on ``sep`` outside brackets."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        if char == sep and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return [part for part in parts if part]


def _tokens(text: str) -> list[str]:
    """Words and whole ``[…]`` groups of a usage alternative."""
    tokens: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        if char == " " and depth == 0:
            if current:
                tokens.append("".join(current))
            current = []
        else:
            current.append(char)
    if current:
        tokens.append("".join(current))
    return tokens


def _is_literal(word: str) -> bool:
    return bool(word) and word[0].isalpha() and word == word.lower() and all(c.isalnum() or c == "-" for c in word)


Tree = dict[str, "Tree"]


def _add_alternative(tree: Tree, text: str) -> None:
    node = tree
    for token in _tokens(text):
        if token.startswith("[") and token.endswith("]"):
            inner = token[1:-1]
            choices = _split_top(inner)
            if all(_is_literal(c) for c in choices) and len(choices) > 1:
                for choice in choices:
                    node.setdefault(choice, {})
            elif all(" " in c or _is_literal(c) for c in choices) and len(choices) > 1:
                for choice in choices:  # "[list | new NAME | open NAME]": sub-commands
                    _add_alternative(node, choice)
            return  # an optional argument: nothing literal follows
        if not _is_literal(token):
            return
        node = node.setdefault(token, {})


def completion_tree() -> Tree:
    """``{command: {sub-command: {…}}}`` from the usages of the table (the literal, lower-case words)."""
    tree: Tree = {}
    for command in COMMANDS:
        node = tree.setdefault(command.name, {})
        usage = command.usage.strip()
        rest = usage.split(" ", 1)[1] if " " in usage else ""
        for alternative in _split_top(rest):
            _add_alternative(node, alternative)
    return tree


def complete(line: str) -> tuple[str, list[str]]:
    """Candidates for the last word of a slash-command ``line``: ``(prefix kept, [full words…])``.

    ``complete("/ra")`` → ``("/", ["rag"])``; ``complete("/rag in")`` → ``("/rag ", ["index"])``;
    no candidates (not a command, or an argument the table does not know) → ``(line, [])``.
    """
    if not line.startswith("/"):
        return line, []
    words = line[1:].split(" ")
    *done, partial = words
    node = completion_tree()
    for word in done:
        if word == "":
            return line, []  # two spaces: we are in free text
        child = node.get(word.lower())
        if child is None:
            return line, []
        node = child
    prefix = line[: len(line) - len(partial)]
    return prefix, sorted(name for name in node if name.startswith(partial.lower()))


def _alternatives(command: SlashCommand) -> list[list[str]]:
    """The token lists of each way to call ``command`` (a whole-bracket usage also allows nothing)."""
    usage = command.usage.strip()
    rest = usage.split(" ", 1)[1] if " " in usage else ""
    result: list[list[str]] = [] if rest else [[]]
    for alternative in _split_top(rest):
        if (
            alternative.startswith("[")
            and alternative.endswith("]")
            and _split_top(alternative[1:-1]) != [alternative[1:-1]]
        ):
            result.append([])
            result += [_tokens(inner) for inner in _split_top(alternative[1:-1])]
        else:
            result.append(_tokens(alternative))
    return result


def _runnable(path: list[str], alternatives: list[list[str]]) -> bool:
    """True when ``path`` is a whole call: what follows it in some alternative is optional or nothing."""
    for tokens in alternatives:
        if len(tokens) < len(path):
            continue
        head, following = tokens[: len(path)], tokens[len(path) :]
        matches = all(
            word == token or (token.startswith("[") and word in _split_top(token[1:-1]))
            for word, token in zip(path, head, strict=True)
        )
        if matches and all(token.startswith("[") for token in following):
            return True
    return False


def palette_entries() -> list[tuple[str, str, bool]]:
    """``(line, summary, runnable)`` for the command palette: each command and sub-command path.

    ``runnable`` is False when the operator must still type an argument: the palette then puts the
    line in the prompt instead of running it.
    """
    entries: list[tuple[str, str, bool]] = []
    tree = completion_tree()
    for command in COMMANDS:
        alternatives = _alternatives(command)

        def walk(
            path: list[str], node: Tree, command: SlashCommand = command, alts: list[list[str]] = alternatives
        ) -> None:
            line = "/" + " ".join([command.name, *path])
            entries.append((line, command.summary, _runnable(path, alts)))
            for word, child in node.items():
                walk([*path, word], child)

        walk([], tree[command.name])
    return entries
