"""``aries serve``: the local web viewer and editor of a workspace's documents (services.web).

    aries serve -w NAME [--host 127.0.0.1|::1|localhost] [--port P]

Opens the workspace's session (``Session.open``, surface ``serve``: the viewer serves with its
retrieval engine, closed after the viewer stopped), reconciles first (progress on stderr), then
prints the URL (with its per-start token) on stdout and serves until Ctrl+C or SIGTERM (exit 0).
Nothing is opened: open the printed URL in a browser.
Any host but loopback is refused with exit 2, as is a port already in use.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.cli._common import open_session, out, warn, workspace_option


def register(subparsers: Any) -> None:
    serve = subparsers.add_parser(
        "serve",
        help="the local web viewer/editor of the workspace's documents (127.0.0.1 only)",
        description=(
            "Serve the documents of the workspace's rag indexes and context tree on a loopback address. "
            "Prints a URL with a per-start token (no browser is opened: open it yourself); Ctrl+C stops."
        ),
    )
    workspace_option(serve)
    serve.add_argument("--host", default="127.0.0.1", help="127.0.0.1 (default), ::1 or localhost; nothing else")
    serve.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    serve.add_argument(
        "--no-open",
        action="store_true",
        help=argparse.SUPPRESS,  # accepted for old scripts: no browser is ever opened
    )
    serve.set_defaults(func=handle_serve)


def handle_serve(args: argparse.Namespace) -> int:
    from services.errors import InvalidInput
    from services.web.viewer import check_host, run_viewer

    check_host(args.host)  # before anything is opened
    if not 0 <= args.port <= 65535:
        raise InvalidInput(f"--port {args.port}: use 0 (any free port) up to 65535")

    def ready(url: str) -> None:
        out(f"Aries viewer for workspace {args.workspace}: {url}", single_line=True)
        out("Open that URL in a browser (the token after # is needed); Ctrl+C stops.")
        sys.stdout.flush()

    need = "aries serve needs a workspace: aries serve -w NAME"
    with open_session(args, surface="serve", need=need) as session:  # the viewer serves with its engine
        root = session.workspace.root
        run_viewer(root, args.host, args.port, on_ready=ready, on_progress=warn, engine=session.engine())
    warn("viewer stopped")
    return 0
