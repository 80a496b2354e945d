"""``aries context add|ls|read|export|import|reconcile|evidence|session`` (ctx-ingest fills this in)."""

from __future__ import annotations

from typing import Any


def register_store_commands(sub: Any) -> None:
    """Add the store-side sub-commands to the ``context`` parser's sub-parsers."""
