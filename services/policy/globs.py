"""Rule matching: path globs (``**`` spans directories), deny rules, executable allowlists and
auto-approve rules."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """``**`` spans directories, ``*`` and ``?`` stay inside one; case-insensitive (safer)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == n:
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape("["))
                i += 1
                continue
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("^" + "".join(out) + "$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class DenyRule:
    id: str
    ops: frozenset[str]
    glob: str | None = None
    regex: re.Pattern[str] | None = None
    extensions: frozenset[str] = frozenset()

    def matches(self, rel: str, absolute: str) -> bool:
        if self.regex is not None:
            target = absolute if (self.glob or "").startswith("/") else rel
            return bool(self.regex.match(target))
        name = rel.rsplit("/", 1)[-1].lower()
        return any(name.endswith(ext) for ext in self.extensions)


@dataclass(frozen=True)
class ExecRule:
    id: str
    names: tuple[str, ...]

    def matches(self, name: str) -> bool:
        return exec_name_matches(name, self.names)


def exec_name_matches(name: str, names: Iterable[str]) -> bool:
    if os.name == "nt":  # pragma: no cover - portability: names are case-insensitive, suffixes optional
        base = re.sub(r"\.(exe|cmd|bat|com)$", "", name, flags=re.IGNORECASE).lower()
        return base in {n.lower() for n in names}
    return name in set(names)


@dataclass(frozen=True)
class AutoApproveRule:
    id: str
    tools: tuple[str, ...]
    domains: tuple[str, ...] | None = None
    paths: tuple[re.Pattern[str], ...] | None = None
    executables: tuple[str, ...] | None = None
