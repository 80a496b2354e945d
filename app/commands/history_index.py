"""The conversation search index of the open workspace, built in the background once it is ready.

Each workspace that opens gets one worker (group ``history-index``): it waits until the workbench is
settled (the first frame, the workspace and the deferred start-up work come first: nothing here is
on the start-up path), then catches the index up with :func:`services.history_search.background.build`,
a slice at a time, in a child process (:mod:`services.history_search.child`: Tantivy and the secret
detectors it loads never stay resident in the TUI). A ``/history search`` meanwhile answers from what
is indexed and says how far ("partial: 412 of 2,000 conversations"); once the build is done, each
search catches up with what was written since (a turn just written is findable at once). The worker stops
when its workspace closes (``stop``).
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.host import Host
    from services.history_search.coverage import Coverage
    from services.session.session import Session


class HistoryIndexer:
    def __init__(self, host: Host) -> None:
        self.host = host
        self._cancel: threading.Event | None = None
        self.coverage: Coverage | None = None  # after the last slice (None before the first)
        self.done = asyncio.Event()  # set when the build of the open workspace has finished

    def start(self, session: Session) -> None:
        """Build ``session``'s workspace's index once the workbench is settled (an ephemeral
        workspace keeps no conversations worth a search index)."""
        self.stop()
        self.coverage, self.done = None, asyncio.Event()
        if session.workspace.ephemeral:
            return
        cancel = self._cancel = threading.Event()

        async def build() -> None:  # a coroutine function: nothing is made if the App ends first
            await self._build(session, cancel)

        self.host.run_worker(build, group="history-index", exit_on_error=False)

    def stop(self) -> None:
        """The workspace closes: its build stops after the file it is on."""
        if self._cancel is not None:
            self._cancel.set()
            self._cancel = None

    async def _build(self, session: Session, cancel: threading.Event) -> None:
        from services.errors import AriesError

        await self.host.settled.wait()
        if cancel.is_set():
            return
        try:
            self.coverage = await asyncio.to_thread(self._run, session, cancel)
        except AriesError as exc:  # a full or read-only disk: searches say so when asked
            if not cancel.is_set():
                self.host.report_error(exc.message, "conversation search index")
        finally:
            if not cancel.is_set():
                self.done.set()

    def _run(self, session: Session, cancel: threading.Event) -> Coverage:
        from services.history_search.child import build_in_child

        def heard(coverage: Coverage) -> None:
            self.coverage = coverage
            if coverage.rebuilt and not cancel.is_set():  # found damaged on open: said once
                from services.history_search.query import SearchResult

                notice = SearchResult("", [], coverage).notice()
                self.host.notify(notice, title="conversation search index", severity="warning", timeout=8)

        workspace = session.workspace  # built in a child process: what it loads is not kept resident here
        return build_in_child(workspace.root, workspace.transcripts_dir, cancel, report=heard)
