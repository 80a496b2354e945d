"""HTTP plumbing shared by the Ollama and OpenAI-compatible providers (aiohttp, imported lazily).

One ``ClientSession`` per provider, created on first use inside the running event loop and closed
by ``aclose``.  Streams are read chunk by chunk and split into lines here (no line-length limit of
aiohttp's ``readline``; a line above :data:`MAX_LINE` bytes is a malformed stream), with three
timeouts: connect, first byte (headers and the first body chunk) and idle (between chunks).  Every
aiohttp failure becomes one of the typed :class:`~services.models.base.ProviderError` subclasses.
A stream that is not read to its end — the consumer was cancelled or stopped early — closes its
connection at once instead of returning it to the pool.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.models.base import (
    ContextOverflow,
    MalformedStream,
    ModelNotFound,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
    ProviderUnavailable,
)
from services.text.textsafe import neutralize

if TYPE_CHECKING:
    import aiohttp

MAX_LINE = 8 * 1024 * 1024
BODY_CHARS = 200


@dataclass(frozen=True)
class Timeouts:
    """Seconds to wait: for a connection, for the first byte of an answer, between two chunks of a
    stream, and for a whole model listing."""

    connect: float = 5.0
    first_byte: float = 120.0
    idle: float = 60.0
    listing: float = 10.0


def _reason(exc: BaseException) -> str:
    os_error = getattr(exc, "os_error", None)
    if isinstance(os_error, ConnectionRefusedError):
        return "connection refused"
    text = getattr(os_error, "strerror", None) or str(os_error or exc) or type(exc).__name__
    return text[:1].lower() + text[1:]


def error_text(body: str) -> str:
    """The error message inside a JSON error body (Ollama and OpenAI shapes), else the body."""
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if isinstance(data, dict):
        error = data.get("error", data.get("message"))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return str(error)
    return body


def short(text: str, limit: int = BODY_CHARS) -> str:
    """One neutralised line of at most ``limit`` characters."""
    text = neutralize(" ".join(text.split()), single_line=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_object(body: str) -> dict[str, Any]:
    """The ``error`` object of a JSON error body (``{}`` when there is none)."""
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, dict) else {}


def overflow_error(
    provider: str, url: str, status: int | None, message: str, error: dict[str, Any]
) -> ContextOverflow | None:
    """A :class:`ContextOverflow` when ``message`` (or the error object) says the request is larger
    than the model's context window; else None."""
    from services.models.window import overflow_numbers

    overflow, window, prompt_tokens = overflow_numbers(message, error)
    if not overflow:
        return None
    return ContextOverflow(provider, url, short(message), status=status, window=window, prompt_tokens=prompt_tokens)


def looks_like_missing_model(message: str) -> bool:
    lowered = message.lower()
    return "model" in lowered and any(
        word in lowered for word in ("not found", "does not exist", "unknown", "no such", "not available")
    )


class HttpProvider:
    """The aiohttp session and request helpers behind one provider."""

    name: str = "http"
    not_found_hint: str = ""  # added to a plain 404 (e.g. a base URL missing its /v1)

    def __init__(self, base_url: str, *, timeouts: Timeouts | None = None, headers: Mapping[str, str] | None = None):
        self.base_url = base_url.rstrip("/")
        self.timeouts = timeouts or Timeouts()
        self._headers = dict(headers or {})
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # never shows headers (they may hold an API key)
        return f"{type(self).__name__}({self.base_url!r})"

    def _session_now(self) -> aiohttp.ClientSession:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            # A session belongs to one event loop; a provider reused under a new loop (one
            # ``asyncio.run`` per CLI call) gets a new one.
            self._loop = loop
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=self.timeouts.connect),
                headers=self._headers,
                trust_env=False,
            )
        return self._session

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed and self._loop is asyncio.get_running_loop():
            await session.close()

    # -- errors ---------------------------------------------------------------------------------
    def _map(self, exc: BaseException, url: str, *, phase: str) -> ProviderError:
        import aiohttp

        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return ProviderTimeout(self.name, url, f"no connection within {self.timeouts.connect:g}s")
        if isinstance(exc, TimeoutError):
            return ProviderTimeout(self.name, url, phase)
        if isinstance(exc, aiohttp.ClientConnectorDNSError):
            return ProviderUnavailable(self.name, url, f"not reachable (unknown host: {_reason(exc)})")
        if isinstance(exc, aiohttp.ClientConnectorError):
            return ProviderUnavailable(self.name, url, f"not reachable ({_reason(exc)})")
        if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | aiohttp.ClientOSError):
            return ProviderUnavailable(self.name, url, f"connection lost ({_reason(exc)})")
        return ProviderUnavailable(self.name, url, f"request failed ({type(exc).__name__}: {_reason(exc)})")

    async def _raise_for_status(self, response: aiohttp.ClientResponse, url: str) -> None:
        if response.status < 300:
            return
        try:
            async with asyncio.timeout(self.timeouts.idle):
                raw = await response.content.read(4096)
        except Exception:  # the status alone is enough to report
            raw = b""
        finally:
            response.close()
        body = raw.decode("utf-8", "replace")
        message = error_text(body)
        if response.status in (400, 413, 422, 500):
            overflow = overflow_error(self.name, url, response.status, message, error_object(body))
            if overflow is not None:
                raise overflow
        if response.status == 404 and looks_like_missing_model(message):
            raise ModelNotFound(self.name, url, short(message), status=404)
        if response.status == 404 and self.not_found_hint:
            message = f"{message} ({self.not_found_hint})"
        if 300 <= response.status < 400:
            location = response.headers.get("Location", "")
            message = f"redirect to {location} refused" if location else "redirect refused"
        raise ProviderHTTPError(self.name, url, response.status, short(message))

    # -- requests -------------------------------------------------------------------------------
    async def get_json(self, path: str) -> Any:
        return await self._json("GET", path, None, self.timeouts.listing)

    async def post_json(self, path: str, payload: dict[str, Any], *, timeout: float | None = None) -> Any:
        """POST ``payload`` and return the JSON answer (error statuses raise as in a stream)."""
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        return await self._json("POST", path, data, self.timeouts.first_byte if timeout is None else timeout)

    async def _json(self, method: str, path: str, data: bytes | None, limit: float) -> Any:
        """One request whose whole answer is JSON, within ``limit`` seconds."""
        url = self.base_url + path
        session = self._session_now()
        headers = {"Content-Type": "application/json"} if data is not None else None
        try:
            async with asyncio.timeout(limit):
                async with session.request(method, url, data=data, headers=headers, allow_redirects=False) as response:
                    await self._raise_for_status(response, url)
                    body = await response.read()
        except ProviderError:
            raise
        except Exception as exc:
            raise self._map(exc, url, phase=f"no answer within {limit:g}s") from None
        try:
            return json.loads(body)
        except ValueError:
            text = short(body.decode("utf-8", "replace"))
            raise ProviderHTTPError(self.name, url, response.status, f"not JSON: {text}") from None

    async def stream_lines(self, path: str, payload: dict[str, Any]) -> AsyncGenerator[tuple[int, str], None]:
        """POST ``payload`` as JSON and yield ``(line_number, line)`` of the streamed answer."""
        url = self.base_url + path
        session = self._session_now()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeouts.first_byte
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/x-ndjson, text/event-stream"}
        try:
            async with asyncio.timeout_at(deadline):
                response = await session.post(url, data=data, headers=headers, allow_redirects=False)
        except Exception as exc:
            raise self._map(exc, url, phase=f"no answer within {self.timeouts.first_byte:g}s") from None
        finished = False
        try:
            await self._raise_for_status(response, url)
            async for item in self._split(response, url, deadline):
                yield item
            finished = True
        finally:
            if finished:
                response.release()
            else:  # cancelled, failed or abandoned: drop the connection now
                response.close()

    async def _split(
        self, response: aiohttp.ClientResponse, url: str, deadline: float
    ) -> AsyncGenerator[tuple[int, str], None]:
        buffer = bytearray()
        line_no = 0
        first = True
        while True:
            try:
                if first:
                    async with asyncio.timeout_at(deadline):
                        chunk = await response.content.readany()
                else:
                    async with asyncio.timeout(self.timeouts.idle):
                        chunk = await response.content.readany()
            except Exception as exc:
                phase = (
                    f"no answer within {self.timeouts.first_byte:g}s"
                    if first
                    else f"stream stalled: no data for {self.timeouts.idle:g}s after line {line_no}"
                )
                raise self._map(exc, url, phase=phase) from None
            first = False
            if not chunk:
                break
            buffer += chunk
            while (cut := buffer.find(b"\n")) >= 0:
                raw = bytes(buffer[:cut])
                del buffer[: cut + 1]
                line_no += 1
                yield line_no, self._decode(raw, url, line_no)
            if len(buffer) > MAX_LINE:
                raise MalformedStream(self.name, url, f"line longer than {MAX_LINE} bytes", line_no + 1)
        if buffer.strip():
            line_no += 1
            yield line_no, self._decode(bytes(buffer), url, line_no)

    def _decode(self, raw: bytes, url: str, line_no: int) -> str:
        try:
            return raw.rstrip(b"\r").decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedStream(self.name, url, "not UTF-8", line_no) from None


def parse_json_line(provider: str, url: str, text: str, line_no: int) -> Any:
    """``json.loads(text)`` or :class:`MalformedStream` naming the line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedStream(provider, url, f"{exc.msg}: {short(text, 80)!r}", line_no) from None
