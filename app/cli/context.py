"""``aries context …``: the axiom:// context filesystem (services.context).

The ``context`` parser is made here; its sub-commands live in two modules:

- :mod:`app.cli.context_store` — add, log, ls, read, export, import, reconcile, evidence, session
- :mod:`app.cli.context_search` — find, search, trace
"""

from __future__ import annotations

import argparse
from typing import Any

CONTEXT_HELP = """\
The context filesystem of a workspace: resources, user and agent memory, sessions, addressed as
axiom://{scope}/{path} (scopes: resources, user, agent, session; internal: temp, queue).
"""


def register(subparsers: Any) -> None:
    from app.cli.context_search import register_search_commands
    from app.cli.context_store import register_store_commands

    context = subparsers.add_parser(
        "context",
        help="the axiom:// context filesystem: add, browse, find/search with traces, sessions, packages",
        description=CONTEXT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = context.add_subparsers(dest="context_command", metavar="COMMAND", required=True)
    register_store_commands(sub)
    register_search_commands(sub)
    _check_settings_first(sub)


def _check_settings_first(sub: Any) -> None:
    """Every ``aries context …`` handler first validates the retrieval and context settings, so a bad
    ``AXIOMME_RETRIEVAL_BACKEND`` (or any ``AXIOMME_*``) fails fast with one line, whatever the command."""
    for parser in sub.choices.values():
        func = parser.get_default("func")
        if func is not None:
            parser.set_defaults(func=_checked(func))
        for action in parser._actions:  # nested sub-commands (context session new|append|commit)
            if isinstance(action, argparse._SubParsersAction):
                _check_settings_first(action)


def _checked(func: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        from services.context.settings import ContextSettings

        ContextSettings.from_env()  # a ConfigError is the command's one line (app.cli.main)
        result: int = func(args)
        return result

    return run
