"""``aries context …``: the axiom:// context filesystem (services.context).

The ``context`` parser is made here; its sub-commands live in two modules:

- :mod:`app.cli_context_store` — add, ls, read, export, import, reconcile, evidence, session
- :mod:`app.cli_context_search` — find, search, trace
"""

from __future__ import annotations

import argparse
from typing import Any

CONTEXT_HELP = """\
The context filesystem of a workspace: resources, user and agent memory, sessions, addressed as
axiom://{scope}/{path} (scopes: resources, user, agent, session; internal: temp, queue).
"""


def register(subparsers: Any) -> None:
    from app.cli_context_search import register_search_commands
    from app.cli_context_store import register_store_commands

    context = subparsers.add_parser(
        "context",
        help="the axiom:// context filesystem: add, browse, find/search with traces, sessions, packages",
        description=CONTEXT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = context.add_subparsers(dest="context_command", metavar="COMMAND", required=True)
    register_store_commands(sub)
    register_search_commands(sub)


def workspace_option(parser: argparse.ArgumentParser) -> None:
    """``-w/--workspace`` on a sub-command (SUPPRESS keeps 'aries -w NAME context …' working)."""
    parser.add_argument(
        "-w", "--workspace", metavar="W", default=argparse.SUPPRESS, help="the workspace (default: ephemeral)"
    )
