"""``/rag index watch NAME [off]``: keep an index current with its folders while the TUI runs.

Each watch is a :class:`~services.retrieval.watch.FolderWatch` running in a thread, awaited by an
async worker of the App: the thread hands its batches to the worker through an ``asyncio`` queue
(``call_soon_threadsafe``), and the worker, on the App's thread, tells the operator (a short
notification per batch, a warning for a file that could not be indexed) — the thread never touches
the App.  The header names the watched indexes while they run (``Commands.serving``).  A watch stops
with ``/rag index watch NAME off``, when its session closes, or on an error (one line, e.g. the
inotify limit); a refusal (untrusted workspace, a folder outside the policy's roots, another
watcher) is one error line.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

from services.errors import AriesError
from widgets.commands import CommandError, WatchIndex
from widgets.messages import SessionChanged

if TYPE_CHECKING:
    from app.host import Host
    from services.retrieval.watch import WatchBatch
    from services.session.session import Session

TITLE = "/rag index watch"


class WatchController:
    """The running watches of the session, by index name."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.running: dict[str, threading.Event] = {}
        self.armed: set[str] = set()  # the watches that are following their folders (the header names them)

    def header_part(self) -> str:
        """``watch notes, papers`` while watches follow their folders, else ''."""
        return f"watch {', '.join(sorted(self.armed))}" if self.armed else ""

    def command(self, parsed: WatchIndex) -> None:
        if parsed.state not in (None, "off"):
            raise CommandError(f"/rag index watch {parsed.name} takes only 'off' after the index name.")
        if parsed.state == "off":
            self.stop(parsed.name)
            return
        if parsed.name in self.running:
            raise CommandError(f"index {parsed.name} is watched already (/rag index watch {parsed.name} off stops it).")
        session = self.host.require_session()
        stop = threading.Event()
        self.running[parsed.name] = stop
        self.host.run_worker(self._watch(session, parsed.name, stop), group="rag-watch", exit_on_error=False)

    def stop(self, name: str) -> None:
        stop = self.running.get(name)
        if stop is None:
            self.host.notify(f"Index {name} is not being watched.", title=TITLE, timeout=3)
            return
        stop.set()
        self.host.notify(f"Stopping the watch of {name}…", title=TITLE, timeout=3)

    def stop_all(self) -> None:
        """The session closes: every watch stops after the batch it is writing (no notice)."""
        for stop in self.running.values():
            stop.set()

    async def _watch(self, session: Session, name: str, stop: threading.Event) -> None:
        loop = asyncio.get_running_loop()
        heard: asyncio.Queue[WatchBatch | str | None] = asyncio.Queue()

        def put(item: WatchBatch | str | None) -> None:
            loop.call_soon_threadsafe(heard.put_nowait, item)

        def run() -> int:
            from services.session.watching import folder_watch

            try:
                return folder_watch(session, name, surface="tui").run(stop, put, put)
            finally:
                put(None)

        done = asyncio.ensure_future(asyncio.to_thread(run))
        try:
            while (item := await heard.get()) is not None:
                self._heard(name, item)
            batches = await done
        except AriesError as exc:
            self.host.report_error(exc.message, TITLE)
            return
        finally:
            if self.running.get(name) is stop:
                del self.running[name]
                self.armed.discard(name)
            self._header_changed()
        self.host.say(f"Stopped watching index {name} ({batches} batch(es) written).", "rag")

    def _heard(self, name: str, item: WatchBatch | str) -> None:
        """A note (the watch is armed) or a batch, on the App's thread."""
        if isinstance(item, str):
            self.host.notify(item, title=TITLE, timeout=4)
            if item.startswith("watching") and name in self.running:
                self.armed.add(name)
                self._header_changed()
            return
        if item.changed or item.number:  # a catch-up that found nothing to do is not news
            self.host.notify(f"{name}: {item.line()}", title=TITLE, timeout=3)
        for problem in item.problems:
            self.host.notify(problem, title=f"{TITLE} {name}", severity="warning", timeout=8)

    def _header_changed(self) -> None:
        session = self.host.session
        if session is not None:
            self.host.publish(SessionChanged(session))
