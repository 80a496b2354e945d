"""Context-service settings, read from the environment and validated (style of the retrieval settings).

============================  ==============================================================
``AXIOMME_TIER_SYNTHESIS``    ``deterministic`` (default: first headings and sentences, sorted
                              entries) or ``semantic-lite`` (representative sentences picked by
                              embedding similarity to the directory centroid; deterministic for
                              one embedder).
============================  ==============================================================

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

ENV_VARS: dict[str, tuple[str, str]] = {
    "tier_synthesis": ("AXIOMME_TIER_SYNTHESIS", f"one of: {', '.join(TIER_SYNTHESIS_MODES)}"),
}
"""Setting field → (environment variable, what it accepts)."""

_CONFIG = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)


@dataclass(frozen=True, config=_CONFIG)
class ContextSettings:
    """How the context service behaves; ``from_env`` reads the ``AXIOMME_*`` variables."""

    tier_synthesis: TierSynthesis = "deterministic"
    """``AXIOMME_TIER_SYNTHESIS``: how L0/L1 tier files are written."""

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
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name, (variable, _accepted) in ENV_VARS.items():
            raw = env.get(variable, "").strip()
            if raw:
                values[name] = raw.lower()
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)  # type: ignore[arg-type]
