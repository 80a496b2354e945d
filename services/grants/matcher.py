"""Whether a lasting grant's pattern covers one call, decided on what the policy already resolved
(the call's ``facts``: the parsed argv, the resolved executable, the cwd, the real paths).

A command matches only when the program name is the granted plain ASCII name *and* resolves to the
granted executable (another ``pytest`` earlier on ``PATH`` does not match), the cwd is the granted
one, the call sets no environment variable, every literal token is equal, and a trailing ``*``
covers one or more further *plain* arguments (``services.grants.pattern.plain_refusal``) that each
stay inside the roots once resolved (symlinks followed). Wrappers and interpreters never match a
grant for the program they wrap: the program is ``argv[0]`` itself, never a word after it.

A file tool's call matches when every path it touches (already resolved by the policy's path guard)
is the granted file, or lies under the granted folder, and no raw path has a ``..`` component.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.grants.pattern import plain_refusal, program_refusal, wildcard_refusal, within
from services.settings.operator import GrantPattern


@dataclass(frozen=True)
class Match:
    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


def _no(reason: str) -> Match:
    return Match(False, reason)


def matches(pattern: GrantPattern, facts: Mapping[str, Any], args: Mapping[str, Any], roots: Sequence[Path]) -> Match:
    """Whether ``pattern`` covers a call with these policy ``facts`` and raw ``args``."""
    if pattern.kind == "argv":
        command = facts.get("command")
        if not isinstance(command, Mapping):
            return _no("not a shell command")
        return match_command(pattern, command, args.get("env") or {}, roots)
    paths = facts.get("paths")
    if facts.get("command") is not None or not isinstance(paths, list) or not paths:
        return _no("the call touches no file")
    return match_paths(pattern, paths, roots)


def match_command(
    pattern: GrantPattern, command: Mapping[str, Any], env: Mapping[str, Any], roots: Sequence[Path]
) -> Match:
    argv = command.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return _no("no argv")
    refusal = program_refusal(argv[0])
    if refusal is not None:
        return _no(refusal)
    if argv[0] != pattern.argv[0]:
        return _no(f"program {argv[0]!r} is not the granted {pattern.argv[0]!r}")
    if not pattern.executable or command.get("executable") != pattern.executable:
        return _no(f"{argv[0]} resolves to {command.get('executable')}, not the granted {pattern.executable}")
    if command.get("cwd") != pattern.cwd:
        return _no(f"cwd {command.get('cwd')} is not the granted {pattern.cwd}")
    if env:
        return _no("the call sets environment variables; a grant covers none")
    fixed = len(pattern.argv)
    for position, (token, granted) in enumerate(zip(argv, pattern.argv, strict=False)):
        if token != granted:
            return _no(f"argument {position} is {token!r}, not the granted {granted!r}")
    if not pattern.rest:
        return Match(True, "the exact command") if len(argv) == fixed else _no("more arguments than granted")
    if len(argv) <= fixed:
        return _no("'*' needs at least one further argument")
    if wildcard_refusal(pattern.argv) is not None:
        return _no(f"{argv[0]} runs its arguments; '*' never matches after it")
    cwd = str(command.get("cwd") or "")
    for arg in argv[fixed:]:
        refusal = plain_refusal(arg) or _outside(arg, cwd, roots)
        if refusal is not None:
            return _no(f"'*' covers plain arguments only: {refusal}")
    return Match(True, "the granted command with plain arguments")


def _outside(arg: str, cwd: str, roots: Sequence[Path]) -> str | None:
    """Why ``arg``, as a path from ``cwd``, leaves the roots (None: it does not name a path outside)."""
    candidate = arg if os.path.isabs(arg) else os.path.join(cwd, arg)
    names_path = "/" in arg or os.path.lexists(candidate)
    if not names_path:
        return None
    lexical = os.path.normpath(candidate)
    real = os.path.realpath(candidate)
    for path in (lexical, real):
        if not any(within(path, str(root)) for root in roots):
            return f"{arg!r} is a path outside the allowed roots ({path})"
    return None


def match_paths(pattern: GrantPattern, paths: list[Any], roots: Sequence[Path]) -> Match:
    granted = pattern.path or ""
    if not granted or not any(within(granted, str(root)) for root in roots):
        return _no(f"the granted path {granted} is no longer inside the allowed roots")
    for fact in paths:
        if not isinstance(fact, Mapping):
            return _no("a path fact is malformed")
        real, raw = str(fact.get("path") or ""), str(fact.get("raw") or "")
        if ".." in re.split(r"[/\\]", raw):
            return _no(f"path {raw!r} has a '..' component")
        covered = within(real, granted) if pattern.folder else real == granted
        if not covered:
            return _no(f"{real} is not {'under ' if pattern.folder else ''}the granted {granted}")
    return Match(True, "every path is under the granted folder" if pattern.folder else "the granted file")


__all__ = ["Match", "match_command", "match_paths", "matches"]
