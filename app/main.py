"""Start the TUI."""

from __future__ import annotations


def run(workspace: str | None, *, create: bool = True) -> int:
    from app.aries_app import AriesApp

    app = AriesApp(workspace, create=create)
    result = app.run()
    return int(result or 0)
