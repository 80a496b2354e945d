"""The transcript's format version, and what a reader does with an entry it does not know.

Version 1 is every transcript written before the version existed: no entry carries one, and such a
file opens unchanged. Version 2 adds the entry kinds of long sessions (issue 30): ``pin``, ``unpin``,
``checkpoint``, ``rewind`` and ``compaction``. An entry of a kind that needs a later version carries
``"format": <version>``; a transcript's version is the highest its entries carry (1 when none does).

A transcript written by a newer Aries (an entry whose ``format`` is above :data:`FORMAT_VERSION`)
still opens: the entries this version understands are read, and :func:`newer_notice` says, in one
line, which it cannot read and that they are skipped. The entries of the new kinds are parsed with
pydantic where they are read (``services.conversation.timeline``); this module loads nothing heavy,
as the start-up path reads transcripts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

FORMAT_VERSION = 2
"""The newest transcript format this Aries reads and writes."""

KINDS_V1 = ("retrieval", "context")
KINDS_V2 = ("pin", "unpin", "checkpoint", "rewind", "compaction")
KNOWN_KINDS = frozenset(KINDS_V1 + KINDS_V2)
"""Every ``kind`` an entry of this format may carry (``compaction`` is written by ``/compact``)."""

__all__ = [
    "FORMAT_VERSION",
    "KINDS_V2",
    "KNOWN_KINDS",
    "format_of",
    "is_newer",
    "newer_notice",
    "stamp",
]


def stamp(kind: str) -> dict[str, Any]:
    """The fields that mark an entry of ``kind``: the kind and, for a kind of a later format, its version."""
    fields: dict[str, Any] = {"kind": kind}
    if kind in KINDS_V2:
        fields["format"] = 2
    return fields


def format_of(entries: Iterable[dict[str, Any]]) -> int:
    """The transcript's version: the highest any entry carries (1 for a transcript from before)."""
    return max((_version(entry) for entry in entries), default=1)


def is_newer(entry: dict[str, Any]) -> bool:
    """Whether ``entry`` needs a newer Aries than this one to be read."""
    return _version(entry) > FORMAT_VERSION


def newer_notice(entries: Iterable[dict[str, Any]], name: str) -> str | None:
    """One line saying what of a newer transcript this version cannot read (None: it reads all of it)."""
    unread = [entry for entry in entries if is_newer(entry)]
    if not unread:
        return None
    version = max(_version(entry) for entry in unread)
    kinds = Counter(str(entry.get("kind") or entry.get("role") or "?") for entry in unread)
    listed = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    return (
        f"{name} was written by a newer Aries (transcript format {version}; this one reads up to "
        f"{FORMAT_VERSION}): {len(unread)} entr{'y' if len(unread) == 1 else 'ies'} it cannot read ({listed}) "
        "are skipped; everything else is read."
    )


def _version(entry: dict[str, Any]) -> int:
    value = entry.get("format", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1
