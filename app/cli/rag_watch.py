"""``aries -w W rag index watch NAME``: keep an index current with its folders, in the foreground.

    aries -w W rag index watch NAME [--json]

A live line on a terminal (each batch: what it added, updated and removed); one line per batch
otherwise (``--json``: one JSON object per line).  Ctrl+C (or SIGTERM) stops after the batch being
written; the index is consistent whenever it stops, ``kill -9`` included (the next watch catches up).
Refused in a workspace that is untrusted or changed since trusted, and for a folder outside the
policy's allowed roots (see ``services.retrieval.watch``).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from app.cli._common import EXIT_OK, console, open_session, out, print_json, progress, warn

if TYPE_CHECKING:
    from services.retrieval.watch import WatchBatch


DESCRIPTION = (
    "Keep INDEX current with the folders it was built from: caught up on start, then each added, edited, "
    "deleted or renamed file is written within seconds, in batches. A live line on a terminal, one line per "
    "batch otherwise (--json: one object per batch). Ctrl+C or SIGTERM stops after the batch being written. "
    "Refused in an untrusted or changed workspace and for a folder outside the policy's allowed roots; "
    "one watcher per index."
)


def register(index_sub: Any) -> None:
    watch = index_sub.add_parser(
        "watch",
        help="keep an index current with its folders (foreground; Ctrl+C stops)",
        description=DESCRIPTION,
    )
    watch.add_argument("name", metavar="INDEX")
    watch.add_argument("--json", action="store_true", help="one JSON object per batch on stdout")
    watch.set_defaults(func=handle_index_watch)


def handle_index_watch(args: argparse.Namespace) -> int:
    """Watch until Ctrl+C; exit 0 when stopped, 3 when refused, 1 on an error (one line each)."""
    from services.session.watching import folder_watch

    if not getattr(args, "workspace", None):
        from services.errors import InvalidInput

        raise InvalidInput("watch an index of a workspace: aries -w NAME rag index watch INDEX")
    with open_session(args) as session:
        watcher = folder_watch(session, args.name, surface="cli")
        live = sys.stderr.isatty() and not args.json
        stop = threading.Event()
        state: dict[str, Any] = {"last": ""}

        def on_note(line: str) -> None:
            if live:
                progress(line, done=True)
            elif not args.json:
                warn(line)

        def on_batch(batch: WatchBatch) -> None:
            if args.json:
                print_json({**batch.to_dict(), "at": time.time()}, indent=None)
                sys.stdout.flush()
                return
            stamp = time.strftime("%H:%M:%S")
            state["last"] = f"{stamp} {batch.line()}"
            if live:
                width = console(stderr=True).width
                progress(f"{args.name}: {state['last']}"[: max(20, width - 1)].ljust(max(20, width - 1)))
            else:
                out(f"{stamp} {batch.line()}", single_line=True)
                sys.stdout.flush()
            for problem in batch.problems:
                if live:
                    progress("", done=True)
                warn(problem)

        with _stopping_on_term(stop):
            batches = _run(watcher, stop, on_batch, on_note)
        if live:
            progress("", done=True)
        if not args.json:
            warn(f"stopped watching {args.name!r} after {batches} batch(es)")
        return EXIT_OK


def _run(watcher: Any, stop: threading.Event, on_batch: Any, on_note: Any) -> int:
    """The watch in a worker thread; Ctrl+C in the main thread sets ``stop`` and waits for it."""
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["batches"] = watcher.run(stop, on_batch, on_note)
        except BaseException as exc:  # re-raised in the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="aries-watch")
    worker.start()
    while worker.is_alive():
        try:
            worker.join(0.2)
        except KeyboardInterrupt:
            stop.set()
    if "error" in outcome:
        raise outcome["error"]
    batches: int = outcome.get("batches", 0)
    return batches


@contextlib.contextmanager
def _stopping_on_term(stop: threading.Event) -> Iterator[None]:
    """SIGTERM stops the watch as Ctrl+C does (a batch in flight is finished first)."""

    def on_term(signum: int, frame: object) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
