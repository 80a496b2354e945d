"""Start the TUI."""

from __future__ import annotations


def run(workspace: str | None, *, create: bool = True, conversation: str = "new") -> int:
    """``conversation``: ``new`` (the default from the command line), ``last``, or an id."""
    from app.aries_app import AriesApp

    app = AriesApp(workspace, create=create, conversation=conversation)
    result = app.run()
    return int(result or 0)
