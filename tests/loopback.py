"""Loopback servers for tests: real aiohttp (or raw TCP) servers on 127.0.0.1, ephemeral ports.

One implementation for every suite that needs a server to talk to (the web tools' pages and SearXNG,
the Ollama-protocol embedder, scripted model servers):

    def test_x(loopback):                       # the fixture in tests/conftest.py
        async def hello(request):
            return web.Response(text="hi")
        server = loopback({"GET /hello": hello})  # or loopback(app) with an aiohttp Application
        fetch(f"{server.url}/hello")
        assert server.requests[0]["path"] == "/hello"

The server runs its own event loop in a daemon thread, so it serves synchronous code (``asyncio.run``
inside the code under test) and async tests alike; the fixture stops it after the test, cancelling
handlers that are still running (a slow or dripping one).  ``LoopbackServer.tcp(handler)`` serves a
raw ``asyncio`` stream handler instead, for peers that do not speak HTTP or reset the connection.
Session-scoped servers can be built directly (``LoopbackServer(app)`` ... ``server.stop()``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

Handler = Callable[[Any], Awaitable[Any]]
StreamHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def build_app(routes: Mapping[str, Handler]) -> Any:
    """An aiohttp Application from ``{"METHOD /path": handler}`` (``"/path"`` alone means GET)."""
    from aiohttp import web

    app = web.Application()
    for key, handler in routes.items():
        method, _, path = key.partition(" ") if " " in key else ("GET", "", key)
        app.router.add_route(method.upper(), path, handler)
    return app


class LoopbackServer:
    """An aiohttp application (or a raw TCP handler) on 127.0.0.1:<free port>, in a background thread.

    ``requests`` records every HTTP request seen (method, path, query string), in order.
    """

    def __init__(self, app: Any = None, *, stream_handler: StreamHandler | None = None) -> None:
        if (app is None) == (stream_handler is None):
            raise ValueError("give an aiohttp app (or routes) or a stream handler")
        if isinstance(app, dict):  # routes (an aiohttp Application is a Mapping too: test dict)
            app = build_app(app)
        self.app = app
        self.stream_handler = stream_handler
        self.requests: list[dict[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self.runner: Any = None
        self._tcp: asyncio.AbstractServer | None = None
        self._stream_tasks: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="loopback-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("loopback server did not start")
        if self._error is not None:
            raise RuntimeError(f"loopback server did not start: {self._error}")

    @classmethod
    def tcp(cls, handler: StreamHandler) -> LoopbackServer:
        """A raw TCP server: ``handler(reader, writer)`` per connection."""
        return cls(stream_handler=handler)

    # -- lifecycle -------------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._start())
        except BaseException as exc:  # reported to the constructor
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        if self.stream_handler is not None:
            handler = self.stream_handler

            async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                task = asyncio.current_task()
                assert task is not None
                self._stream_tasks.add(task)
                try:
                    await handler(reader, writer)
                finally:
                    self._stream_tasks.discard(task)
                    writer.close()

            self._tcp = await asyncio.start_server(tracked, "127.0.0.1", 0)
            self.port = self._tcp.sockets[0].getsockname()[1]
            return
        from aiohttp import web

        @web.middleware
        async def record(request: web.Request, handler: Handler) -> Any:
            self.requests.append({"method": request.method, "path": request.path, "query": request.query_string})
            return await handler(request)

        self.app.middlewares.append(record)
        self.runner = web.AppRunner(self.app, shutdown_timeout=0.2, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def call(self, coro: Awaitable[Any], timeout: float = 10) -> Any:
        """Run a coroutine on the server's loop (e.g. to read its state) and return its result."""

        async def wrapper() -> Any:
            return await coro

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(timeout)

    def open_connections(self) -> int:
        """How many client connections the server holds open right now."""

        async def count() -> int:
            if self.runner is not None and self.runner.server is not None:
                return len(self.runner.server.connections)
            return len(self._stream_tasks)

        return int(self.call(count()))

    def stop(self) -> None:
        if not self._thread.is_alive():
            return

        async def cleanup() -> None:
            if self.runner is not None:
                await self.runner.cleanup()
            if self._tcp is not None:
                self._tcp.close()
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:  # e.g. a handler still sleeping or dripping
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        try:
            self.call(cleanup())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self.loop.close()


__all__ = ["Handler", "LoopbackServer", "StreamHandler", "build_app"]
