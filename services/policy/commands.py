"""Shell commands: whether a command can execute arbitrary code (``classify``, driven by
``exec_table``) and which environment names a tool call may set (``env_refusal``, ``check_env``).

``BoundPolicy.check_command`` applies them (with the executable allowlist and the path arguments) and
returns the facts the policy decides on; ``facts["exec_capable"]`` makes ``BoundPolicy.evaluate`` ask
for approval in every mode (rule ``shell.exec_capable``).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from services.policy import exec_table as table
from services.policy.model import deny as _deny
from services.policy.model import invalid as _invalid
from services.policy.sed import sed_is_inert

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_DEPTH = 8


@dataclass(frozen=True)
class Verdict:
    exec_capable: bool
    reason: str
    program: str = ""


INERT = Verdict(False, "runs only itself")


def _base(name: str) -> str:
    name = os.path.basename(name)
    if os.name == "nt":  # pragma: no cover - portability
        name = re.sub(r"\.(exe|cmd|bat|com)$", "", name, flags=re.IGNORECASE)
    return name


def _known(name: str, inert: frozenset[str]) -> bool:
    return (
        name in inert
        or name in table.INERT
        or name in table.INTERPRETERS
        or name in table.ALWAYS
        or name in table.WRAPPERS
        or name in table.EXEC_OPTIONS
        or name in table.SAFE_SUBCOMMANDS
        or name == "sed"
    )


def program_name(name: str, resolved: str | None, inert: frozenset[str]) -> str:
    """The table key for an executable: its name, the name without a version suffix
    (``python3.12`` -> ``python``), else the name of the file it resolves to."""
    candidates = [_base(name)]
    if resolved:
        candidates.append(_base(resolved))
    keys = [k for c in candidates for k in (c, re.sub(r"-?[0-9][0-9.]*$", "", c)) if k]
    for known in (frozenset(), inert):  # the table first: ``inert_programs`` cannot override it
        for key in keys:
            if _known(key, known):
                return key
    return _base(name)


def classify(
    argv: Sequence[str],
    *,
    resolved: str | None = None,
    inert: Iterable[str] = (),
    inner_allowed: Callable[[str], str | None] | None = None,
    depth: int = 0,
) -> Verdict:
    """Whether ``argv`` can execute code its arguments choose.  ``inner_allowed(name)`` returns
    the resolved path of a wrapped command, or raises when it may not run."""
    inert_set = table.INERT | frozenset(inert)
    name = program_name(argv[0], resolved, inert_set)
    args = list(argv[1:])

    def exec_(reason: str) -> Verdict:
        return Verdict(True, f"{argv[0]} {reason}", name)

    if depth > _MAX_DEPTH:
        return exec_("wraps commands too deeply to classify")
    if name in table.INTERPRETERS:
        if args and all(a in table.INFO_FLAGS for a in args):
            return INERT
        return exec_("is an interpreter: it runs code from its arguments, a script or its input")
    if name in table.ALWAYS:
        return exec_(table.ALWAYS[name])
    if name in table.WRAPPERS:
        return _wrapper(name, args, argv, inert, inner_allowed, depth)
    if name == "sed":
        return INERT if sed_is_inert(args) else exec_("may run commands or write files (e, w, r flags or -i)")
    if name == "env":
        if all(a in ("-0", "--null") for a in args):
            return INERT
        return exec_("runs its arguments as a command or changes the environment")
    if name in table.EXEC_OPTIONS:
        found = _exec_option(name, args)
        return exec_(found) if found else INERT
    if name in table.SAFE_SUBCOMMANDS:
        found = _subcommand(name, args)
        return exec_(found) if found else INERT
    if name in inert_set:
        return INERT
    return exec_("is not known to run only itself (add it to shell.inert_programs if it cannot run code)")


def _wrapper(
    name: str,
    args: list[str],
    argv: Sequence[str],
    inert: Iterable[str],
    inner_allowed: Callable[[str], str | None] | None,
    depth: int,
) -> Verdict:
    value_opts, flag_opts, positional = table.WRAPPERS[name]
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg in value_opts:
            i += 2
        elif arg in flag_opts or (name == "nice" and re.fullmatch(r"-[0-9]+", arg)):
            i += 1
        elif "=" in arg and arg.split("=", 1)[0] in value_opts:
            i += 1
        elif not arg.startswith("--") and arg[:2] in value_opts:
            i += 1
        else:
            return Verdict(True, f"{argv[0]}: option {arg!r} is not known; it may run a command", name)
    i += positional
    inner = args[i:]
    if not inner:
        return INERT
    resolved = inner_allowed(inner[0]) if inner_allowed is not None else None
    verdict = classify(inner, resolved=resolved, inert=inert, inner_allowed=inner_allowed, depth=depth + 1)
    if verdict.exec_capable:
        return Verdict(True, f"{argv[0]} runs a command: {verdict.reason}", verdict.program)
    return INERT


def _option_hit(arg: str, option: str) -> bool:
    if option.startswith("--"):
        return arg == option or arg.startswith(option + "=")
    if len(option) == 2:  # a single-letter option: alone, glued to its value or bundled
        return arg.startswith("-") and not arg.startswith("--") and option[1] in arg[1:]
    return arg == option  # single-dash words (find -exec, zip -TT)


def _exec_option(name: str, args: list[str]) -> str | None:
    options = table.EXEC_OPTIONS[name]
    for arg in args:
        for option in options:
            if _option_hit(arg, option):
                return f"option {option} runs a command"
    if name == "tar" and args and not args[0].startswith("-") and set(args[0]) & {"I", "F"}:
        return "options I/F run a command"
    if name in table.REMOTE_SHELL and "--force-local" not in args:
        for arg in args:
            if not arg.startswith("-") and re.match(r"^[^/]+:", arg):
                return f"argument {arg!r} names a remote host, which runs a remote shell"
    return None


_GIT_GLOBAL_FLAGS = frozenset(
    {
        "--no-pager",
        "--bare",
        "--no-replace-objects",
        "--literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
        "--no-optional-locks",
        "--exec-path",
        "--html-path",
        "--man-path",
        "--info-path",
        "--version",
        "--help",
        "-h",
        "-q",
        "--quiet",
    }
)


def _subcommand(name: str, args: list[str]) -> str | None:
    safe = table.SAFE_SUBCOMMANDS[name]
    value_opts = table.GLOBAL_VALUE_OPTIONS.get(name, frozenset())
    i = 0
    while i < len(args) and args[i].startswith("-"):
        arg = args[i]
        key = arg.split("=", 1)[0]
        if name == "git" and arg == "-c":
            setting = args[i + 1] if i + 1 < len(args) else ""
            config_key = setting.split("=", 1)[0].lower()
            if not config_key.startswith(table.GIT_SAFE_CONFIG_PREFIXES):
                return f"-c {config_key or '(missing)'} is a configuration override that can run a program"
            i += 2
        elif name == "git" and arg.startswith("-c") and len(arg) > 2:
            return "-c configuration overrides can run a program"
        elif name == "git" and key in ("--exec-path",) and "=" in arg:
            return "--exec-path= makes git run programs from another directory"
        elif name == "git" and arg in _GIT_GLOBAL_FLAGS:
            i += 1
        elif arg in value_opts:
            i += 2
        elif "=" in arg and key in value_opts:
            i += 1
        elif arg in safe:  # npm --version, cargo -V
            return None
        else:
            return f"global option {key} may run a program or change what runs"
    if i >= len(args):
        return None
    sub, rest = args[i], args[i + 1 :]
    if sub not in safe:
        return f"{sub!r} may run hooks, scripts, aliases or external tools"
    for arg in rest:
        for option in table.EXEC_SUBCOMMAND_OPTIONS.get(name, frozenset()):
            if arg == option or arg.startswith(option + "=") or (len(option) == 2 and arg.startswith(option)):
                return f"{sub} {option} runs an external program"
    return None


def env_refusal(key: str, allow: Sequence[str]) -> tuple[str, str] | None:
    """(rule, reason) when a tool call may not set ``key``; None when it may."""
    upper = key.upper()
    if upper.startswith(table.EXEC_ENV_PREFIXES) or upper in table.EXEC_ENV_NAMES:
        return "shell.env", f"env variable {key!r} can make programs load or run code; a tool call may not set it"
    if not any(fnmatch.fnmatchcase(key, pattern) for pattern in allow):
        return (
            "shell.env_allow",
            f"env variable {key!r} is not on the policy's shell.env_allow list ({', '.join(allow) or 'empty'})",
        )
    return None


def check_env(env: Any, allow: Sequence[str]) -> None:
    """InvalidInput or PolicyDenied when a tool call's ``env`` is malformed or sets a refused name."""
    env = env or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise _invalid("shell.env", "env must map names to strings")
    for key, value in env.items():
        if not _ENV_NAME.fullmatch(key) or "\x00" in value:
            raise _invalid("shell.env", f"env name {key!r} or its value is not usable")
        refusal = env_refusal(key, allow)
        if refusal is not None:
            raise _deny(refusal[0], refusal[1], variable=key)
