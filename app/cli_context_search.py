"""``aries context find|search|trace`` (ctx-search fills this in)."""

from __future__ import annotations

from typing import Any


def register_search_commands(sub: Any) -> None:
    """Add find, search and trace to the ``context`` parser's sub-parsers."""
