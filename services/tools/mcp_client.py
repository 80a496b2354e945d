"""The MCP servers of one tool gateway, driven with the official ``mcp`` SDK.

``McpHub`` owns one background thread with its own event loop; every connection (the SDK's
``stdio_client`` or ``streamable_http_client`` and its ``ClientSession``) lives in a task of that
loop, so the anyio scopes the SDK needs are entered and left in one task whatever loop the caller
runs (the TUI's, ``asyncio.run`` of the CLI, a plan thread).  Callers submit coroutines to it.

A server is started lazily (first listing or call), its tool list is cached, and it is stopped
with the gateway: the SDK closes stdin and then kills the process group it started the server in;
the hub kills that group again (psutil / ``killpg``) so that nothing the server spawned outlives
it, even when the server itself was killed.  A server that hangs past ``timeout_s``, exits, or
sends what the SDK cannot read is marked and stopped; the next call starts it afresh.  Every
failure is a typed ``McpServerError`` / ``ToolTimeout`` with one line naming the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import tempfile
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from services.policy.mcp import McpServerConfig, McpSettings
from services.text.textsafe import neutralize
from services.tools.mcp_procs import new_group_leader, process_alive, resolve_command
from services.tools.results import ToolInternalError, ToolTimeout

T = TypeVar("T")
_STOP_WAIT_S = 8.0  # the SDK's own shutdown is bounded at about 6 s (stdin close, SIGTERM, SIGKILL)


class McpServerError(ToolInternalError):
    """An MCP server failed: did not start, exited, or answered with something unreadable."""

    code = "mcp_server_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message, **{"code": self.code, **details})  # the kind reaches the tool result


@dataclass
class ServerState:
    """What the hub knows of one server (``status()`` reports it; nothing here starts one)."""

    config: McpServerConfig
    state: str = "stopped"  # stopped | starting | running | failed | closed
    tools: list[dict[str, Any]] | None = None  # the cached tools/list (wire JSON)
    error: str | None = None
    pid: int | None = None
    group: int | None = None  # the process group still to be killed (see McpHub._kill_group)
    starts: int = 0
    session: Any = None
    task: asyncio.Task[None] | None = None
    stop: asyncio.Event | None = None
    stderr: Any = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def describe(self) -> dict[str, Any]:
        return {
            **self.config.describe(),
            "state": self.state,
            "pid": self.pid,
            "tools": len(self.tools) if self.tools is not None else None,
            "starts": self.starts,
            "error": self.error,
        }


def _one_line(text: str, limit: int = 300) -> str:
    return neutralize(" ".join(str(text).split()), single_line=True)[:limit]


def _describe_exception(exc: BaseException) -> str:
    """One line for an exception, looking inside the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    message = str(exc) or type(exc).__name__
    return _one_line(f"{type(exc).__name__}: {message}" if str(exc) else message)


class McpHub:
    """The configured servers of one gateway; see the module docstring."""

    def __init__(self, settings: McpSettings) -> None:
        self.settings = settings
        self._servers = {name: ServerState(cfg) for name, cfg in settings.servers.items()}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._background: set[asyncio.Future[None]] = set()

    def _later(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` on the hub's loop without waiting (a reference is kept until it ends)."""
        future = asyncio.ensure_future(coro)
        self._background.add(future)
        future.add_done_callback(self._background.discard)

    # -- the loop -------------------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise McpServerError("the MCP provider is closed", retryable=False)
            if self._loop is None:
                # The SDK logs unreadable lines with logger.exception; never onto the TUI's terminal.
                logging.getLogger("mcp").addHandler(logging.NullHandler())
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="aries-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the hub's loop and wait for it (for callers without a loop)."""
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        return future.result(timeout)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the hub's loop from another loop; cancelling the caller cancels it."""
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        return await asyncio.wrap_future(future)

    # -- what is known --------------------------------------------------------------------
    def names(self) -> list[str]:
        return sorted(self._servers)

    def config(self, name: str) -> McpServerConfig:
        return self._server(name).config

    def status(self) -> list[dict[str, Any]]:
        return [self._servers[name].describe() for name in self.names()]

    def _server(self, name: str) -> ServerState:
        try:
            return self._servers[name]
        except KeyError:
            raise McpServerError(f"no MCP server {name!r} is configured", retryable=False) from None

    # -- listing and calls (synchronous and async fronts) -----------------------------------
    def list_tools(self, name: str) -> list[dict[str, Any]]:
        """The server's tools (wire JSON: name, description, inputSchema, annotations); starts it."""
        server = self._server(name)
        return self.run(self._tools(server), server.config.start_timeout_s + _STOP_WAIT_S + 5)

    async def call_tool(self, name: str, tool: str, arguments: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One ``tools/call``; the result's wire JSON (content, structuredContent, isError)."""
        server = self._server(name)
        return await self.arun(self._call(server, tool, arguments, timeout))

    # -- inside the hub's loop -----------------------------------------------------------------
    async def _tools(self, server: ServerState) -> list[dict[str, Any]]:
        await self._ensure_started(server)
        assert server.tools is not None
        return server.tools

    async def _ensure_started(self, server: ServerState) -> Any:
        async with server.lock:
            if server.state == "running" and server.task is not None and not server.task.done():
                if _alive(server):
                    return server.session
                server.state, server.error = "failed", self._with_stderr(server, "the server process exited")
            if server.task is not None:  # failed or exited: stop what is left, then start afresh
                await self._stop(server)
            await self._start(server)
            return server.session

    async def _start(self, server: ServerState) -> None:
        cfg = server.config
        # The SDK's first import takes about a second: outside the server's start-up time, off the loop.
        await asyncio.to_thread(_import_sdk, cfg.transport)
        server.state, server.error, server.pid = "starting", None, None
        server.starts += 1
        server.stop = asyncio.Event()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        server.task = asyncio.create_task(self._serve(server, ready), name=f"mcp:{cfg.name}")
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved even if nobody waits
        try:
            await asyncio.wait_for(asyncio.shield(ready), cfg.start_timeout_s)
        except TimeoutError:
            server.error = self._with_stderr(server, f"did not start within {cfg.start_timeout_s:g} s")
            await self._stop(server)
            server.state = "failed"
        except Exception as exc:
            server.error = self._with_stderr(server, _describe_exception(exc))
            await self._stop(server)
            server.state = "failed"
        if server.state != "running":
            raise McpServerError(f"MCP server {cfg.name!r} failed to start: {server.error}", retryable=True)

    async def _serve(self, server: ServerState, ready: asyncio.Future[None]) -> None:
        """The task that owns one connection: open it, list the tools, wait to be stopped."""
        from mcp import ClientSession

        cfg = server.config
        try:
            async with contextlib.AsyncExitStack() as stack:
                if cfg.url is not None:
                    from mcp.client.streamable_http import streamable_http_client

                    streams = await stack.enter_async_context(streamable_http_client(cfg.url))
                else:
                    streams = await stack.enter_async_context(self._stdio(server))
                read, write = streams[0], streams[1]
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                server.tools = await _list_all(session)
                server.session = session
                server.state = "running"
                if not ready.done():
                    ready.set_result(None)
                assert server.stop is not None
                await server.stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else McpServerError(_describe_exception(exc)))
            elif server.state == "running":
                server.state, server.error = "failed", self._with_stderr(server, "the connection ended")
            if not isinstance(exc, Exception):
                raise
        finally:
            server.session = None
            if server.state == "running":  # stopped on purpose, or the server went away
                server.state = "stopped" if server.stop is not None and server.stop.is_set() else "failed"
            self._kill_group(server)

    @contextlib.asynccontextmanager
    async def _stdio(self, server: ServerState) -> Any:
        import psutil
        from mcp.client.stdio import StdioServerParameters, stdio_client

        cfg = server.config
        assert cfg.command is not None
        from services.grants.store import TOOL_CALL_MARKER

        env = {**cfg.env(), TOOL_CALL_MARKER: "1"}  # an MCP server is a tool: it cannot grant itself anything
        params = StdioServerParameters(command=resolve_command(cfg.command), args=list(cfg.args), env=env, cwd=cfg.cwd)
        before = {p.pid for p in psutil.Process().children()}
        server.stderr = tempfile.TemporaryFile("w+b")  # the server's stderr; its tail explains failures
        async with stdio_client(params, errlog=server.stderr) as streams:
            server.pid = server.group = new_group_leader(before)
            yield streams

    async def _call(self, server: ServerState, tool: str, arguments: dict[str, Any], timeout: float) -> dict[str, Any]:
        name = server.config.name
        session = await self._ensure_started(server)
        task = server.task
        assert task is not None
        call = asyncio.ensure_future(session.call_tool(tool, arguments))
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            while not call.done():  # watch the answer, the connection's task and the process
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                await asyncio.wait({call, task}, timeout=min(0.25, remaining), return_when=asyncio.FIRST_COMPLETED)
                if not call.done() and (task.done() or not _alive(server)):
                    break
        except asyncio.CancelledError:
            call.cancel()
            raise
        if not call.done():
            call.cancel()
            if task.done() or not _alive(server):
                server.state = "failed"
                server.error = self._with_stderr(server, server.error or "the server process exited")
                self._later(self._stop_locked(server, task))  # the next call restarts it
                raise McpServerError(f"MCP server {name!r} exited during the call: {server.error}", retryable=True)
            server.state, server.error = "failed", f"{tool} did not answer within {timeout:g} s"
            self._later(self._stop_locked(server, task))  # the next call restarts it
            raise ToolTimeout(f"MCP server {name!r}: {tool} did not answer within {timeout:g} s", server=name)
        try:
            result = call.result()
        except Exception as exc:
            if _closed(exc):
                await _settle(server, task)  # a closed connection is often a process still on its way out
            if task.done() or server.state != "running" or not _alive(server):
                server.state, server.error = "failed", self._with_stderr(server, _describe_exception(exc))
                self._later(self._stop_locked(server, task))  # the next call restarts it
                raise McpServerError(
                    f"MCP server {name!r} exited during the call: {_describe_exception(exc)}", retryable=True
                ) from None
            raise McpServerError(f"MCP server {name!r}: {_describe_exception(exc)}", retryable=False) from None
        try:
            data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        except Exception as exc:
            raise McpServerError(f"MCP server {name!r} sent a malformed result: {_describe_exception(exc)}") from None
        if not isinstance(data, dict) or not isinstance(data.get("content", []), list):
            raise McpServerError(f"MCP server {name!r} sent a malformed result (no content list)")
        return data

    async def _stop_locked(self, server: ServerState, task: asyncio.Task[None] | None) -> None:
        """Stop the connection ``task`` (unless a later call already replaced it)."""
        async with server.lock:
            if server.task is task:
                await self._stop(server)

    async def _stop(self, server: ServerState) -> None:
        task = server.task
        if task is None:
            return
        if server.stop is not None:
            server.stop.set()
        if server.state == "starting":  # stuck in the handshake: it never waits for the stop event
            task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), _STOP_WAIT_S)
        except BaseException:  # stuck or failed: cancel it; the group is killed below
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 2.0)
        server.task = None
        self._kill_group(server)
        if server.stderr is not None:
            with contextlib.suppress(OSError):
                server.stderr.close()
            server.stderr = None

    def _kill_group(self, server: ServerState) -> None:
        """SIGKILL the server's process group (the SDK started it as a group leader): no orphans.

        Done once per started server (``group`` is then forgotten), so a group id the system later
        hands to another process is never signalled.
        """
        group, server.group = server.group, None
        if group is None or os.name != "posix":
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)

    @staticmethod
    def _with_stderr(server: ServerState, message: str) -> str:
        """``message``, plus the last line the server wrote to stderr (it often says why)."""
        handle = server.stderr
        if handle is None:
            return message
        try:  # only the file's tail: a server may write a lot to stderr
            fd = handle.fileno()
            size = os.fstat(fd).st_size
            tail = os.pread(fd, 4000, max(0, size - 4000)).decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return message
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        return f"{message} (stderr: {_one_line(lines[-1], 200)})" if lines else message

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every server and the loop. Safe to call twice, from any thread but the hub's."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def stop_all() -> None:
            await asyncio.gather(*(self._stop(s) for s in self._servers.values()), return_exceptions=True)
            for server in self._servers.values():
                server.state = "closed"

        try:
            asyncio.run_coroutine_threadsafe(stop_all(), loop).result(_STOP_WAIT_S + 5)
        except Exception:  # a stuck stop: the groups are killed below all the same
            pass
        for server in self._servers.values():
            self._kill_group(server)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


async def _list_all(session: Any) -> list[dict[str, Any]]:
    """Every page of ``tools/list`` as wire JSON (a bounded number of pages)."""
    result = await session.list_tools()
    page = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    tools: list[dict[str, Any]] = list(page.get("tools") or [])
    cursor = page.get("nextCursor")
    for _ in range(50):
        if not cursor:
            break
        from mcp import types

        result = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        page = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        tools.extend(page.get("tools") or [])
        cursor = page.get("nextCursor")
    return tools


def _import_sdk(transport: str) -> None:
    import importlib

    importlib.import_module("mcp.client.session")
    importlib.import_module("mcp.client.streamable_http" if transport == "http" else "mcp.client.stdio")


def _closed(error: BaseException) -> bool:
    """Whether ``error`` says the connection to the server went away (not an error it answered)."""
    if isinstance(error, ConnectionError | EOFError):
        return True
    name = type(error).__name__
    return (
        name in ("ClosedResourceError", "BrokenResourceError", "EndOfStream")
        or "connection closed" in str(error).lower()
    )


async def _settle(server: ServerState, task: asyncio.Future[Any], seconds: float = 1.0) -> None:
    """Give a stdio server whose call just failed up to ``seconds`` to finish exiting, so that a crash
    is told apart from an error it reported while alive (its pipe closes before it is reaped)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while server.config.url is None and not task.done() and _alive(server) and loop.time() < deadline:
        await asyncio.sleep(0.05)


def _alive(server: ServerState) -> bool:
    """False once a stdio server's process has exited (a streamable-HTTP server is not watched)."""
    return server.config.url is not None or process_alive(server.pid)


__all__ = ["McpHub", "McpServerError", "ServerState"]
