"""The grant Aries proposes for a call: the narrowest pattern first, then the widenings allowed.

For a shell command the narrowest is the whole argv, literally; each widening replaces a tail of
plain arguments with ``*`` (never after a program that runs its arguments, never over an option or a
path outside the roots). For a file tool the narrowest is the exact file; each widening is a folder
above it, up to its root. A call that sets environment variables, names a program that is not plain
ASCII, or touches several files gets no proposal (approve it once or for the session).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.grants.matcher import matches
from services.grants.pattern import in_words, program_refusal, wildcard_refusal, within, words
from services.settings.operator import GrantPattern


@dataclass(frozen=True)
class Proposal:
    """What "always in this workspace" would store, narrowest first (``choices[0]``)."""

    tool_id: str
    choices: tuple[GrantPattern, ...]
    warnings: tuple[str | None, ...] = ()
    """Per choice: how it would combine with the workspace's grants into running code unasked."""

    def warning(self, level: int = 0) -> str | None:
        return self.warnings[level] if level < len(self.warnings) else None

    def words(self, level: int = 0) -> str:
        return words(self.choices[level])

    def sentence(self, level: int = 0) -> str:
        return in_words(self.tool_id, self.choices[level])


def propose(tool_id: str, facts: Mapping[str, Any], args: Mapping[str, Any], roots: Sequence[Path]) -> Proposal | None:
    """The proposal for a call the policy wants confirmed (None: no lasting grant can cover it)."""
    command = facts.get("command")
    if isinstance(command, Mapping):
        choices = _command_choices(command, args, roots)
    else:
        choices = _path_choices(facts.get("paths"), roots)
    # Every choice must cover the very call it was made from (the matcher is the one judge).
    kept = tuple(c for c in choices if matches(c, facts, args, roots))
    return Proposal(tool_id, kept) if kept else None


def _command_choices(command: Mapping[str, Any], args: Mapping[str, Any], roots: Sequence[Path]) -> list[GrantPattern]:
    argv = command.get("argv")
    if args.get("env") or not isinstance(argv, list) or not argv or program_refusal(str(argv[0])) is not None:
        return []
    executable, cwd = command.get("executable"), command.get("cwd")
    if not executable or not cwd:
        return []
    tokens = tuple(str(a) for a in argv)
    choices = [GrantPattern(kind="argv", argv=tokens, executable=executable, cwd=cwd)]
    for keep in range(len(tokens) - 1, 0, -1):
        if wildcard_refusal(tokens[:keep]) is not None:
            break
        choices.append(GrantPattern(kind="argv", argv=tokens[:keep], rest=True, executable=executable, cwd=cwd))
    return choices


def _path_choices(paths: Any, roots: Sequence[Path]) -> list[GrantPattern]:
    if not isinstance(paths, list) or not paths:
        return []
    real = {str(p.get("path")) for p in paths if isinstance(p, Mapping)}
    if len(real) != 1 or len(paths) != len([p for p in paths if isinstance(p, Mapping)]):
        return []
    path = Path(real.pop())
    root = next((r for r in roots if within(str(path), str(r))), None)
    if root is None:
        return []
    choices = [GrantPattern(kind="path", path=str(path), folder=path.is_dir())]
    folder = path.parent if not path.is_dir() else path
    while within(str(folder), str(root)):
        choices.append(GrantPattern(kind="path", path=str(folder), folder=True))
        if folder == root:
            break
        folder = folder.parent
    unique: list[GrantPattern] = []
    for choice in choices:
        if choice not in unique:
            unique.append(choice)
    return unique


def from_words(
    tool_id: str,
    session_keys: Sequence[str],
    text: str,
    *,
    roots: Sequence[Path],
    resolve: Callable[[str], str | None],
    cwd: str | None = None,
) -> GrantPattern:
    """The pattern ``aries grants add TOOL PATTERN`` stores: the same words the modal shows. A shell
    tool's words are argv tokens (the program resolved now, as the policy resolves it; the cwd the
    first root unless given); a file tool's words are a path under the roots. PatternError (one line)."""
    from services.grants.pattern import PatternError, argv_pattern, parse_words, path_pattern

    if not roots:
        raise PatternError("the policy allows no roots: nothing can be granted")
    if "command.executable" in session_keys:
        tokens, rest = parse_words(text)
        where = Path(os.path.realpath(cwd)) if cwd else roots[0]
        if not any(within(str(where), str(root)) for root in roots) or not where.is_dir():
            raise PatternError(f"cwd {where} is not a folder inside the allowed roots")
        executable = resolve(tokens[0]) if program_refusal(tokens[0]) is None else None
        return argv_pattern(tokens, rest, executable=executable, cwd=str(where))
    if "paths" in session_keys:
        return path_pattern(text, base=roots[0], roots=list(roots))
    raise PatternError(f"{tool_id} cannot be granted lastingly: grants cover shell commands and file tools")


__all__ = ["Proposal", "from_words", "propose"]
