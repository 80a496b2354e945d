"""The ``aries`` command line: ``aries [--workspace NAME]`` opens the TUI; subcommands are headless.

Each subcommand module exposes ``register(subparsers)``; handlers take the parsed
arguments and return an exit code.  Typed service errors become one line on stderr,
``aries: <message>``, and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from app import __version__

# Subcommand modules; each registers its own parsers.
SUBCOMMAND_MODULES = ("app.cli_workspace", "app.cli_rag", "app.cli_tool", "app.cli_model")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, like every other refusal
        self.print_usage(sys.stderr)
        self.exit(2, f"aries: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="aries",
        description="Aries: a local-first terminal workbench for an LLM assistant under explicit control.",
        epilog="Run 'aries' alone to open the workbench ephemerally (nothing is kept after exit).",
    )
    parser.add_argument("--version", action="version", version=f"aries {__version__}")
    parser.add_argument(
        "-w", "--workspace", metavar="NAME", help="open (or act on) this workspace; created if missing for the TUI"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module_name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        module.register(sub)
    return parser


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def fail(error: Exception) -> int:
    from services.errors import AriesError

    if isinstance(error, AriesError):
        sys.stderr.write(f"aries: {error.message}\n")
        return error.exit_code
    raise error


def run_tui(workspace: str | None, *, create: bool = True) -> int:
    if workspace is not None:
        from services.names import validate_name

        validate_name(workspace)  # refuse before the screen is taken over
    from app.main import run

    return run(workspace, create=create)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from services.errors import AriesError

    try:
        if args.command is None:
            return run_tui(args.workspace)
        func = getattr(args, "func", None)
        if func is None:
            parser.parse_args([*(argv or sys.argv[1:]), "--help"])
            return 2
        return int(func(args))
    except AriesError as error:
        return fail(error)
    except KeyboardInterrupt:
        sys.stderr.write("aries: interrupted\n")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
