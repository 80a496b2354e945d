"""Context-service settings, read from the environment and validated (style of the retrieval settings).

============================  ==============================================================
``AXIOMME_TIER_SYNTHESIS``    ``deterministic`` (default: first headings and sentences, sorted
                              entries) or ``semantic-lite`` (representative sentences picked by
                              embedding similarity to the directory centroid; deterministic for
                              one embedder).
``AXIOMME_QUERY_NORMALIZER``  ``on`` (default) or ``off`` (also ``1|true|yes`` / ``0|false|no``):
                              case and diacritics folding of query terms, and alias expansion
                              (see :mod:`services.context.normalize`).
``AXIOMME_QUERY_ALIASES``     the YAML alias table (default: ``context_aliases.yaml`` in the
                              workspace folder; a mapping ``term: [expansion, ...]``).
``AXIOMME_RERANKER``          ``doc-aware-v1`` (default; the formula is in
                              :mod:`services.context.rerank`) or ``off``.
============================  ==============================================================

``AXIOMME_RETRIEVAL_BACKEND`` belongs to :mod:`services.retrieval.settings`; :meth:`ContextSettings.from_env`
validates it too, so every ``aries context`` command that reads its settings fails fast on a bad value.

Values are trimmed and case-insensitive; an empty variable counts as unset.  A bad value is one
:class:`~services.errors.ConfigError` naming the variable and what it accepts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import ConfigDict, ValidationError, ValidatorFunctionWrapHandler, model_validator
from pydantic.dataclasses import dataclass

from services.errors import ConfigError

TierSynthesis = Literal["deterministic", "semantic-lite"]
TIER_SYNTHESIS_MODES: tuple[str, ...] = get_args(TierSynthesis)
Reranker = Literal["doc-aware-v1", "off"]
RERANKERS: tuple[str, ...] = get_args(Reranker)
_ON = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False, "no": False}

ENV_VARS: dict[str, tuple[str, str]] = {
    "tier_synthesis": ("AXIOMME_TIER_SYNTHESIS", f"one of: {', '.join(TIER_SYNTHESIS_MODES)}"),
    "query_normalizer": ("AXIOMME_QUERY_NORMALIZER", "on or off"),
    "reranker": ("AXIOMME_RERANKER", f"one of: {', '.join(RERANKERS)}"),
    "aliases_file": ("AXIOMME_QUERY_ALIASES", "the path of a YAML alias table"),
}
"""Setting field → (environment variable, what it accepts)."""

_CONFIG = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)


@dataclass(frozen=True, config=_CONFIG)
class ContextSettings:
    """How the context service behaves; ``from_env`` reads the ``AXIOMME_*`` variables."""

    tier_synthesis: TierSynthesis = "deterministic"
    """``AXIOMME_TIER_SYNTHESIS``: how L0/L1 tier files are written."""

    query_normalizer: bool = True
    """``AXIOMME_QUERY_NORMALIZER``: fold case and diacritics of query terms and expand aliases."""

    reranker: Reranker = "doc-aware-v1"
    """``AXIOMME_RERANKER``: the post-retrieval rerank profile of find/search."""

    aliases_file: str | None = None
    """``AXIOMME_QUERY_ALIASES``: the alias table (None: ``context_aliases.yaml`` in the workspace)."""

    @model_validator(mode="wrap")
    @classmethod
    def _typed_errors(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            path = ".".join(str(part) for part in error["loc"])
            if path in ENV_VARS:
                name, accepted = ENV_VARS[path]
                raise ConfigError(f"{name}={error['input']!r} is not supported; use {accepted}", setting=name) from None
            raise ConfigError(f"context setting {path}: {error['msg']}"[:300], setting=path) from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> ContextSettings:
        """Settings from ``environ`` (default: ``os.environ``); ``overrides`` that are not None win."""
        from services.retrieval.settings import RetrievalSettings

        env = os.environ if environ is None else environ
        RetrievalSettings.from_env(env)  # AXIOMME_RETRIEVAL_BACKEND and friends: fail fast here too
        values: dict[str, object] = {}
        for name, (variable, _accepted) in ENV_VARS.items():
            raw = env.get(variable, "").strip()
            if not raw:
                continue
            if name == "aliases_file":
                values[name] = raw
            elif name == "query_normalizer":
                values[name] = _ON.get(raw.lower(), raw)
            else:
                values[name] = raw.lower()
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)  # type: ignore[arg-type]
