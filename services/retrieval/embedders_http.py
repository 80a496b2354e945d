"""The ``semantic-model-http`` embedder: an Ollama-protocol server on a loopback host, over aiohttp.

The spec's protocol is Ollama's ``/api/embeddings`` (the default endpoint,
``http://127.0.0.1:11434/api/embeddings``): one text per request, ``{"model", "prompt"}`` →
``{"embedding": [...]}``, at most :data:`CONCURRENCY` requests in flight.  An endpoint whose path
ends in ``/api/embed`` uses Ollama's batch API instead (``{"model", "input": [...]}`` →
``{"embeddings": [[...], ...]}``, 32 texts a request).  Only the hosts ``127.0.0.1``, ``localhost``
and ``::1`` are accepted; anything else is a ConfigError when the embedder is created.

aiohttp is imported when a request is made; ``embed`` stays synchronous (``run_sync``: its own
event loop, or a helper thread when the calling thread already runs one).  One deadline per request
(``AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS``) covers connect, headers and body; no proxies from the
environment; redirects are not followed.  Failures are typed subclasses of ``EmbedderError``:
``EmbedderUnreachable``, ``EmbedderTimeout``, ``EmbedderHTTPError``, ``EmbedderBadResponse``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import os
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from services.errors import ConfigError
from services.retrieval.errors import EmbedderError


def _normalise(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else vector


_MAX_REPLY_BYTES = 64 * 1024 * 1024
CONCURRENCY = 4
"""Most ``/api/embeddings`` requests in flight at once (a local server embeds one text at a time)."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
T = TypeVar("T")


class EmbedderUnreachable(EmbedderError):
    """Connection refused or reset, DNS or TLS failure: the embedding server could not be reached."""

    code = "embedder_unreachable"


class EmbedderTimeout(EmbedderError):
    """The server did not answer (headers and body) within AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS."""

    code = "embedder_timeout"


class EmbedderHTTPError(EmbedderError):
    """The server answered with an HTTP status other than 200 (a redirect included: not followed)."""

    code = "embedder_http_status"


class EmbedderBadResponse(EmbedderError):
    """The answer was not JSON, too large, or not the embeddings the protocol promises."""

    code = "embedder_bad_response"


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code.

    In a thread without an event loop (the engine's worker threads, the CLI) it gets its own loop;
    called from a thread whose loop is running (an async caller that did not use a worker thread),
    it runs on a short-lived helper thread instead, so it never nests loops.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coro)
        except BaseException as exc:
            outcome["error"] = exc

    helper = threading.Thread(target=target, name="embedder-http", daemon=True)
    helper.start()
    helper.join()
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value


def _network_reason(exc: BaseException) -> str:
    os_error = getattr(exc, "os_error", None)
    code = getattr(os_error, "errno", None) or getattr(exc, "errno", None)
    if isinstance(code, int) and code > 0:
        return os.strerror(code)
    return f"{type(exc).__name__}: {exc}"[:300]


def _is_loopback_host(host: str) -> bool:
    """``localhost``, or an address equal to 127.0.0.1 or ::1 (other 127/8 addresses are refused)."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address in (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))


def check_loopback_endpoint(endpoint: str) -> str:
    """Return ``endpoint`` if it is http(s) on a loopback host, else raise ConfigError."""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        raise ConfigError(
            f"AXIOMME_EMBEDDER_MODEL_ENDPOINT={endpoint!r} is not an http URL",
            setting="AXIOMME_EMBEDDER_MODEL_ENDPOINT",
        )
    if parts.username or parts.password:
        raise ConfigError("AXIOMME_EMBEDDER_MODEL_ENDPOINT must not contain credentials")
    if not _is_loopback_host(host):
        raise ConfigError(
            f"AXIOMME_EMBEDDER_MODEL_ENDPOINT host {host!r} is not a loopback address; "
            "semantic-model-http only talks to 127.0.0.1, ::1 or localhost",
            setting="AXIOMME_EMBEDDER_MODEL_ENDPOINT",
        )
    return endpoint


class HttpEmbedder:
    """Embeddings from an Ollama-protocol server on this machine.

    ``strict`` (``AXIOMME_EMBEDDER_STRICT``) changes nothing on the wire: a failure is the same typed
    error either way; it is recorded with the run environment of evaluations and benchmarks
    (:mod:`services.retrieval.run_env`), where it fails a release-profile gate.
    """

    batch_size = 32
    backend = "http"
    quantization = "none"

    def __init__(
        self, endpoint: str, model: str, timeout_ms: int = 3000, *, strict: bool = False, concurrency: int = CONCURRENCY
    ) -> None:
        self.endpoint = check_loopback_endpoint(endpoint)
        self.model = model
        self.timeout_s = timeout_ms / 1000.0
        self.strict = strict
        self.concurrency = max(1, concurrency)
        self.batch = urlsplit(endpoint).path.rstrip("/").endswith("/api/embed")
        """True: Ollama's batch ``/api/embed``; False: ``/api/embeddings``, one text per request."""
        self.model_id = f"semantic-model-http:{model}"
        self._dim: int | None = None

    @property
    def legacy(self) -> bool:
        """The one-text-per-request protocol (``/api/embeddings``; the spec's default)."""
        return not self.batch

    async def _post_async(self, session: Any, payload: dict[str, Any]) -> Any:
        """POST ``payload`` as JSON on ``session`` and return the decoded answer; typed errors."""
        import aiohttp

        try:
            # No redirects (the endpoint is loopback by rule, and a redirect could leave it).
            async with session.post(self.endpoint, json=payload, allow_redirects=False) as response:
                if response.status != 200:
                    detail = (await response.content.read(500)).decode("utf-8", "replace")
                    raise EmbedderHTTPError(
                        f"embedding server {self.endpoint} answered HTTP {response.status}: {detail}".strip()[:800],
                        status=response.status,
                    )
                body = bytearray()
                async for chunk in response.content.iter_chunked(1 << 16):
                    body += chunk
                    if len(body) > _MAX_REPLY_BYTES:
                        raise EmbedderBadResponse(
                            f"embedding server {self.endpoint} sent more than {_MAX_REPLY_BYTES} bytes"
                        )
        except TimeoutError:
            raise EmbedderTimeout(
                f"embedding server {self.endpoint} did not answer within "
                f"AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS = {round(self.timeout_s * 1000)} ms"
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise EmbedderUnreachable(
                f"embedding server {self.endpoint} is not reachable: {_network_reason(exc)}"
            ) from None
        try:
            return json.loads(bytes(body))
        except ValueError:
            raise EmbedderBadResponse(f"embedding server {self.endpoint} sent a response that is not JSON") from None

    def _check(self, vectors: Any, expected: int) -> list[list[float]]:
        if not isinstance(vectors, list) or len(vectors) != expected:
            raise EmbedderBadResponse(f"embedding server {self.endpoint} returned a malformed embeddings list")
        out: list[list[float]] = []
        for vector in vectors:
            if (
                not isinstance(vector, list)
                or not vector
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in vector)
            ):
                raise EmbedderBadResponse(f"embedding server {self.endpoint} returned a malformed vector")
            if self._dim is None:
                self._dim = len(vector)
            elif len(vector) != self._dim:
                raise EmbedderBadResponse(
                    f"embedding server {self.endpoint} changed dimension ({len(vector)} after {self._dim})"
                )
            out.append(_normalise([float(x) for x in vector]))
        return out

    async def _embed_async(self, texts: list[str]) -> list[list[float]]:
        import aiohttp

        # One deadline per request (connect, headers and body); no proxies from the environment.
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
            if self.batch:
                vectors: list[list[float]] = []
                for start in range(0, len(texts), self.batch_size):
                    chunk = texts[start : start + self.batch_size]
                    reply = await self._post_async(session, {"model": self.model, "input": chunk, "truncate": True})
                    vectors += self._check(reply.get("embeddings") if isinstance(reply, dict) else None, len(chunk))
                return vectors
            gate = asyncio.Semaphore(self.concurrency)

            async def one(text: str) -> Any:
                async with gate:
                    reply = await self._post_async(session, {"model": self.model, "prompt": text})
                return reply.get("embedding") if isinstance(reply, dict) else None

            tasks = [asyncio.create_task(one(text)) for text in texts]
            try:
                replies = await asyncio.gather(*tasks)
            except BaseException:
                for task in tasks:  # the first failure is the answer: stop the rest, collect them quietly
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
            return self._check(list(replies), len(texts))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return run_sync(self._embed_async(list(texts)))

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


__all__ = [
    "CONCURRENCY",
    "LOOPBACK_HOSTS",
    "EmbedderBadResponse",
    "EmbedderHTTPError",
    "EmbedderTimeout",
    "EmbedderUnreachable",
    "HttpEmbedder",
    "check_loopback_endpoint",
    "run_sync",
]
