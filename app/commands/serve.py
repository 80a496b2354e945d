"""``/serve [start] | stop | status`` and the palette's "Start/stop the web viewer".

The App owns one ``services.web.viewer.ViewerServer`` for the current workspace: it serves from its
own thread (aiohttp on its own event loop, 127.0.0.1 only, a random token per start), is started and
stopped here in thread workers (starting binds and reconciles; stopping joins the thread), and is
stopped when the workspace is switched or Aries quits (``Commands.session_closing`` awaits
:meth:`ServeController.shutdown`). Its URL is said in the transcript and kept in the header.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from services.errors import AriesError
from widgets.commands import CommandError
from widgets.messages import SessionChanged

if TYPE_CHECKING:
    from app.host import Host
    from services.web.viewer import ViewerServer


class ServeController:
    def __init__(self, host: Host) -> None:
        self.host = host
        self.server: ViewerServer | None = None
        self.workspace_name = ""
        self._busy = False

    @property
    def running(self) -> bool:
        return self.server is not None and self.server.running

    def header_part(self) -> str:
        """``web http://127.0.0.1:PORT/`` while serving (the token stays out of the header), else ''."""
        server = self.server
        if server is None or not server.running:
            return ""
        return f"web http://127.0.0.1:{server.port}/"

    def command(self, args: list[str]) -> None:
        action = args[0].lower() if args else "start"
        if len(args) > 1 or action not in {"start", "stop", "status"}:
            raise CommandError(f"cannot read '/serve {' '.join(args)}'.")
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
        self.host.run_worker(
            self._start(session.workspace.root, session.workspace.name), group="serve", exit_on_error=False
        )

    async def _start(self, root: Path, name: str) -> None:
        from services.web.viewer import ViewerServer

        host = self.host
        host.status_start("serve", "starting the web viewer…")
        try:
            server = ViewerServer(root)
            await asyncio.to_thread(server.start)
        except AriesError as exc:
            host.report_error(exc.message, "/serve")
            return
        finally:
            self._busy = False
            host.status_stop("serve")
        if host.workspace_name != name:  # the workspace changed while it started: not this one's any more
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
        """Stop the server, if any (idempotent; the thread is joined off the App's loop)."""
        server, self.server = self.server, None
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
