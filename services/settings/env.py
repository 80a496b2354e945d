"""The environment, typed: :class:`EnvSettings` and :func:`env_settings` (see :mod:`services.settings.config`).

A module of its own so that finding the data root (``services.settings.config``) never imports pydantic:
start-up needs the one and not the other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.errors import ConfigError

_FLAG_WORDS = frozenset({"1", "true", "yes", "on", "0", "false", "no", "off"})


class EnvSettings(BaseModel):
    """The environment, typed.  Field aliases are the variable names; unset means the default."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True, use_attribute_docstrings=True)

    home: Path | None = Field(None, alias="ARIES_HOME")
    """Data root (workspaces, caches).  Unset: the platform's user data directory."""
    model: str | None = Field(None, alias="ARIES_MODEL")
    """``provider:model`` (``ollama:llama3.2``, ``openai:…``, ``offline``).  Unset: the workspace setting."""
    ollama_host: str | None = Field(None, alias="OLLAMA_HOST")
    """Ollama endpoint; default ``localhost:11434``."""
    openai_base_url: str | None = Field(None, alias="OPENAI_BASE_URL")
    """Any OpenAI-compatible endpoint (llama.cpp server, vLLM, LM Studio)."""
    retrieval_backend: Literal["sqlite", "memory"] = Field("sqlite", alias="AXIOMME_RETRIEVAL_BACKEND")
    """``sqlite``: index state on disk under the workspace; ``memory``: nothing persists."""
    embedder: Literal["sentence-transformers", "semantic-lite", "hash", "semantic-model-http"] = Field(
        "sentence-transformers", alias="AXIOMME_EMBEDDER"
    )
    """Embedding model: all-MiniLM-L6-v2 (default), ``semantic-lite`` (local heuristic, no model), ``hash``
    (deterministic fallback) or ``semantic-model-http`` (a local model server)."""
    embedder_backend: Literal["torch", "onnx", "onnx-int8"] | None = Field(None, alias="AXIOMME_EMBEDDER_BACKEND")
    """How all-MiniLM-L6-v2 runs: torch (sentence-transformers), ``onnx`` (fp32) or ``onnx-int8``; unset:
    *auto* (new indexes ``onnx`` fp32, existing ones in their own vector space, no rebuild)."""
    embedder_cache: Path | None = Field(None, alias="AXIOMME_EMBEDDER_CACHE")
    """Where the exported ONNX models are kept; unset: ``<data dir>/cache/onnx``."""
    embedder_endpoint: str | None = Field(None, alias="AXIOMME_EMBEDDER_MODEL_ENDPOINT")
    """Embed API URL for ``semantic-model-http`` (loopback hosts only)."""
    embedder_model: str | None = Field(None, alias="AXIOMME_EMBEDDER_MODEL_NAME")
    """Model name for ``semantic-model-http``."""
    embedder_timeout_ms: int | None = Field(None, alias="AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS", gt=0)
    """Per-request timeout for ``semantic-model-http``, in milliseconds."""
    embedder_strict: str | None = Field(None, alias="AXIOMME_EMBEDDER_STRICT")
    """``1|true|yes|on``: model failures are recorded and fail release gates (``0|false|no|off``: off)."""
    embedder_threads: int | None = Field(None, alias="AXIOMME_EMBEDDER_THREADS", ge=1)
    """torch intra-op threads; unset: the number of CPUs."""
    chroma_url: str | None = Field(None, alias="AXIOMME_CHROMA_URL")
    """``http://host:port`` of a Chroma server; unset: the embedded client."""
    notify: Literal["on", "off"] | None = Field(None, alias="ARIES_NOTIFY")
    """``off``: no bell and no desktop notification, whatever ``settings.json`` says (the test suite sets it)."""
    min_score: float | None = Field(None, alias="AXIOMME_MIN_SCORE", ge=-1.0, le=1.0)
    """Relevance threshold of the offline answer (see :mod:`services.models.answers`); unset: its default."""
    recall: Literal["hybrid", "keyword"] = Field("hybrid", alias="ARIES_RECALL")
    """How left-out turns are found again (:mod:`services.assistant.recall`): ``hybrid`` (keywords and the
    workspace's embedder) or ``keyword`` (BM25 only)."""

    @field_validator("embedder_strict")
    @classmethod
    def _strict_flag(cls, value: str | None) -> str | None:
        if value is not None and value.strip().lower() not in _FLAG_WORDS:
            raise ValueError("must be one of 1, true, yes, on, 0, false, no, off")
        return value


def _describe(error: dict[str, Any], field: str, value: object) -> str:
    kind = str(error.get("type", ""))
    if kind == "literal_error":
        ctx = error.get("ctx") or {}
        expected = str(ctx.get("expected", "")).replace(" or ", ", ").replace("'", "")
        return f"{field}={value!r}: must be one of {expected}"
    if kind in ("float_parsing", "float_type"):
        return f"{field}={value!r}: must be a number"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{field}={value!r}: must be a whole number"
    if kind.startswith(("greater_than", "less_than")):
        return f"{field}={value!r}: {error.get('msg', 'out of range')}".replace("Input should be", "must be")
    return f"{field}={value!r}: {error.get('msg', 'invalid value')}"


def env_settings(environ: Mapping[str, str] | None = None) -> EnvSettings:
    """The environment as :class:`EnvSettings`; empty variables count as unset."""
    env = os.environ if environ is None else environ
    aliases = {info.alias for info in EnvSettings.model_fields.values() if info.alias}
    values: dict[str, str] = {}
    for name in aliases:
        raw = env.get(name)
        if raw is not None and raw.strip():
            stripped = raw.strip()
            if name in (
                "AXIOMME_RETRIEVAL_BACKEND",
                "AXIOMME_EMBEDDER",
                "AXIOMME_EMBEDDER_BACKEND",
                "ARIES_NOTIFY",
                "ARIES_RECALL",
            ):
                stripped = stripped.lower()
            values[name] = stripped
    try:
        return EnvSettings.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else "environment"
        raise ConfigError(_describe(dict(first), field, values.get(field)), setting=field) from None


__all__ = ["EnvSettings", "env_settings"]
