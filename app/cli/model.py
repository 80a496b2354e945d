"""``aries model …``: the model providers from the command line.

    aries [-w NAME] model list [--json]

Lists what each known provider serves — ``offline`` always, Ollama at ``OLLAMA_HOST`` (default
``http://127.0.0.1:11434``), an OpenAI-compatible server at ``OPENAI_BASE_URL`` when set — or one
line saying why a provider cannot be asked, and the model in use (``ARIES_MODEL``, else the
workspace's ``model`` setting, else ``offline``).  Exit 0 once the listing ran; 2 when the
configured model itself is invalid (the listing is still printed first).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from app.cli._common import fail, open_session, out, print_json, usage


def register(subparsers: Any) -> None:
    model = subparsers.add_parser("model", help="list the models each provider serves and the one in use")
    model_sub = model.add_subparsers(dest="model_command", metavar="MODEL_COMMAND")
    listing = model_sub.add_parser("list", help="the models of offline, Ollama (OLLAMA_HOST) and OPENAI_BASE_URL")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=handle_list)
    model.set_defaults(func=usage(model))


def _workspace_setting(args: argparse.Namespace) -> Any:
    """The ``-w`` workspace's ``model`` setting (None without ``-w``)."""
    if not args.workspace:
        return None
    with open_session(args) as session:
        return session.authority_setting("model")


SOURCES = {"default": "nothing configured", "ARIES_MODEL": "from ARIES_MODEL", "workspace": "from the workspace"}


def _in_use(active: dict[str, Any], listings: list[Any]) -> str:
    line = f"in use: {active['label']} ({SOURCES.get(active['source'], active['source'])})"
    for listing in listings:
        if listing.provider == active["provider"] and listing.error is None and active["model"] not in listing.models:
            line += f"; {active['provider']} does not list {active['model']}"
    return line


def handle_list(args: argparse.Namespace) -> int:
    import asyncio

    from services.errors import AriesError
    from services.models.config import resolve_model
    from services.models.listing import list_providers

    env = dict(os.environ)
    setting = _workspace_setting(args)
    active: dict[str, Any] | None = None
    problem: AriesError | None = None
    try:
        config = resolve_model(setting, env)
        active = {"provider": config.provider, "model": config.model, "label": config.label, "source": config.source}
    except AriesError as exc:
        problem = exc
    listings = asyncio.run(list_providers(env))
    if args.json:
        data = {
            "active": active,
            "active_error": problem.message if problem else None,
            "providers": [listing.to_dict() for listing in listings],
        }
        print_json(data)
    else:
        for listing in listings:
            out(listing.line(), single_line=True)
        if active is not None:
            out(_in_use(active, listings), single_line=True)
    if problem is not None:
        return fail(problem)
    return 0
