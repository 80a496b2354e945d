"""``/serve [start] | stop | status`` and the palette's "Start/stop the web viewer".

The App owns one ``services.web.viewer.ViewerServer`` for the current workspace: it serves from its
own thread (aiohttp on its own event loop, 127.0.0.1 only, a random token per start) with the
session's own retrieval engine (``engine=session.engine()``: no second engine in the TUI process; see
``services.web.viewer`` for why sharing it across threads is safe), is started and stopped here in
thread workers (starting binds and reconciles; stopping joins the thread), and is stopped when the
workspace is switched or Aries quits, *before* the session closes its engine
(``Commands.session_closing`` awaits :meth:`ServeController.shutdown`, which also waits for a start
still in flight and stops what it started). Its URL is said in the transcript and kept in the header.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from services.errors import AriesError
from widgets.messages import SessionChanged

if TYPE_CHECKING:
    from app.host import Host
    from services.session.session import Session
    from services.web.viewer import ViewerServer


class ServeController:
    def __init__(self, host: Host) -> None:
        self.host = host
        self.server: ViewerServer | None = None
        self.workspace_name = ""
        self._busy = False
        self._starting: asyncio.Task[ViewerServer] | None = None  # a start in flight (binding, reconciling)
        self._generation = 0  # moved by every shutdown: a start that began before it is not wanted any more

    @property
    def running(self) -> bool:
        return self.server is not None and self.server.running

    def header_part(self) -> str:
        """``web http://127.0.0.1:PORT/`` while serving (the token stays out of the header), else ''."""
        server = self.server
        if server is None or not server.running:
            return ""
        return f"web http://127.0.0.1:{server.port}/"

    def command(self, action: str) -> None:
        """``/serve start | stop | status`` (the grammar allows nothing else)."""
        if action == "start":
            self.start()
        elif action == "stop":
            self.stop()
        else:
            self.status()

    def toggle(self) -> None:
        """The palette's command: start the viewer, or stop it when it runs."""
        try:
            if self.running:
                self.stop()
            else:
                self.start()
        except AriesError as exc:
            self.host.report_error(exc.message, "/serve")

    def start(self) -> None:
        session = self.host.require_session()
        if self.running:
            self.status()
            return
        if self._busy:
            raise AriesError("the web viewer is starting or stopping; try again in a moment")
        self._busy = True
        self.host.run_worker(self._start(session, self._generation), group="serve", exit_on_error=False)

    async def _start(self, session: Session, generation: int) -> None:
        from services.web.viewer import ViewerServer

        host, name = self.host, session.workspace.name
        if generation != self._generation:  # shut down before this worker ran: its session is closing
            self._busy = False
            return

        def serve() -> ViewerServer:  # in a thread: the engine may be made here, the start reconciles
            server = ViewerServer(session.workspace.root, engine=session.engine())
            server.start()
            return server

        host.status_start("serve", "starting the web viewer…")
        self._starting = asyncio.ensure_future(asyncio.to_thread(serve))
        try:
            server = await asyncio.shield(self._starting)
        except AriesError as exc:
            host.report_error(exc.message, "/serve")
            return
        finally:
            self._starting = None
            self._busy = False
            host.status_stop("serve")
        if generation != self._generation:  # shut down while it started (a switch, quitting): stopped there
            await asyncio.to_thread(server.stop)
            return
        self.server, self.workspace_name = server, name
        host.copy_to_clipboard(server.url)  # OSC 52: the terminal's clipboard, where the terminal allows it
        host.say(
            f"Web viewer for workspace {name}: {server.url}\n"
            "Open it in a browser on this machine (the link is also on the clipboard where the terminal "
            "allows it); the token in the link is needed, and changes with every start. /serve stop stops it.",
            "serve",
        )
        self._header_changed()

    def stop(self) -> None:
        if not self.running:
            self.server = None
            self.host.say("The web viewer is not running. /serve starts it.", "serve")
            return
        self.host.run_worker(self._stop(), group="serve", exit_on_error=False)

    async def _stop(self) -> None:
        name = self.workspace_name
        await self.shutdown()
        self.host.say(f"Web viewer for workspace {name} stopped.", "serve")
        self._header_changed()

    async def shutdown(self) -> None:
        """Stop the server, if any, and one still starting (idempotent; the thread is joined off the
        App's loop). When this returns, no viewer thread uses the session's engine any more."""
        self._generation += 1
        starting, server, self.server = self._starting, self.server, None
        if starting is not None:
            with contextlib.suppress(Exception):  # a failed start is reported by _start
                late = await asyncio.shield(starting)
                await asyncio.to_thread(late.stop)
        if server is not None:
            await asyncio.to_thread(server.stop)

    def _header_changed(self) -> None:
        """The header names the viewer's URL while it runs."""
        session = self.host.session
        if session is not None:
            self.host.publish(SessionChanged(session))

    def status(self) -> None:
        server = self.server
        if server is not None and server.running:
            self.host.say(f"The web viewer serves workspace {self.workspace_name} at {server.url}", "serve")
        else:
            self.host.say("The web viewer is not running. /serve starts it.", "serve")
