"""The slash-command table (lowest UI layer, so that screens and the App can both read it).

One :class:`~widgets.command_spec.CommandSpec` per command: the one source for its usage line,
``/help``, Tab completion, the suggester, the palette and the typed object its handler receives (the
dataclasses below, or a :class:`ToolCall` for a tool-backed form). Each spec's ``handler`` names its
entry in ``app.commands.HANDLERS``, which calls the controller of its area
(``app/commands/<area>.py``); a test checks that every spec has one. A new slash command: a spec
here (its forms and typed objects), a handler there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from widgets.command_spec import (
    Arg,
    CommandError,
    CommandSpec,
    Form,
    Kind,
    Opt,
    ToolCall,
    complete_spec,
    palette_paths,
    parse_line,
    split_name,
    unknown,
)

__all__ = ["COMMANDS", "CommandError", "CommandSpec", "ToolCall", "complete", "palette_entries", "parse"]


# -- the typed objects handed to the handlers ------------------------------------------------------
@dataclass(frozen=True)
class Bare:
    """A command (or sub-command) that takes nothing."""


@dataclass(frozen=True)
class Action:
    """A sub-command that takes nothing: ``/serve stop``, ``/policy reload``, ``/rag last``…"""

    action: str


@dataclass(frozen=True)
class Named:
    """A sub-command on one name: ``/rag index use ID``, ``/profile show NAME``, ``/workspace new NAME``…"""

    action: str
    name: str


@dataclass(frozen=True)
class WorkspaceImport:
    bundle: str
    name: str | None = None


@dataclass(frozen=True)
class IndexAdd:
    path: str
    name: str | None = None


@dataclass(frozen=True)
class WatchIndex:
    """``/rag index watch NAME [off]`` (``state`` None: start the watch)."""

    name: str
    state: str | None = None


@dataclass(frozen=True)
class Query:
    """``/rag query TEXT [-k N]`` (``k`` None: the default), ``/context find|search QUERY``."""

    action: str
    text: str
    k: int | None = None


@dataclass(frozen=True)
class DesktopRequest:
    request: str


@dataclass(frozen=True)
class Undo:
    call_id: str | None = None


@dataclass(frozen=True)
class PolicyMode:
    mode: str | None = None


@dataclass(frozen=True)
class GrantsRevoke:
    """``/grants revoke ID`` (a grant id, ``g…``), ``revoke N`` (its place in ``/grants``) or
    ``revoke all`` (``target`` None: every session grant; lasting grants are revoked one by one)."""

    target: int | str | None = None


def _grant_target(text: str) -> int | str:
    return int(text) if text.isdigit() else text


@dataclass(frozen=True)
class ContextAt:
    """``/context ls [URI]`` / ``read URI`` / ``add PATH|URL [URI]`` / ``trace ID|last``."""

    action: str
    target: str | None = None
    uri: str | None = None


@dataclass(frozen=True)
class HistorySearch:
    """``/history search QUERY``: the line as typed (quotes kept for phrases); its filters
    (``role:R tool:T since:DATE``) are read by ``services.history_search.query.split_filters``."""

    query: str


@dataclass(frozen=True)
class CompactAction:
    """``/compact`` (``action`` ``run``), ``/compact show|edit|undo``, ``/compact auto on|off``."""

    action: str = "run"
    state: str | None = None


@dataclass(frozen=True)
class HistoryExport:
    """``/history export [md|html]``: the open conversation as a document."""

    fmt: str = "md"


def _export_format(text: str) -> str:
    if text not in ("md", "html"):
        raise CommandError(f"the export format is md or html, not '{text}'.")
    return text


@dataclass(frozen=True)
class Fork:
    turns: int | str | None = None  # a turn number or a checkpoint's name


@dataclass(frozen=True)
class TurnRef:
    """``/pin [N]``, ``/unpin N``, ``/rewind N|NAME``, ``/checkpoint NAME`` (``ref`` None: the last turn)."""

    ref: str | None = None


@dataclass(frozen=True)
class ThemeChoice:
    """``/theme [NAME]`` (None: list the themes)."""

    name: str | None = None


@dataclass(frozen=True)
class NotifySetting:
    """``/notify [bell|desktop on|off]`` (``what`` None: show the settings)."""

    what: str | None = None
    state: str | None = None


def _theme_names() -> tuple[str, ...]:
    from widgets.themes import theme_names

    return tuple(theme_names())


def _turns(text: str) -> int:
    if not text.isdigit():
        raise ValueError(text)
    return int(text)


def _turn_text(text: str) -> str:
    if not text.isdigit():
        raise ValueError(text)
    return text


def _turn_or_name(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def _tool_json(tool_id: str, payload: str = "") -> ToolCall:
    """``/tool TOOL_ID [JSON]``: the JSON as typed (its quotes survive), an object."""
    import json

    if not payload:
        return ToolCall(tool_id, {})
    try:
        value = json.loads(payload)
    except ValueError as exc:
        raise CommandError(f"the arguments are not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise CommandError("the arguments must be a JSON object.")
    return ToolCall(tool_id, value)


def _bare(name: str, summary: str, handler: str = "") -> CommandSpec:
    return CommandSpec(name, summary, (Form((), into=Bare),), handler or name)


def _named(action: str, metavar: str, kind: Kind, *words: str) -> Form:
    return Form((*words, action), (Arg("name", metavar, kind),), into=Named, preset=(("action", action),))


def _action(*words: str) -> Form:
    return Form(words, into=Action, preset=(("action", words[-1]),))


# -- the table ---------------------------------------------------------------------------------------------
_WORKSPACE = CommandSpec(
    "workspace",
    "Switch, create, open, export or import workspaces (no argument: the switcher).",
    (
        Form(("switch",), into=Action, preset=(("action", "switch"),), hidden=True),
        _action("list"),
        _named("new", "NAME", "workspace"),
        _named("open", "NAME", "workspace"),
        _named("export", "PATH", "path"),
        Form(
            ("import",),
            (Arg("bundle", "BUNDLE", "path"), Arg("name", "NAME", "workspace", optional=True)),
            into=WorkspaceImport,
        ),
    ),
    "workspace",
    bare=("switch",),
    bracket=True,
)

_ARTIFACT = CommandSpec(
    "artifact",
    "Add a file to the artifacts, or list them.",
    (
        Form(
            ("add",),
            (Arg("path", "PATH", "path"), Arg("description", "DESCRIPTION", optional=True, rest=True)),
            tool="builtin:fs:add_artifact",
        ),
        _action("list"),
    ),
    "artifact",
    bare=("list",),
    show_bare=False,
)

_RAG = CommandSpec(
    "rag",
    "Build and select indexes; search; open a chunk by handle; show the last retrieved set.",
    (
        Form(
            ("index", "add"),
            (Arg("path", "PATH", "path"),),
            (Opt(("--name",), "name", "ID", help="the index name (default: the folder's)", wants="an index name"),),
            into=IndexAdd,
        ),
        _action("index", "list"),
        _named("use", "ID", "index", "index"),
        _named("drop", "ID", "index", "index"),
        _named("repair", "ID", "index", "index"),
        Form(
            ("index", "watch"),
            (Arg("name", "ID", "index"), Arg("state", "off", optional=True, choices=("off",))),
            into=WatchIndex,
        ),
        Form(
            ("query",),
            (Arg("text", "TEXT", rest=True),),
            (Opt(("-k",), "k", "N", int, (1, 100), help="how many chunks (1 to 100)"),),
            into=Query,
            preset=(("action", "query"),),
        ),
        _named("show", "HANDLE", "handle"),
        _action("last"),
        _action("cancel"),
    ),
    "rag",
)

_FS = CommandSpec(
    "fs",
    "Filesystem tools, through the policy gateway.",
    (
        Form(
            ("ls",),
            (Arg("path", "PATH", "path", optional=True, default="."),),
            aliases=(("list",),),
            tool="builtin:fs:list_dir",
            short=(("recursive", "-r"),),
        ),
        Form(("read",), (Arg("path", "PATH", "path"),), tool="builtin:fs:read_text"),
        Form(
            ("write",),
            (Arg("path", "PATH", "path"), Arg("text", "TEXT…", raw=True, suffix="\n")),
            tool="builtin:fs:write_text",
        ),
        Form(
            ("search",),
            (Arg("query", "QUERY"), Arg("path", "PATH", "path", optional=True)),
            tool="builtin:fs:search_text",
        ),
        Form(("patch",), (Arg("patch_file", "DIFF_FILE", "path"),), tool="builtin:fs:apply_patch"),
    ),
    "fs",
)


def _argv(action: str) -> Form:
    return Form(
        (action,),
        (Arg("argv", "CMD", words=True), Arg("argv", "ARG…", optional=True, rest=True, words=True, greedy=True)),
        tool=f"builtin:shell:{action}",
    )


_SHELL = CommandSpec(
    "shell",
    "Shell tools (psutil-managed processes), through the policy gateway.",
    (
        _argv("run"),
        _argv("start"),
        Form(("poll",), (Arg("process_id", "ID", "process"),), tool="builtin:shell:poll"),
        Form(("kill",), (Arg("process_id", "ID", "process"),), tool="builtin:shell:kill"),
    ),
    "shell",
)

_WEB = CommandSpec(
    "web",
    "Web tools (SearXNG search, fetch into artifacts), through the policy gateway.",
    (
        Form(("search",), (Arg("query", "QUERY…", rest=True),), tool="builtin:web:search"),
        Form(("fetch",), (Arg("url", "URL", "url"),), tool="builtin:web:fetch"),
        Form(("extract",), (Arg("artifact_id", "ARTIFACT_ID", "artifact"),), tool="builtin:web:extract"),
    ),
    "web",
)

_CONTEXT = CommandSpec(
    "context",
    "Browse the axiom:// context tree (at URI), read a file, add a file or folder; find/search and their traces.",
    (
        Form(("ls",), (Arg("target", "URI", "uri", optional=True),), into=ContextAt, preset=(("action", "ls"),)),
        Form(("read",), (Arg("target", "URI", "uri"),), into=ContextAt, preset=(("action", "read"),)),
        Form(
            ("add",),
            (Arg("target", "PATH|URL", "path"), Arg("uri", "URI", "uri", optional=True)),
            into=ContextAt,
            preset=(("action", "add"),),
        ),
        Form(("find",), (Arg("text", "QUERY", rest=True),), into=Query, preset=(("action", "find"),)),
        Form(("search",), (Arg("text", "QUERY", rest=True),), into=Query, preset=(("action", "search"),)),
        Form(
            ("trace",),
            (Arg("target", "ID|last", "trace", choices=("last",)),),
            into=ContextAt,
            preset=(("action", "trace"),),
        ),
    ),
    "context",
    bare=("ls",),
    bracket=True,
)

COMMANDS: tuple[CommandSpec, ...] = (
    _bare("help", "List commands and keys."),
    _WORKSPACE,
    _ARTIFACT,
    _RAG,
    _FS,
    _SHELL,
    _WEB,
    CommandSpec(
        "desktop",
        'A task in plain words (create notes/todo.md with "buy milk", list notes, run pytest, search the web for X '
        "and fetch the first result): the plan of tool steps is shown, then run through the policy gateway.",
        (Form((), (Arg("request", "REQUEST…", raw=True, empty_ok=True),), into=DesktopRequest),),
        "desktop",
    ),
    CommandSpec(
        "tool",
        "Call any registered tool with JSON arguments.",
        (
            Form(
                (),
                (Arg("tool_id", "TOOL_ID", "tool"), Arg("payload", "JSON", optional=True, raw=True)),
                into=_tool_json,
            ),
        ),
        "tool",
    ),
    CommandSpec(
        "undo",
        "Undo a write or patch (default: the last one not yet undone) if its files are unchanged since; "
        "otherwise show what changed.",
        (Form((), (Arg("call_id", "CALL_ID", "call", optional=True),), into=Undo),),
        "undo",
    ),
    CommandSpec(
        "policy",
        "Explain the last decision and its rule; show which policy file is in force; reload it after an edit; "
        "show or set the approval mode.",
        (
            _action("explain-last"),
            _action("show"),
            _action("reload"),
            Form(
                ("mode",),
                (Arg("mode", "guide|commander|strict", optional=True, choices=("guide", "commander", "strict")),),
                into=PolicyMode,
            ),
        ),
        "policy",
    ),
    CommandSpec(
        "grants",
        "List the grants (this session's, and this workspace's lasting ones) and revoke them.",
        (
            _action("list"),
            Form(("revoke",), (Arg("target", "ID", convert=_grant_target),), into=GrantsRevoke),
            Form(("revoke", "all"), into=GrantsRevoke),
        ),
        "grants",
        bare=("list",),
    ),
    _bare("doctor", "Check that tools are registered, the policy loads and the gateway works."),
    CommandSpec(
        "model",
        "List what each provider serves (offline, Ollama, OpenAI-compatible) and choose the model for this workspace.",
        (
            _action("list"),
            _named("use", "PROVIDER:MODEL", "model"),
            Form(("use", "offline"), into=Named, preset=(("action", "use"), ("name", "offline"))),
        ),
        "model",
        bare=("list",),
    ),
    CommandSpec(
        "profile",
        "List the prompt profiles (broken ones marked), switch this workspace's profile, or read one's YAML.",
        (_action("list"), _named("use", "NAME", "profile"), _named("show", "NAME", "profile")),
        "profile",
        bare=("list",),
    ),
    _CONTEXT,
    CommandSpec(
        "serve",
        "Start the local web viewer/editor of this workspace's documents (127.0.0.1, a token in its URL), "
        "stop it, or show its URL.",
        (_action("start"), _action("stop"), _action("status")),
        "serve",
        bare=("start",),
        bracket=True,
    ),
    _bare(
        "trust",
        "Review what an imported workspace's settings would put in force (programs, connections, wider access, "
        "approval mode) and trust them.",
    ),
    _bare("new", "Start a new conversation in this workspace."),
    CommandSpec(
        "history",
        "List this workspace's conversations (date, turns, model, first prompt); Enter resumes one, f forks it. "
        'search QUERY: every conversation\'s messages, tool calls and results, attached files — words, "a phrase", '
        "+must -not, word*; filters in the query: role:user|assistant|tool tool:fs since:2026-11-01. "
        "Enter opens the conversation at the hit, f forks after its turn. export [md|html]: "
        "this conversation as a document in the workspace's exports/ folder.",
        (
            Form((), into=Bare),
            Form(("search",), (Arg("query", "QUERY…", raw=True),), into=HistorySearch),
            Form(
                ("export",),
                (Arg("fmt", "md|html", choices=("md", "html"), optional=True, default="md", convert=_export_format),),
                into=HistoryExport,
            ),
        ),
        "history",
    ),
    CommandSpec(
        "resume",
        "Continue a stored conversation (an id, a unique start of one, or last): the model sees its earlier turns.",
        (
            Form(
                (),
                (Arg("name", "ID|last", "conversation", choices=("last",)),),
                into=Named,
                preset=(("action", "resume"),),
            ),
        ),
        "resume",
    ),
    CommandSpec(
        "fork",
        "Continue a copy of this conversation up to turn N or checkpoint NAME (all by default); the original "
        "stays as it was.",
        (Form((), (Arg("turns", "N|NAME", "number", optional=True, convert=_turn_or_name),), into=Fork),),
        "fork",
    ),
    CommandSpec(
        "pin",
        "Pin turn N (the last by default): it is sent in every request and never left out; /usage shows its cost.",
        (Form((), (Arg("ref", "N", "number", optional=True, convert=_turn_text),), into=TurnRef),),
        "pin",
    ),
    CommandSpec(
        "unpin",
        "Unpin turn N: it may be left out again when the window is full.",
        (Form((), (Arg("ref", "N", "number", convert=_turn_text),), into=TurnRef),),
        "unpin",
    ),
    CommandSpec(
        "checkpoint",
        "Name the current turn (a name, not all digits): /rewind NAME and /fork NAME reach it.",
        (Form((), (Arg("ref", "NAME"),), into=TurnRef),),
        "checkpoint",
    ),
    _bare("checkpoints", "List this conversation's checkpoints (name, turn, when)."),
    CommandSpec(
        "rewind",
        "Put the conversation back to the end of turn N (or checkpoint NAME) and every file Aries's tools changed "
        "since, after one approval listing every file; the turns after it stay readable and /rewind brings them back.",
        (Form((), (Arg("ref", "N|NAME", "number"),), into=TurnRef),),
        "rewind",
    ),
    _bare(
        "copy",
        "Copy the last answer to the clipboard (OSC 52: your terminal must allow it; inside tmux, set-clipboard on).",
    ),
    CommandSpec(
        "tools",
        "offered: which enabled tools the last request offered the model (ranked by relevance to the message "
        "within the tools' budget), and why.",
        (_action("offered"),),
        "tools",
        bare=("offered",),
    ),
    _bare(
        "usage",
        "How the last model request shared the context window: system and profile, project instructions, pins, "
        "history, brought-back turns, passages, tool definitions, free.",
    ),
    CommandSpec(
        "instructions",
        "Show the project instructions sent with every turn (the workspace's AGENTS.md, while its settings are in "
        "force), and its workspace commands (commands/NAME.md, each /NAME); edit NAME: a command's file in $EDITOR "
        "(a new one from a template).",
        (Form((), into=Bare), _named("edit", "NAME", "command")),
        "instructions",
    ),
    CommandSpec(
        "compact",
        "Ask the model for a summary of the turns left out of the window (a transcript entry; sent as data "
        "when those turns are left out). show: read it; edit: in $EDITOR; undo: take the last back; "
        "auto on|off: write one by itself when turns start being left out.",
        (
            Form((), into=CompactAction),
            *(Form((what,), into=CompactAction, preset=(("action", what),)) for what in ("show", "edit", "undo")),
            Form(
                ("auto",),
                (Arg("state", "on|off", choices=("on", "off")),),
                into=CompactAction,
                preset=(("action", "auto"),),
            ),
        ),
        "compact",
    ),
    CommandSpec(
        "theme",
        "List the themes (light, dark, high contrast) or use one; kept in your settings for every workspace.",
        (Form((), (Arg("name", "NAME", "theme", optional=True, choices=_theme_names()),), into=ThemeChoice),),
        "theme",
    ),
    CommandSpec(
        "notify",
        "Show or set how Aries calls you when a call waits for approval or a long turn ends: the bell, a desktop "
        "notification (OSC 9/777, opt-in).",
        (
            Form((), into=NotifySetting),
            *(
                Form(
                    (what,),
                    (Arg("state", "on|off", choices=("on", "off")),),
                    into=NotifySetting,
                    preset=(("what", what),),
                )
                for what in ("bell", "desktop")
            ),
        ),
        "notify",
    ),
    _bare("replay", "Pick a stored conversation and read it as it was (read-only)."),
    _bare("runs", "Plan runs of this workspace and their timelines."),
    _bare("quit", "Leave Aries."),
)

BY_NAME = {command.name: command for command in COMMANDS}


def parse(line: str, specs: Iterable[CommandSpec] = COMMANDS) -> tuple[CommandSpec, Any]:
    """``/name args…`` → its spec and the typed object for its handler, or CommandError."""
    by_name = {spec.name: spec for spec in specs}
    name, rest = split_name(line)
    spec = by_name.get(name)
    if spec is None:
        raise unknown(name, by_name)
    return spec, parse_line(spec, rest)


def suggestions(specs: Iterable[CommandSpec] = COMMANDS) -> list[str]:
    """Completions for the prompt: every command name with its leading slash."""
    return [f"/{command.name}" for command in specs]


Values = Callable[[Kind, str], list[str]]
"""``values(kind, partial)``: what a positional of that completion kind may be (indexes, profiles…)."""


def complete(line: str, specs: Iterable[CommandSpec] = COMMANDS, values: Values | None = None) -> tuple[str, list[str]]:
    """Candidates for the last word of a slash-command ``line``: ``(prefix kept, [full words…])``.

    ``complete("/ra")`` → ``("/", ["rag"])``; ``complete("/rag in")`` → ``("/rag ", ["index"])``;
    ``complete("/rag query x -")`` → its options; a positional: its choices and ``values(kind, …)``;
    no candidates (not a command, or free text) → ``(line, [])``.
    """
    if not line.startswith("/"):
        return line, []
    by_name = {spec.name: spec for spec in specs}
    name, *words = line[1:].split(" ")
    if not words:
        return "/", sorted(n for n in by_name if n.startswith(name.lower()))
    *done, partial = words
    spec = by_name.get(name.lower())
    if spec is None or "" in done:
        return line, []  # two spaces: we are in free text
    candidates = complete_spec(spec, done, partial, values)
    return (line[: len(line) - len(partial)], candidates) if candidates else (line, [])


def palette_entries(specs: Iterable[CommandSpec] = COMMANDS) -> list[tuple[str, str, bool]]:
    """``(line, summary, runnable)`` for the command palette: each command and sub-command path.

    ``runnable`` is False when the operator must still type an argument: the palette then puts the
    line in the prompt instead of running it.
    """
    entries: list[tuple[str, str, bool]] = []
    for spec in specs:
        for words, runnable in palette_paths(spec):
            entries.append(("/" + " ".join([spec.name, *words]), spec.summary, runnable))
    return entries
