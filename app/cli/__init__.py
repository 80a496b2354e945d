"""The ``aries`` command line: ``aries [--workspace NAME]`` opens the TUI; subcommands are headless.

The package (see docs/ARCHITECTURE.md, "The command line"):

* this module — the entry point: the top-level parser, :func:`main` and the TUI's fast path
  (``aries -w NAME`` parses only the top-level options and imports no subcommand module);
* :mod:`app.cli.registry` — the static list of subcommand modules, each with ``register(subparsers)``;
  handlers take the parsed arguments and return an exit code;
* :mod:`app.cli._common` — what every command shares: the one terminal writer (``out``, ``warn``,
  ``print_json``, ``print_table``: text from files, tools, models and the network is made inert),
  the error exits (``fail``: one line ``aries: <message>``, the error's exit code) and
  ``open_session`` (every command reaches its workspace through ``services.session.session.Session``);
* one module per command (``workspace``, ``artifact``, ``rag``, ``tool`` …). None imports this
  module back.

Typed service errors become one line on stderr, ``aries: <message>``, and a non-zero exit code; a
closed pipe (``aries workspace list | head -1``) ends the command quietly with exit code 141
(128 + SIGPIPE), the status a shell reports for any program stopped by a closed pipe.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from app import __version__
from app.cli._common import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE, conversation_options, fail, warn


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, like every other refusal
        self.print_usage(sys.stderr)
        self.exit(2, f"aries: {message}\n")


def build_parser(*, subcommands: bool = True) -> argparse.ArgumentParser:
    """The ``aries`` parser; without ``subcommands`` only the top-level options (the TUI's fast path:
    importing every subcommand module costs more than a Textual app's first frame)."""
    parser = _Parser(
        prog="aries",
        description="Aries: a local-first terminal workbench for an LLM assistant under explicit control.",
        epilog="Run 'aries' alone to open the workbench ephemerally (nothing is kept after exit).",
    )
    parser.add_argument("--version", action="version", version=f"aries {__version__}")
    parser.add_argument(
        "-w", "--workspace", metavar="NAME", help="open (or act on) this workspace; created if missing for the TUI"
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="no full screen: a line-by-line session on stdin/stdout (screen readers, pipes); see /help there",
    )
    conversation_options(
        parser,
        last="the workbench reopens the workspace's last conversation (default: a new one)",
        by_id="the workbench reopens this conversation (see: aries history)",
    )
    if not subcommands:
        parser.set_defaults(command=None)
        return parser
    from app.cli.registry import COMMANDS

    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for register in COMMANDS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a closed stdout ends it quietly with :data:`EXIT_BROKEN_PIPE`."""
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # Nothing more can be written; point stdout at /dev/null so the interpreter's final
        # flush does not print "Exception ignored ... BrokenPipeError" either.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        return EXIT_BROKEN_PIPE


def _opens_the_tui(argv: Sequence[str]) -> bool:
    """True when ``argv`` is only ``-w/--workspace NAME``, ``-c/--continue``, ``--conversation ID`` and
    ``--plain`` (or nothing): ``aries`` opening the TUI (or its plain mode)."""
    position = 0
    while position < len(argv):
        token = argv[position]
        takes_value = token in ("-w", "--workspace", "--conversation")
        if takes_value and position + 1 < len(argv) and not argv[position + 1].startswith("-"):
            position += 2
        elif token in ("-c", "--continue", "--plain") or token.startswith(("--workspace=", "--conversation=")):
            position += 1
        elif token.startswith("-w") and len(token) > 2:
            position += 1
        else:
            return False
    return True


def _main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(subcommands=not _opens_the_tui(arguments))
    args = parser.parse_args(arguments)
    from services.errors import AriesError

    try:
        if args.plain:
            if args.command is not None:
                return fail("--plain opens a line-by-line session: it takes no command", EXIT_USAGE)
            from app.plain import run_plain

            return run_plain(args.workspace, conversation=args.conversation or "new")
        if args.command is None:
            from app.main import run

            return run(args.workspace, conversation=args.conversation or "new")
        func = getattr(args, "func", None)
        if func is None:
            parser.parse_args([*arguments, "--help"])
            return 2
        from services.notices import add_listener

        remove = add_listener(_say_preparing)  # e.g. the ONNX encoder's first export: it takes a while
        try:
            return int(func(args))
        finally:
            remove()
    except AriesError as error:
        return fail(error)
    except KeyboardInterrupt:
        warn("interrupted")
        return EXIT_INTERRUPTED


def _say_preparing(key: str, stage: str, message: str) -> None:
    """A one-time preparation (services.notices) on stderr: its start and its end (a failure is the
    command's own error line)."""
    if stage != "failed":
        warn(message)
