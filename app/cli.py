"""The ``aries`` command line: ``aries [--workspace NAME]`` opens the TUI; subcommands are headless.

Each subcommand module exposes ``register(subparsers)``; handlers take the parsed
arguments and return an exit code.  Typed service errors become one line on stderr,
``aries: <message>``, and a non-zero exit code.

Output is safe for a terminal and quiet in a pipe:

* text that came from documents, file names, tool output or transcripts goes through
  :func:`safe` (``services.textsafe.neutralize``): escape sequences and bidi controls are
  shown as visible escapes; ``single_line`` for names and table cells;
* :func:`print_json` escapes the same characters (C1 controls, bidi controls, line/paragraph
  separators) as ``\\uXXXX``, so JSON output stays valid JSON *and* inert when shown;
* a closed pipe (``aries workspace list | head -1``) ends the command quietly with exit code
  141 (128 + SIGPIPE), the status a shell reports for any program stopped by a closed pipe.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from app import __version__

# Subcommand modules; each registers its own parsers.
SUBCOMMAND_MODULES = (
    "app.cli_workspace",
    "app.cli_rag",
    "app.cli_tool",
    "app.cli_desktop",
    "app.cli_model",
    "app.cli_ask",
    "app.cli_plan",
    "app.cli_profile",
    "app.cli_cloud",
    "app.cli_context",
    "app.cli_serve",
    "app.cli_history",
)


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
    resume = parser.add_mutually_exclusive_group()
    resume.add_argument(
        "-c",
        "--continue",
        dest="conversation",
        action="store_const",
        const="last",
        help="the workbench reopens the workspace's last conversation (default: a new one)",
    )
    resume.add_argument(
        "--conversation", metavar="ID", help="the workbench reopens this conversation (see: aries history)"
    )
    if not subcommands:
        parser.set_defaults(command=None)
        return parser
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


EXIT_BROKEN_PIPE = 141
"""Exit status when the reader of our output went away (128 + SIGPIPE, as a shell reports it)."""

# json.dumps already escapes C0 controls; these pass through with ensure_ascii=False. They can only
# occur inside JSON strings, so replacing them with \uXXXX keeps the document valid and equal.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """``data`` as JSON that is safe to show in a terminal (see the module docstring)."""
    text = json.dumps(data, indent=indent, ensure_ascii=False, default=str)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def print_json(data: Any) -> None:
    sys.stdout.write(json_text(data) + "\n")


def console(**options: Any) -> Any:
    """A rich Console for tables whose closed pipe ends like any other (see :func:`main`)."""
    from rich.console import Console

    class _PipeAwareConsole(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1 on its own; main() decides instead
            raise BrokenPipeError

    return _PipeAwareConsole(**options)


def safe(text: object, *, single_line: bool = False) -> str:
    """Untrusted text (document, file name, tool output, transcript) made inert for a terminal."""
    from services.textsafe import neutralize

    return neutralize(str(text), single_line=single_line)


def fail(error: Exception) -> int:
    from services.errors import AriesError

    if isinstance(error, AriesError):
        sys.stderr.write(f"aries: {safe(error.message, single_line=True)}\n")
        return error.exit_code
    raise error


def run_tui(workspace: str | None, *, create: bool = True, conversation: str | None = None) -> int:
    if conversation is not None and workspace is None:
        from services.errors import InvalidInput

        raise InvalidInput("--continue and --conversation need a workspace (-w NAME): an ephemeral one keeps nothing")
    if workspace is not None:
        from services.names import validate_name

        validate_name(workspace)  # refuse before the screen is taken over
        from services.workspaces import WorkspaceBusy, WorkspaceManager, open_elsewhere

        manager = WorkspaceManager()
        if manager.path_for(workspace).is_dir():
            from services.workspaces import Workspace

            existing = Workspace(manager.path_for(workspace), workspace)
            holder = open_elsewhere(existing)
            if holder:  # a live Aries holds it: say so here, before the screen is taken over
                raise WorkspaceBusy(
                    f"workspace {workspace} is open in another Aries (pid {holder.get('pid', '?')}, "
                    f"{holder.get('purpose', '?')}); close it there, or use `aries workspace close {workspace}` "
                    "if that process is gone"
                )
    from app.main import run

    return run(workspace, create=create, conversation=conversation or "new")


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
    """True when ``argv`` is only ``-w/--workspace NAME``, ``-c/--continue`` and ``--conversation ID``
    (or nothing): ``aries`` opening the TUI."""
    position = 0
    while position < len(argv):
        token = argv[position]
        takes_value = token in ("-w", "--workspace", "--conversation")
        if takes_value and position + 1 < len(argv) and not argv[position + 1].startswith("-"):
            position += 2
        elif token in ("-c", "--continue") or token.startswith(("--workspace=", "--conversation=")):
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
        if args.command is None:
            return run_tui(args.workspace, conversation=args.conversation)
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
        sys.stderr.write("aries: interrupted\n")
        return 130


def _say_preparing(key: str, stage: str, message: str) -> None:
    """A one-time preparation (services.notices) on stderr: its start and its end (a failure is the
    command's own error line)."""
    if stage != "failed":
        sys.stderr.write(f"aries: {message}\n")
        sys.stderr.flush()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
