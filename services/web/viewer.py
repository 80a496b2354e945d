"""The viewer server: :class:`ViewerServer` (its own thread and event loop) and :func:`run_viewer`.

``ViewerServer(workspace_path).start()`` refuses any host but ``127.0.0.1``, ``::1`` or ``localhost``
(:class:`ViewerError`), opens the workspace's context service, reconciles (see
:meth:`DocumentSet.reconcile`: nothing is served before it is done), then listens and returns.  The
page's URL carries a random per-start token in its fragment (``#token=…``); the page sends it back as
``X-Aries-Token``.  ``stop()`` is idempotent: it closes the listener, lets running saves finish, and
joins the thread.

**The retrieval engine.** Inside a session — ``/serve`` in the TUI, and ``aries serve``, which opens a
session of its own (``Session.open(…, surface=Surface.SERVE)``) — the viewer is given the session's
engine, ``ViewerServer(root, engine=session.engine())``, and serves its workspace object: one engine per
process and workspace, never a second one beside the TUI's.  The engine is *borrowed*: the viewer never
closes it, and its owner must :meth:`~ViewerServer.stop` the viewer (which joins the viewer's thread
and its save thread) before it closes the engine — the TUI stops the viewer before the session closes
on a workspace switch or on quit (``Commands.session_closing``).  Without ``engine`` (tests, tools)
the viewer opens its own and closes it on stop.

Sharing is safe because every ``RetrievalEngine`` method is synchronous and thread-safe and takes its
own locks: the open stores are cached under the ``Indexes`` lock (an ``RLock``); a query holds its
index's store lock (one ``flock`` object per path in the process, exclusive between threads too) for
BM25 and the dense search, which runs on the engine's single encoder thread while the caller waits; an
ingest or the viewer's reindex after a save (``index_update``) holds the index's writer lock (one writer
per index across threads and processes) and takes the store lock per batch.  So the viewer's loads
(default executor threads) and saves (one writer thread) interleave with the TUI's worker threads batch
by batch, exactly as two processes do; what the viewer saves is what the TUI's next query sees.

``reindex_delay`` (or ``ARIES_WEB_REINDEX_DELAY``, seconds) is a test hook: each save sleeps that long
after its write, inside its lock, so that tests can see the 423 answers.
``ARIES_WEB_SAVE_FAULT=written`` stops the process right after a save's write (crash tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.web.errors import ViewerError

if TYPE_CHECKING:
    from aiohttp import web

    from services.retrieval import RetrievalEngine
    from services.web.app import ViewerState

LOOPBACK_HOSTS = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "::1": "::1"}
DELAY_ENV = "ARIES_WEB_REINDEX_DELAY"
Progress = Callable[[str], None]


def check_host(host: str) -> str:
    """The address to bind for ``host``; :class:`ViewerError` for anything but loopback."""
    address = LOOPBACK_HOSTS.get(host.strip().lower().strip("[]"))
    if address is None:
        raise ViewerError(f"refusing to serve on {host!r}: the viewer listens on 127.0.0.1, ::1 or localhost only")
    return address


class ViewerServer:
    """The web viewer/editor of one workspace, served from its own thread (see the module docstring).

    ``engine``: the session's retrieval engine, borrowed (its workspace is the one served; the viewer
    never closes it: stop the viewer first); None: the viewer opens its own on ``workspace``."""

    def __init__(
        self,
        workspace: Path,
        *,
        engine: RetrievalEngine | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        reindex_delay: float = 0.0,
        on_progress: Progress | None = None,
    ) -> None:
        self.workspace_path = Path(workspace)
        self.engine = engine
        """The engine it serves with: the one given (borrowed), else its own once started."""
        self._borrowed = engine is not None
        self.host = host
        self._address = LOOPBACK_HOSTS.get(host.strip().lower().strip("[]"), "127.0.0.1")
        self._requested_port = int(port)
        self._token = token or secrets.token_urlsafe(24)
        self.reindex_delay = reindex_delay or float(os.environ.get(DELAY_ENV) or 0)
        self.on_progress = on_progress
        self.startup: dict[str, Any] = {}
        """What the start-up reconciliation found (context reconcile, read-only indexes, replayed saves)."""
        self._port = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._state: ViewerState | None = None
        self._closers: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    # -- properties ----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._port

    @property
    def token(self) -> str:
        return self._token

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._runner is not None

    @property
    def url(self) -> str:
        shown = "[::1]" if self._address == "::1" else "127.0.0.1"
        return f"http://{shown}:{self._port}/#token={self._token}"

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Open, reconcile, listen; returns once listening (:class:`ViewerError` when it cannot)."""
        self._address = check_host(self.host)
        with self._lock:
            if self._thread is not None:
                return
            ready = threading.Event()
            failure: list[BaseException] = []
            self._thread = threading.Thread(target=self._run, args=(ready, failure), name="aries-web", daemon=True)
            self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            error = failure[0]
            if isinstance(error, ViewerError):
                raise error
            from services.errors import AriesError

            if isinstance(error, AriesError):
                raise ViewerError(f"the viewer cannot start: {error.message}") from error
            raise error

    def _open(self) -> ViewerState:
        from services.context.service import ContextService
        from services.web.app import ViewerState
        from services.web.documents import DocumentSet
        from services.web.reqlog import WebRequestLog
        from services.workspace.manager import WORKSPACE_FILE

        root = self.workspace_path
        if not (root / WORKSPACE_FILE).is_file():
            raise ViewerError(f"{root} is not an Aries workspace (no {WORKSPACE_FILE})")
        engine = self.engine if self.engine is not None and self._borrowed else self._own_engine(root)
        if engine.workspace.root.resolve() != root.resolve():
            raise ViewerError(f"the engine given serves {engine.workspace.root}, not {root}")
        context = ContextService(engine.workspace, engine_factory=lambda: engine)  # never closes the engine
        self._closers.append(context.close)
        documents = DocumentSet(engine.workspace, engine, context)
        self.startup = documents.reconcile(self.on_progress)
        return ViewerState(documents, self._token, self.reindex_delay, log=WebRequestLog(root))

    def _own_engine(self, root: Path) -> RetrievalEngine:
        """No engine was given: one of its own on ``root``, closed with the viewer (then its workspace)."""
        from services.retrieval import RetrievalEngine
        from services.workspace.manager import Workspace

        workspace = Workspace(root, root.name)
        self._closers.append(workspace.close)
        engine = RetrievalEngine(workspace)
        self._closers.append(engine.close)
        self.engine = engine
        return engine

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            try:
                self._state = self._open()
                loop.run_until_complete(self._listen(self._state))
            except BaseException as exc:  # reported to start()'s caller
                failure.append(exc)
                ready.set()
                return
            self._loop = loop
            ready.set()
            loop.run_forever()
        finally:
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
                self._runner = None
            if self._state is not None:
                self._state.writer.shutdown(wait=True)
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()
            self._loop = None
            for close in reversed(self._closers):
                with contextlib.suppress(Exception):
                    close()
            self._closers.clear()

    async def _listen(self, state: ViewerState) -> None:
        from aiohttp import web

        from services.web.app import build_app

        runner = web.AppRunner(build_app(state), access_log=None, handle_signals=False, shutdown_timeout=30)
        await runner.setup()
        site = web.TCPSite(runner, self._address, self._requested_port, reuse_address=False)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ViewerError(
                f"cannot listen on {self.host} port {self._requested_port}: {exc.strerror or exc}"
            ) from None
        sockets = [s for s in (runner.addresses or [])]
        self._port = int(sockets[0][1]) if sockets else self._requested_port
        state.port = self._port
        self._runner = runner

    def stop(self) -> None:
        """Stop serving and join the thread (idempotent). A stop called while another one runs (two
        threads) returns only once the thread has ended too: after any ``stop()`` returns, nothing of
        the viewer uses the engine any more."""
        with self._lock:
            thread, loop = self._thread, self._loop
        if thread is None:
            return
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
        thread.join()
        with self._lock:
            if self._thread is thread:
                self._thread = None

    def __enter__(self) -> ViewerServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_viewer(
    workspace: Path,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None],
    on_progress: Progress | None = None,
    engine: RetrievalEngine | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM (``aries serve``); ``on_ready(url)`` once listening. ``engine``:
    the session's (see :class:`ViewerServer`), closed by its session after this returns."""
    stop = threading.Event()

    def request_stop(_signum: int, _frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    server = ViewerServer(workspace, engine=engine, host=host, port=port, on_progress=on_progress)
    try:
        server.start()
        on_ready(server.url)
        while not stop.wait(0.25):
            if not server.running:
                raise ViewerError("the viewer stopped unexpectedly")
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = ["ViewerServer", "check_host", "run_viewer"]
