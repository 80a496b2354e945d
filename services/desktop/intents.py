"""The deterministic intent parser of Desktop Ops: a plain request → a plan of builtin tool steps.

Used when no model is configured (the ``offline`` provider). It covers the common intents and
nothing else; a request it cannot read is a ``DesktopError`` whose one line says why and what
would work — never an empty plan::

    create notes/todo.md with "buy milk"      → builtin:fs:write_text (new file only)
    write "buy bread" to notes/todo.md        → builtin:fs:write_text (overwrite)
    read notes/todo.md                        → builtin:fs:read_text
    list notes [recursively]                  → builtin:fs:list_dir
    search for "TODO" in src                  → builtin:fs:search_text
    run pytest -q                             → builtin:shell:run
    start python3 -m http.server [and poll it] → builtin:shell:start, builtin:shell:poll
    poll p1-abc123 / kill p1-abc123           → builtin:shell:poll / builtin:shell:kill
    search the web for aries [and fetch the first result] → builtin:web:search (+ builtin:web:fetch)
    fetch https://example.org/                → builtin:web:fetch

The same request always gives the same plan (no clock, no file system, no randomness).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from services.desktop.plan import DesktopError, DesktopPlan, PlanStep, StepRef

POLL_WAIT_S = 10.0  # how long the poll after a start waits for the process to end or say something

EXAMPLES = (
    'create notes/todo.md with "buy milk"',
    "read notes/todo.md",
    "list notes",
    'search for "TODO" in src',
    "run pytest",
    "start python3 -m http.server and poll it",
    "search the web for aries and fetch the first result",
)
UNDERSTOOD = (
    "Desktop Ops understands: create/write a file, read a file, list a directory, search text, "
    "run a command, start a process (and poll or kill it), search the web (and fetch a result), fetch a URL"
)

_POLITE = {"please", "pls", "can", "could", "would", "you", "kindly", "now"}
_CREATE = {"create", "make", "new", "touch"}
_WRITE = {"write", "save", "put"}
_READ = {"read", "cat", "open", "show", "view", "print", "display"}
_LIST = {"list", "ls", "dir"}
_SEARCH = {"search", "find", "grep"}
_WEB_WORDS = {"web", "internet", "online", "searxng"}
_RUN = {"run", "execute", "exec"}
_START = {"start", "launch", "spawn", "background"}
_POLL = {"poll", "check", "status"}
_KILL = {"kill", "stop", "terminate", "end"}
_FETCH = {"fetch", "download", "get", "curl"}
_NO_TOOL = {  # verbs with no builtin tool: what they would do, and the command that does it
    "delete": ("delete files", "rm PATH"),
    "remove": ("delete files", "rm PATH"),
    "rm": ("delete files", "rm PATH"),
    "move": ("move files", "mv FROM TO"),
    "mv": ("move files", "mv FROM TO"),
    "rename": ("rename files", "mv FROM TO"),
    "copy": ("copy files", "cp FROM TO"),
    "cp": ("copy files", "cp FROM TO"),
    "chmod": ("change permissions", "chmod MODE PATH"),
}
_FILLER = {"a", "an", "the", "new", "empty", "file", "note", "text", "called", "named", "at"}
_LIST_FILLER = {"the", "files", "file", "contents", "content", "of", "in", "directory", "folder", "dir", "everything"}
_ORDINALS = {"first": 0, "top": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2}
_URL = re.compile(r"^https?://\S+$", re.IGNORECASE)
_PROCESS_ID = re.compile(r"^p\d+-[0-9a-f]{6}$")


def parse_request(request: str) -> DesktopPlan:
    """The plan for ``request``, or ``DesktopError`` naming what is missing or not supported."""
    text = request.strip()  # quoted text keeps its spacing and newlines
    if not text:
        raise DesktopError(f"say what to do, e.g. {EXAMPLES[0]}")
    try:
        tokens = shlex.split(text)
    except ValueError:
        raise DesktopError(f"unbalanced quote in {text!r}: close the quoted text") from None
    while tokens and tokens[0].lower() in _POLITE:
        tokens = tokens[1:]
    if not tokens:
        raise DesktopError(f"say what to do, e.g. {EXAMPLES[0]}")
    verb, rest = tokens[0].lower(), tokens[1:]
    if verb in _CREATE or verb in _WRITE:
        return _write(text, verb, rest)
    if verb in _LIST or (verb in _READ and rest[:1] and rest[0].lower() in {"files", "directory", "folder", "dir"}):
        return _list(text, rest)
    if verb in _READ:
        if rest and _URL.match(rest[-1]):
            return _fetch(text, rest[-1:])
        return _read(text, rest)
    if verb == "web" or (verb in _SEARCH and rest and _is_web(rest)) or verb in {"google", "lookup"}:
        return _web_search(text, rest)
    if verb == "look" and rest[:1] == ["up"]:
        return _web_search(text, rest[1:])
    if verb in _SEARCH:
        return _search(text, verb, rest)
    if verb in _RUN:
        return _run(text, rest)
    if verb in _START:
        return _start(text, rest)
    if verb in _POLL or verb in _KILL:
        return _process(text, verb, rest)
    if verb in _FETCH:
        return _fetch(text, rest)
    if verb in _NO_TOOL:
        what, command = _NO_TOOL[verb]
        raise DesktopError(f"Desktop Ops has no tool to {what}; run a command for it instead: run {command}")
    raise DesktopError(f"cannot tell what to do with {tokens[0]!r}. {UNDERSTOOD}.")


# -- files ------------------------------------------------------------------------------------------
def _write(text: str, verb: str, rest: list[str]) -> DesktopPlan:
    example = 'create notes/todo.md with "buy milk"'
    head = [t.lower() for t in rest if t.lower() not in {"a", "an", "the", "new", "empty"}][:1]
    if head and head[0] in {"directory", "folder", "dir"} and verb in _CREATE:
        raise DesktopError(f"Desktop Ops creates files, not empty directories: {example} creates notes/ too")
    if verb in _WRITE:  # write "TEXT" to PATH
        lowered = [t.lower() for t in rest]
        for marker in ("to", "into", "in"):
            if marker in lowered[1:]:
                at = len(lowered) - 1 - lowered[::-1].index(marker)
                if at + 1 == len(rest):
                    raise DesktopError(f'{verb} needs a file after {marker!r}: write "buy milk" to notes/todo.md')
                if at + 2 < len(rest):
                    break  # more than one word after the marker: not this shape
                return _write_step(text, "write", rest[at + 1], " ".join(rest[:at]), overwrite=True)
    while rest and rest[0].lower() in _FILLER:
        rest = rest[1:]
    if not rest:
        raise DesktopError(f"{verb} needs a file path: {example}")
    path, more = rest[0], rest[1:]
    if more and more[0].lower() in {"with", "containing", "saying", "contents", "content", "="}:
        body = " ".join(more[1:])
        if not body:
            raise DesktopError(f"say what to write after {more[0]!r}: {example}")
    elif more:
        raise DesktopError(f"cannot read {' '.join(more)!r} after {path!r}: {example}")
    else:
        body = ""
    return _write_step(text, "create" if verb in _CREATE else "write", path, body, overwrite=verb in _WRITE)


def _write_step(text: str, intent: str, path: str, body: str, *, overwrite: bool) -> DesktopPlan:
    if body and not body.endswith("\n"):
        body += "\n"  # a text file ends with a newline (as /fs write writes it)
    args = {"path": path, "text": body, "create_dirs": True, "if_exists": "overwrite" if overwrite else "error"}
    why = f"{'write' if overwrite else 'create'} {path} ({len(body.encode())} bytes)"
    return DesktopPlan(text, intent, (PlanStep("builtin:fs:write_text", args, why),))


def _read(text: str, rest: list[str]) -> DesktopPlan:
    while rest and rest[0].lower() in {"the", "file", "contents", "content", "of"}:
        rest = rest[1:]
    if len(rest) != 1:
        raise DesktopError("read needs one file path: read notes/todo.md")
    return DesktopPlan(text, "read", (PlanStep("builtin:fs:read_text", {"path": rest[0]}, f"read {rest[0]}"),))


def _list(text: str, rest: list[str]) -> DesktopPlan:
    recursive = False
    words = []
    for token in rest:
        low = token.lower()
        if low in {"-r", "recursively", "recursive", "tree", "all"}:
            recursive = True
        elif low not in _LIST_FILLER:
            words.append(token)
    if len(words) > 1:
        raise DesktopError(f"list takes one directory, not {' '.join(words)!r}: list notes")
    args: dict[str, Any] = {"path": words[0]} if words else {}
    if recursive:
        args["recursive"] = True
    where = words[0] if words else "the workspace root"
    why = f"list {where}{' recursively' if recursive else ''}"
    return DesktopPlan(text, "list", (PlanStep("builtin:fs:list_dir", args, why),))


def _search(text: str, verb: str, rest: list[str]) -> DesktopPlan:
    if rest[:1] and rest[0].lower() == "for":
        rest = rest[1:]
    path: str | None = None
    lowered = [t.lower() for t in rest]
    if verb == "grep" and len(rest) == 2:
        rest, path = rest[:1], rest[1]
    elif "in" in lowered[1:] and lowered.index("in", 1) == len(rest) - 2:
        rest, path = rest[:-2], rest[-1]
    query = " ".join(rest)
    if not query:
        raise DesktopError('search needs the text to find: search for "TODO" in src')
    args: dict[str, Any] = {"query": query}
    if path is not None:
        args["path"] = path
    why = f"search {path or 'the workspace root'} for {query!r}"
    return DesktopPlan(text, "search", (PlanStep("builtin:fs:search_text", args, why),))


# -- shell ------------------------------------------------------------------------------------------
def _argv(rest: list[str], verb: str) -> list[str]:
    if len(rest) == 1 and " " in rest[0]:
        rest = shlex.split(rest[0])  # run "pytest -q": the whole command quoted
    if not rest:
        raise DesktopError(f"{verb} needs a command: {verb} pytest")
    return rest


def _run(text: str, rest: list[str]) -> DesktopPlan:
    argv = _argv(rest, "run")
    why = f"run {shlex.join(argv)} to completion"
    return DesktopPlan(text, "run", (PlanStep("builtin:shell:run", {"argv": argv}, why),))


def _start(text: str, rest: list[str]) -> DesktopPlan:
    lowered = [t.lower() for t in rest]
    for n in range(len(rest) - 1, -1, -1):  # "... and poll it" / "... then watch it"
        if lowered[n] in {"and", "then"} and n + 1 < len(rest) and lowered[n + 1] in {"poll", "watch", "check"}:
            rest = rest[:n]
            break
    argv = _argv(rest, "start")
    ref = StepRef(1, ("process_id",))
    steps = (
        PlanStep("builtin:shell:start", {"argv": argv}, f"start {shlex.join(argv)} in the background"),
        PlanStep(
            "builtin:shell:poll",
            {"process_id": ref, "wait_s": POLL_WAIT_S},
            f"poll it (waits up to {POLL_WAIT_S:g} s for output or its end)",
        ),
    )
    return DesktopPlan(text, "start", steps)


def _process(text: str, verb: str, rest: list[str]) -> DesktopPlan:
    ids = [t for t in rest if _PROCESS_ID.match(t)]
    action = "kill" if verb in _KILL else "poll"
    if len(ids) != 1:
        raise DesktopError(f"{verb} needs the process id that start returned: {action} p1-0a1b2c")
    tool = "builtin:shell:kill" if action == "kill" else "builtin:shell:poll"
    return DesktopPlan(text, action, (PlanStep(tool, {"process_id": ids[0]}, f"{action} process {ids[0]}"),))


# -- web --------------------------------------------------------------------------------------------
def _is_web(rest: list[str]) -> bool:
    head = [t.lower() for t in rest[:3]]
    return any(word in _WEB_WORDS for word in head)


def _web_search(text: str, rest: list[str]) -> DesktopPlan:
    words = list(rest)
    while words and (
        words[0].lower() in {"the", "web", "internet", "online", "on", "for"}
        or (len(words) > 1 and words[0].lower() in {"search", "searxng"})
    ):
        words = words[1:]
    fetch_index: int | None = None
    lowered = [w.lower() for w in words]
    for n in range(len(words) - 1, 0, -1):
        if lowered[n] in {"and", "then"} and n + 1 < len(words) and lowered[n + 1] in {"fetch", "open", "read", "get"}:
            fetch_index = _result_index(lowered[n + 2 :])
            words = words[:n]
            break
    query = " ".join(words)
    if not query:
        raise DesktopError("web search needs the search terms: search the web for aries")
    steps = [PlanStep("builtin:web:search", {"query": query}, f"search the web for {query!r}")]
    if fetch_index is not None:
        url = StepRef(1, ("results", fetch_index, "url"))
        steps.append(PlanStep("builtin:web:fetch", {"url": url}, f"fetch result {fetch_index + 1} of the search"))
    return DesktopPlan(text, "web_search", tuple(steps))


def _result_index(words: list[str]) -> int:
    for word in words:
        if word in _ORDINALS:
            return _ORDINALS[word]
        if word.isdigit():
            if not 1 <= int(word) <= 50:
                raise DesktopError(f"result {word} is out of range: fetch result 1 to 50")
            return int(word) - 1
    return 0


def _fetch(text: str, rest: list[str]) -> DesktopPlan:
    urls = [t for t in rest if _URL.match(t)]
    if len(urls) != 1:
        raise DesktopError("fetch needs one http(s) URL: fetch https://example.org/")
    return DesktopPlan(text, "fetch", (PlanStep("builtin:web:fetch", {"url": urls[0]}, f"fetch {urls[0]}"),))
