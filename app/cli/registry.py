"""Every ``aries`` subcommand, in the order ``aries --help`` lists them.

A static list (no import by name): adding a command is one module under ``app/cli/`` with a
``register(subparsers)`` function, and one line here. ``tests/test_cli_escapes.py`` walks the
parser built from this list and fails for a command it does not run over hostile text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.cli import (
    artifact,
    ask,
    cloud,
    context,
    desktop,
    grants,
    history,
    model,
    plan,
    profile,
    rag,
    rewind,
    serve,
    tool,
    workspace,
)

Register = Callable[[Any], None]
"""``register(subparsers)``: adds a command's parsers, each with ``func`` set to its handler."""

COMMANDS: tuple[Register, ...] = (
    workspace.register,  # workspace new|open|list|close|export|import
    artifact.register,  # artifact add|list
    rag.register,  # rag …, eval rag
    tool.register,
    grants.register,  # grants, grants add|revoke
    desktop.register,
    model.register,
    ask.register,  # ask, ingest, status
    history.register,  # history, history fork
    rewind.register,  # rewind N|NAME
    plan.register,  # run, runs, report, replay
    profile.register,
    cloud.register,
    context.register,
    serve.register,
)
