"""What every ``aries`` command shares: the one way to the terminal, the error exits, and the one way
to a workspace.

**The terminal writer.** Every command prints through this module, never with ``print``,
``sys.stdout.write`` or ``json.dumps`` of its own (``tests/test_cli_escapes.py`` checks both the
source and the bytes): text that came from documents, file names, tool output, models, the network
or transcripts is made inert on the way (``services.text.textsafe.neutralize``: C0/C1 controls, escape
sequences and bidi controls are shown as visible escapes such as ``\\x1b`` and ``<U+202E>``).

* :func:`out` — stdout, newlines and tabs kept (``single_line`` for names and one-line summaries);
  :func:`safe` for a part of a line that must stay on one line (a file name in a sentence);
* :func:`warn` — one line on stderr, ``aries: <message>``; :func:`err` for stderr text of several
  lines (a diff); :func:`progress` for a ``\\r`` progress line on a terminal;
* :func:`print_json` — JSON that escapes the same characters (C1 controls, bidi controls,
  line/paragraph separators) as ``\\uXXXX``: still valid JSON, equal data, inert when shown;
* :func:`print_table` — a rich table whose title and every cell are neutralised and never parsed
  as markup.

A closed pipe (``aries workspace list | head -1``) raises ``BrokenPipeError`` up to ``app.cli.main``,
which ends the command quietly with :data:`EXIT_BROKEN_PIPE`.

**Error exits.** Typed service errors (``services.errors.AriesError``) carry their own exit code;
:func:`fail` prints one line, ``aries: <message>``, and returns it. A command that has a fixed code
for every failure (``tool``, ``desktop``) passes it.

**The one way to a workspace.** :func:`open_session` opens the ``-w`` workspace (or an ephemeral
one) as a :class:`services.session.session.Session`, the same core the TUI, ``ask`` and plan runs use: the
workspace's policy, approval mode, profile, audit store, transcript and retrieval engine.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.session.session import Session

EXIT_OK = 0
EXIT_ERROR = 1
"""Any other failure (a missing workspace, a broken store, a tool that failed)."""
EXIT_USAGE = 2
"""Bad flags or input (``services.errors.InvalidInput``, ``ConfigError`` and ``InvalidName`` carry it too)."""
EXIT_DENIED = 3
"""A policy refusal of a governed call."""
EXIT_CONVERSATION_BUSY = 5
"""The conversation is held by another Aries (the TUI that shows it): ``ask -c`` is refused with
the holder's pid (``services.conversation.hold.ConversationBusy`` carries it)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT)."""
EXIT_BROKEN_PIPE = 141
"""The reader of our output went away (128 + SIGPIPE, as a shell reports it)."""

POLICY_HELP = (
    "policy YAML, Aries or capsule format (default: the workspace's policy.yaml, else the shipped safe policy)"
)
"""The help of every command's ``--policy FILE``."""

# -- the terminal writer -----------------------------------------------------------------------


def safe(text: object, *, single_line: bool = False) -> str:
    """Untrusted text (document, file name, tool output, transcript) made inert for a terminal."""
    from services.text.textsafe import neutralize

    return neutralize(str(text), single_line=single_line)


def out(text: object = "", *, end: str = "\n", single_line: bool = False) -> None:
    """``text`` on stdout, neutralised (``single_line``: newlines shown as ``\\n`` too)."""
    sys.stdout.write(safe(text, single_line=single_line) + end)


def err(text: object, *, end: str = "\n") -> None:
    """``text`` on stderr, neutralised; newlines kept (a diff, a multi-line message)."""
    sys.stderr.write(safe(text) + end)
    sys.stderr.flush()


def warn(message: object) -> None:
    """One line on stderr: ``aries: <message>``."""
    sys.stderr.write(f"aries: {safe(message, single_line=True)}\n")
    sys.stderr.flush()


def progress(text: str, *, done: bool = False) -> None:
    """A progress line on stderr that the next one overwrites (``\\r``); ``done`` ends it."""
    sys.stderr.write("\r" + safe(text, single_line=True) + ("\n" if done else ""))
    sys.stderr.flush()


# json.dumps already escapes C0 controls; these pass through with ensure_ascii=False. They can only
# occur inside JSON strings, so replacing them with \uXXXX keeps the document valid and equal.
_JSON_UNSAFE = "[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"  # compiled on first use


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """``data`` as JSON that is safe to show in a terminal (see the module docstring)."""
    import json  # on first use: the TUI's start goes through this module

    text = json.dumps(data, indent=indent, ensure_ascii=False, default=str)
    return re.sub(_JSON_UNSAFE, lambda m: f"\\u{ord(m.group(0)):04x}", text)


def print_json(data: Any, *, indent: int | None = 2) -> None:
    sys.stdout.write(json_text(data, indent=indent) + "\n")


def console(**options: Any) -> Any:
    """A rich Console whose closed pipe ends like any other (see ``app.cli.main``)."""
    from rich.console import Console

    class _PipeAwareConsole(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1 on its own; main() decides instead
            raise BrokenPipeError

    return _PipeAwareConsole(**options)


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """A rich table on stdout; the title and every cell neutralised to one line and never parsed as markup."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(safe(title, single_line=True)), title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(Text(safe(cell, single_line=True)) for cell in row))
    console(soft_wrap=True).print(table)


# -- error exits -------------------------------------------------------------------------------


def fail(error: Exception | str, code: int | None = None) -> int:
    """One line on stderr, ``aries: <message>``; returns ``code``, else the error's own exit code.

    An exception that is not a typed service error is a bug: it is raised again."""
    from services.errors import AriesError

    if isinstance(error, str):
        warn(error)
        return EXIT_ERROR if code is None else code
    if not isinstance(error, AriesError):
        raise error
    warn(error.message)
    return error.exit_code if code is None else code


def usage(parser: argparse.ArgumentParser) -> Any:
    """A handler for a command given without its sub-command: its help on stderr, exit 2."""

    def show_help(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    return show_help


# -- options and the workspace -----------------------------------------------------------------


def workspace_option(parser: argparse.ArgumentParser) -> None:
    """``-w/--workspace`` on a sub-command. ``SUPPRESS``: without it, the sub-command's default would
    overwrite ``aries -w NAME <command> …``."""
    parser.add_argument(
        "-w", "--workspace", metavar="W", default=argparse.SUPPRESS, help="the workspace (default: ephemeral)"
    )


def positive_int(text: str) -> int:
    """An argparse ``type``: a whole number of at least 1 (else argparse's one-line usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


def conversation_options(parser: argparse.ArgumentParser, *, last: str, by_id: str) -> None:
    """``-c/--continue`` (help ``last``) or ``--conversation ID`` (help ``by_id``): the value lands in
    ``args.conversation`` (``last``, an id, or None)."""
    resume = parser.add_mutually_exclusive_group()
    resume.add_argument("-c", "--continue", dest="conversation", action="store_const", const="last", help=last)
    resume.add_argument("--conversation", metavar="ID", help=by_id)


@contextmanager
def open_session(
    args: argparse.Namespace,
    *,
    surface: str = "cli",
    name: str | None = None,
    need: str | None = None,
    announce: str | None = None,
    **options: Any,
) -> Iterator[Session]:
    """The ``-w`` workspace (``name`` when the command names it otherwise) as a non-interactive
    :class:`~services.session.session.Session` of ``surface`` (``cli``, ``plan``, ``serve``: its audit
    ``source``, see ``services.session.opening.RULES``), opened by ``Session.open``; closed with its
    workspace on exit.

    Without a workspace name: ``need`` refuses (``InvalidInput(need)``); otherwise an ephemeral
    workspace is used, and ``announce`` (if given) is said on stderr. A named workspace whose settings
    need review is said once on stderr. ``options`` go to ``Session.open`` (``policy_file``, ``mode``,
    ``approver``, ``profile``, ``conversation``)."""
    from services.errors import InvalidInput
    from services.session.opening import Surface, close_session
    from services.session.session import Session

    wanted = name if name is not None else getattr(args, "workspace", None)
    if not wanted:
        if need is not None:
            raise InvalidInput(need)
        if announce:
            warn(announce)
    # said once, on stderr: stdout stays the command's own
    session = Session.open(wanted or None, surface=Surface(surface), on_warning=warn, **options)
    try:
        yield session
    finally:
        close_session(session)
