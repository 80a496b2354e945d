"""Validation of operator-chosen names (workspaces, indexes, profiles)."""

from __future__ import annotations

import unicodedata

from services.errors import InvalidName

MAX_NAME_LENGTH = 64
_FORBIDDEN = set('/\\:*?"<>|')
RESERVED_INDEX_NAMES = frozenset({"turn"})
"""Index names that citation handles already use: ``turn:<conversation>:<n>`` names an earlier turn
brought back into a request (``services.history_search.turns``), so no index may be called ``turn``."""


def validate_name(name: str, kind: str = "workspace") -> str:
    """Return ``name`` if it is safe to use as a single directory name, else raise InvalidName.

    Refused: empty, longer than 64 characters, ``.`` or ``..``, a leading dot or dash,
    path separators and other characters that are unsafe on any platform, control and
    other non-printing characters, and surrounding white space.
    """
    if not isinstance(name, str) or name == "":
        raise InvalidName(f"{kind} name must not be empty", name=name)
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"{kind} name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}", name=name[:80])
    if name in {".", ".."}:
        raise InvalidName(f"{kind} name {name!r} is reserved", name=name)
    if kind == "index" and name.lower() in RESERVED_INDEX_NAMES:
        raise InvalidName(
            f"index name {name!r} is reserved: handles turn:<conversation>:<n> name earlier turns; pick another name",
            name=name,
        )
    if name != name.strip():
        raise InvalidName(f"{kind} name {name!r} must not start or end with white space", name=name)
    if name[0] in ".-":
        raise InvalidName(f"{kind} name {name!r} must not start with '.' or '-'", name=name)
    for char in name:
        if char in _FORBIDDEN:
            raise InvalidName(
                f"{kind} name {name!r} contains {char!r}; use letters, digits, '-', '_' or '.'", name=name
            )
        category = unicodedata.category(char)
        if category.startswith("C") or category in {"Zl", "Zp"}:
            raise InvalidName(f"{kind} name {name!r} contains a control character (U+{ord(char):04X})", name=name)
    return name
