"""The cloud bridge's configuration: :class:`BridgeConfig`, the ``settings.cloud`` block of
``workspace.yaml`` (a profile can carry the same block later).

Off by default.  Nothing here holds a secret: the API key is read from the environment variable
named by ``api_key_env`` at the moment of a call, and never stored or shown.

    settings:
      cloud:
        mode: ask                 # off | ask | auto
        base_url: https://api.example.com/v1
        model: gpt-4o-mini
        api_key_env: ARIES_CLOUD_API_KEY
        threshold: 0.35           # auto: ask the cloud only below this local confidence
        hostnames: [build01, git.acme.internal]
        projects: [Bluebird, acme-billing]
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.errors import ConfigError

CloudMode = Literal["off", "ask", "auto"]
MODES: tuple[str, ...] = ("off", "ask", "auto")
DEFAULT_KEY_ENV = "ARIES_CLOUD_API_KEY"

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class BridgeConfig(BaseModel):
    """How (and whether) a question may go to a cloud model.  Immutable; ``BridgeConfig()`` is off."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    mode: CloudMode = "off"
    """``off``: never; ``ask``: only after the operator approves the exact text; ``auto``: when the
    local confidence is below ``threshold``."""
    base_url: str | None = None
    """OpenAI-compatible endpoint, the part before ``/chat/completions`` (``https://…/v1``)."""
    model: str | None = None
    """The cloud model's name as the endpoint knows it."""
    api_key_env: str = DEFAULT_KEY_ENV
    """Name of the environment variable that holds the API key (never the key itself)."""
    threshold: float = Field(default=0.35, ge=0.0, le=1.0)
    """``auto`` mode: ask the cloud only when the local confidence is strictly below this."""
    hostnames: tuple[str, ...] = ()
    """Host names to redact (a listed name also covers its sub-domains)."""
    projects: tuple[str, ...] = ()
    """Project, product or customer names to redact (whole words, case-insensitive)."""
    max_chars: int = Field(default=2000, ge=20, le=20000)
    """The longest question (after redaction) that may leave the machine."""
    timeout_s: float = Field(default=60.0, gt=0.0, le=600.0)
    """Seconds to wait for the cloud's first byte."""

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not _ENV_NAME.match(value):
            raise ValueError("must be the name of an environment variable (letters, digits, _), not a key")
        return value

    @field_validator("hostnames", "projects", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list | tuple):
            names = [str(item).strip() for item in value]
            return tuple(sorted({name for name in names if name}, key=lambda n: (-len(n), n.lower())))
        return value

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def describe(self) -> str:
        """One line for ``aries status`` and notices (never the key)."""
        if self.mode == "off":
            return "cloud: off"
        where = f"{self.model or '?'} at {self.base_url or '?'}"
        extra = f", below confidence {self.threshold:g}" if self.mode == "auto" else ""
        return f"cloud: {self.mode}{extra} ({where}, key from ${self.api_key_env})"


def bridge_config(data: Any, *, source: str = "cloud") -> BridgeConfig:
    """``data`` (a mapping, e.g. a profile's or the settings' ``cloud`` block) as a BridgeConfig;
    a bad value is one :class:`ConfigError` naming ``source`` and the field."""
    if data is None:
        return BridgeConfig()
    if isinstance(data, BridgeConfig):
        return data
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: must be a mapping of keys to values", field=source)
    try:
        return BridgeConfig.model_validate(dict(data))
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error.get("loc", ())) or source
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        if error.get("type") == "literal_error":
            message = "must be one of " + ", ".join(MODES)
        elif error.get("type") == "extra_forbidden":
            message = "unknown setting"
        raise ConfigError(f"{source}.{field}: {message}", field=f"{source}.{field}") from None


__all__ = ["DEFAULT_KEY_ENV", "MODES", "BridgeConfig", "CloudMode", "bridge_config"]
