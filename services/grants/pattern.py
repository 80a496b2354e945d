"""A grant's pattern: argv tokens (or a path) in words and back, and what a plain argument is.

Words are what the modal shows and ``aries grants add`` takes: ``pytest -q tests/a.py`` (literal
tokens, shell-quoted), ``ls *`` (a trailing bare ``*``: one or more further *plain* arguments), or for
a file tool a path (``docs/a.md``; a trailing ``/`` means the folder and everything under it).
"""

from __future__ import annotations

import os
import re
import shlex
import unicodedata
from pathlib import Path

from services.errors import InvalidInput
from services.policy import exec_table as table
from services.settings.operator import GrantPattern

WILDCARD = "*"
PROGRAM_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
"""A program a grant names: plain ASCII (no look-alikes, no paths)."""
_PLAIN_FIRST = re.compile(r"[A-Za-z0-9_./]")
_PLAIN_REFUSED = set("=:\\$`'\"!;|&<>(){}[]*?~#%^\t\n\r ")
_INVISIBLE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"}

RUNS_ITS_ARGUMENTS: frozenset[str] = (
    table.INTERPRETERS
    | frozenset(table.WRAPPERS)
    | frozenset({"env", "xargs", "parallel", "watch", "flock", "setsid", "script", "taskset", "chrt", "ionice"})
    | frozenset({"sudo", "doas", "su", "pkexec", "runas", "chroot", "unshare", "nsenter", "busybox"})
    | frozenset({"awk", "gawk", "mawk", "nawk", "find", "strace", "ltrace", "gdb", "valgrind", "expect"})
    | frozenset({"ssh", "npx", "pnpx", "bunx", "uvx", "pipx", "systemd-run", "at", "batch"})
)
"""Programs that run their arguments as code or as another command: a ``*`` never follows them
(write the arguments out), so ``env *`` or ``sh *`` can never be granted."""


class PatternError(InvalidInput):
    code = "grant_pattern"


def program_refusal(name: str) -> str | None:
    """Why ``name`` cannot be a granted program (None: it can)."""
    if not name.isascii() or unicodedata.normalize("NFKC", name) != name:
        return f"program {name!r} is not plain ASCII (a look-alike of another name?)"
    if not PROGRAM_NAME.fullmatch(name):
        return f"program {name!r} must be a bare name (no path, no assignment, no option)"
    return None


def plain_refusal(arg: str) -> str | None:
    """Why ``arg`` is not a *plain* argument (None: it is). Plain: starts with a letter, digit, ``_``,
    ``.`` or ``/``; no option sign (``-``, ``+``, ``@`` or a Unicode dash), no ``=`` or ``:`` (option
    values, assignments, hosts, URLs), no shell or glob characters, no ``..`` component, no invisible
    or look-alike (NFKC-changing) characters."""
    if not arg:
        return "an empty argument"
    if unicodedata.normalize("NFKC", arg) != arg:
        return f"{arg!r} changes under NFKC normalisation (look-alike characters)"
    if any(unicodedata.category(c) in _INVISIBLE for c in arg):
        return f"{arg!r} contains a space, control or invisible character"
    if not _PLAIN_FIRST.match(arg):
        return f"{arg!r} starts like an option or a special word"
    bad = sorted(set(arg) & _PLAIN_REFUSED)
    if bad:
        return f"{arg!r} contains {''.join(bad)!r}"
    if ".." in arg.split("/"):
        return f"{arg!r} has a '..' component"
    return None


def parse_words(words: str) -> tuple[tuple[str, ...], bool]:
    """``'pytest -q *'`` → (("pytest", "-q"), True). A trailing *bare* ``*`` is the wildcard; a
    quoted ``'*'`` is a literal argument."""
    try:
        tokens = shlex.split(words)
    except ValueError as exc:
        raise PatternError(f"pattern {words!r} does not parse: {exc}") from None
    if not tokens:
        raise PatternError("the pattern is empty; give the program and its arguments, e.g. 'ls *'")
    stripped = words.rstrip()
    rest = tokens[-1] == WILDCARD and (stripped == WILDCARD or stripped.endswith((" " + WILDCARD, "\t" + WILDCARD)))
    if rest:
        tokens = tokens[:-1]
    if not tokens:
        raise PatternError("'*' alone grants nothing; name the program first, e.g. 'ls *'")
    return tuple(tokens), rest


def argv_pattern(tokens: tuple[str, ...], rest: bool, *, executable: str | None, cwd: str) -> GrantPattern:
    """A command pattern, checked: a plain ASCII program, found on the search path, and no ``*`` after a
    program that runs its arguments (or right after one whose subcommands decide what runs)."""
    refusal = program_refusal(tokens[0])
    if refusal is not None:
        raise PatternError(refusal)
    for token in tokens:
        if "\x00" in token:
            raise PatternError("the pattern contains a NUL character")
    if executable is None:
        raise PatternError(f"program {tokens[0]!r} is not on the search path")
    if rest:
        refusal = wildcard_refusal(tokens)
        if refusal is not None:
            raise PatternError(refusal)
    return GrantPattern(kind="argv", argv=tokens, rest=rest, executable=executable, cwd=cwd)


def wildcard_refusal(tokens: tuple[str, ...]) -> str | None:
    """Why ``tokens`` may not be followed by ``*`` (None: it may)."""
    name = tokens[0]
    if name in RUNS_ITS_ARGUMENTS or re.sub(r"-?[0-9][0-9.]*$", "", name) in RUNS_ITS_ARGUMENTS:
        return f"{name} runs its arguments as code or as a command: '*' is never granted after it; write them out"
    if name in table.SAFE_SUBCOMMANDS and len(tokens) == 1:
        return f"{name}'s subcommand decides what runs: write it out before '*' (e.g. '{name} status *')"
    return None


def path_pattern(raw: str, *, base: Path, roots: list[Path]) -> GrantPattern:
    """A file pattern from words: relative to ``base`` (the workspace's first root), resolved (symlinks
    followed), no ``..``, and inside a root. A trailing ``/`` (or an existing folder) is a folder."""
    if not raw or "\x00" in raw or raw.startswith("~") or "$" in raw:
        raise PatternError(f"path {raw!r} is not a plain path (no '~', '$' or NUL)")
    if ".." in re.split(r"[/\\]", raw):
        raise PatternError(f"path {raw!r} has a '..' component")
    if unicodedata.normalize("NFKC", raw) != raw:
        raise PatternError(f"path {raw!r} changes under NFKC normalisation (look-alike characters)")
    candidate = Path(raw) if os.path.isabs(raw) else base / raw
    real = Path(os.path.realpath(candidate))
    if not any(within(str(real), str(root)) for root in roots):
        raise PatternError(f"path {raw!r} resolves to {real}, outside the allowed roots")
    folder = raw.endswith("/") or real.is_dir()
    return GrantPattern(kind="path", path=str(real), folder=folder)


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def words(pattern: GrantPattern) -> str:
    """The pattern as the operator writes it (``ls *``, ``pytest -q tests/a.py``, ``/w/docs/``)."""
    if pattern.kind == "path":
        path = pattern.path or ""
        return path.rstrip("/") + "/" if pattern.folder else path
    text = shlex.join(pattern.argv)
    return f"{text} {WILDCARD}" if pattern.rest else text


def in_words(tool_id: str, pattern: GrantPattern) -> str:
    """One sentence: what the grant lets run without asking."""
    if pattern.kind == "path":
        where = f"any file under {pattern.path}" if pattern.folder else f"the file {pattern.path}"
        return f"{tool_id} on {where}, without asking, in this workspace"
    shown = shlex.join(pattern.argv)
    more = " followed by one or more plain arguments (no options, no paths outside the roots)" if pattern.rest else ""
    return (
        f"{tool_id}: exactly `{shown}`{more}, as {pattern.executable}, in {pattern.cwd}, "
        "without asking, in this workspace"
    )


__all__ = [
    "RUNS_ITS_ARGUMENTS",
    "WILDCARD",
    "PatternError",
    "argv_pattern",
    "in_words",
    "parse_words",
    "path_pattern",
    "plain_refusal",
    "program_refusal",
    "wildcard_refusal",
    "within",
    "words",
]
