"""Tool ids (``builtin:fs:read_text``) ↔ names that model providers accept.

OpenAI-compatible servers accept tool names matching ``^[A-Za-z0-9_-]{1,64}$``; Ollama accepts
those too.  A tool id becomes ``builtin__fs__read_text``: ``:`` turns into ``__`` and any other
character outside the set into ``_``.  When that name is longer than 64 characters, or two ids of
the same set would get the same name, the name is cut to 55 characters and gets ``_`` plus the
first 8 hex digits of the SHA-256 of the tool id.  The mapping depends only on the *set* of ids
(not their order), so the same tools always get the same names.

Names the map does not know map back to ``None``: the caller answers the model with an "unknown
tool" result instead of running anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from services.hashing import sha256_hex

MAX_NAME = 64
HASH_CHARS = 8
VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def _base(tool_id: str) -> str:
    return _INVALID.sub("_", tool_id.replace(":", "__"))


def _suffixed(tool_id: str, base: str, hash_chars: int) -> str:
    digest = sha256_hex(tool_id)[:hash_chars]
    stem = base[: MAX_NAME - hash_chars - 1]
    return f"{stem}_{digest}" if stem else f"tool_{digest}"


def _assign(tool_ids: list[str]) -> dict[str, str]:
    bases = {tool_id: _base(tool_id) for tool_id in tool_ids}
    counts: dict[str, int] = {}
    for base in bases.values():
        counts[base] = counts.get(base, 0) + 1
    names: dict[str, str] = {}
    for tool_id, base in bases.items():
        if base and len(base) <= MAX_NAME and counts[base] == 1:
            names[tool_id] = base
        else:
            names[tool_id] = _suffixed(tool_id, base, HASH_CHARS)
    # A suffixed name could still meet another name: lengthen the hash of everything involved.
    hash_chars = HASH_CHARS
    while True:
        seen: dict[str, list[str]] = {}
        for tool_id, name in names.items():
            seen.setdefault(name, []).append(tool_id)
        clashes = [ids for ids in seen.values() if len(ids) > 1]
        if not clashes:
            return names
        hash_chars += 4
        for ids in clashes:
            for tool_id in ids:
                names[tool_id] = _suffixed(tool_id, bases[tool_id], min(hash_chars, 32))


class ToolNameMap:
    """A two-way map between Aries tool ids and provider-safe tool names."""

    def __init__(self, tool_ids: Iterable[str]) -> None:
        ids = sorted(set(tool_ids))
        self._to_name = _assign(ids)
        self._to_id = {name: tool_id for tool_id, name in self._to_name.items()}

    def provider_name(self, tool_id: str) -> str:
        """The name offered to the model for ``tool_id`` (``KeyError`` if the id is not in the map)."""
        return self._to_name[tool_id]

    def tool_id(self, name: str) -> str | None:
        """The tool id behind a name the model used, or ``None`` for a name that was not offered.

        A model that answers with the tool id itself (``builtin:fs:read_text``) is understood too,
        but only for ids in this map.
        """
        name = name.strip()
        found = self._to_id.get(name)
        if found is not None:
            return found
        return name if name in self._to_name else None

    def items(self) -> Iterator[tuple[str, str]]:
        """``(tool_id, provider_name)`` pairs, sorted by tool id."""
        return iter(sorted(self._to_name.items()))

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._to_name

    def __len__(self) -> int:
        return len(self._to_name)

    def __repr__(self) -> str:
        return f"ToolNameMap({dict(self.items())!r})"


__all__ = ["MAX_NAME", "VALID_NAME", "ToolNameMap"]
