"""Which model answers: ``ARIES_MODEL=provider:model``, else the workspace setting, else ``offline``.

Providers and their settings (the ecosystem's own variables):

* ``offline`` — no model; answers with the retrieved passages.  The default.
* ``ollama:MODEL`` (``ollama:llama3.2``, ``ollama:llama3.2:3b``) — ``OLLAMA_HOST`` as Ollama reads it,
  default ``http://127.0.0.1:11434``.
* ``openai:MODEL`` — any OpenAI-compatible server at ``OPENAI_BASE_URL`` (required; e.g.
  ``http://127.0.0.1:8080/v1``), with ``OPENAI_API_KEY`` if it wants one.  There is no default base
  URL: nothing is sent to a cloud service unless the operator names it.

The model part may itself contain ``:``.  Errors are typed (:class:`UnknownProvider`,
:class:`ModelMissing`, both :class:`~services.errors.ConfigError`) and name where the value came from.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from services.errors import ConfigError
from services.models.base import ModelProvider, ProviderError
from services.models.http import Timeouts

PROVIDERS = ("offline", "ollama", "openai")
ENV_MODEL = "ARIES_MODEL"
ENV_OLLAMA_HOST = "OLLAMA_HOST"
ENV_OPENAI_BASE_URL = "OPENAI_BASE_URL"
ENV_OPENAI_API_KEY = "OPENAI_API_KEY"


class UnknownProvider(ConfigError):
    code = "unknown_provider"


class ModelMissing(ConfigError):
    code = "model_missing"


@dataclass(frozen=True)
class ModelConfig:
    """A resolved model choice.  ``api_key`` is never shown by ``repr``."""

    provider: str
    model: str
    source: str  # "ARIES_MODEL", "workspace" or "default"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeouts: Timeouts = field(default_factory=Timeouts)

    @property
    def label(self) -> str:
        """``provider:model`` (just ``offline`` for the offline provider), as the header shows it."""
        return self.provider if self.provider == "offline" else f"{self.provider}:{self.model}"


def parse_spec(spec: str, where: str) -> tuple[str, str]:
    """``(provider, model)`` from ``provider:model``; ``where`` names the source in errors."""
    provider, _, model = spec.strip().partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if provider not in PROVIDERS:
        known = ", ".join(PROVIDERS)
        raise UnknownProvider(f"{where}: unknown model provider {provider!r} in {spec!r} (known: {known})")
    if provider == "offline":
        from services.models.offline import OFFLINE_MODEL  # it brings services.models.answers: not at start-up

        return provider, model or OFFLINE_MODEL
    if not model:
        raise ModelMissing(f"{where}: {spec!r} names no model; write {provider}:MODEL, e.g. {provider}:llama3.2")
    return provider, model


def openai_base_url(value: str, where: str = ENV_OPENAI_BASE_URL) -> str:
    """A checked OpenAI-compatible base URL without its trailing slash."""
    value = value.strip().rstrip("/")
    try:
        split = urllib.parse.urlsplit(value)
        ok = split.scheme in ("http", "https") and bool(split.hostname)
        split.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"{where} {value!r} is not an http(s) URL such as http://127.0.0.1:8080/v1")
    return value


def resolve_model(setting: str | None, env: Mapping[str, str], *, timeouts: Timeouts | None = None) -> ModelConfig:
    """The model to use: ``env["ARIES_MODEL"]``, else the workspace ``setting``, else ``offline``."""
    from services.models.ollama import ollama_base_url

    spec = (env.get(ENV_MODEL) or "").strip()
    source = ENV_MODEL
    if not spec:
        if setting is not None and not isinstance(setting, str):
            raise ConfigError(f"workspace setting model: expected provider:model, got {setting!r}")
        spec, source = (setting or "").strip(), "workspace"
    if not spec:
        spec, source = "offline", "default"
    where = f"{ENV_MODEL}={spec}" if source == ENV_MODEL else "workspace setting model"
    provider, model = parse_spec(spec, where)
    timeouts = timeouts or Timeouts()
    if provider == "ollama":
        return ModelConfig(provider, model, source, ollama_base_url(env.get(ENV_OLLAMA_HOST)), timeouts=timeouts)
    if provider == "openai":
        base = (env.get(ENV_OPENAI_BASE_URL) or "").strip()
        if not base:
            raise ConfigError(
                f"{where}: {ENV_OPENAI_BASE_URL} is not set; point it at the server, e.g. http://127.0.0.1:8080/v1"
            )
        key = env.get(ENV_OPENAI_API_KEY) or None
        return ModelConfig(provider, model, source, openai_base_url(base), api_key=key, timeouts=timeouts)
    return ModelConfig(provider, model, source, timeouts=timeouts)


def make_provider(config: ModelConfig) -> ModelProvider:
    """The provider for ``config`` (no connection is made until it is used)."""
    if config.provider == "ollama":
        from services.models.ollama import OllamaProvider

        return OllamaProvider(config.model, config.base_url, timeouts=config.timeouts)
    if config.provider == "openai":
        from services.models.openai_compat import OpenAICompatProvider

        assert config.base_url is not None
        return OpenAICompatProvider(config.model, config.base_url, api_key=config.api_key, timeouts=config.timeouts)
    from services.models.offline import OfflineProvider

    return OfflineProvider(config.model)


async def probe_ollama(host: str | None, timeout: float = 0.5) -> list[str] | None:
    """The models an Ollama at ``host`` (an ``OLLAMA_HOST`` value) serves, or ``None`` if it does not
    answer within ``timeout`` seconds.  Never raises for an unreachable or misbehaving server."""
    from services.models.ollama import OllamaProvider

    try:
        provider = OllamaProvider("", host, timeouts=Timeouts(connect=timeout, listing=timeout))
    except ConfigError:
        return None
    try:
        return await provider.list_models()
    except ProviderError:
        return None
    finally:
        await provider.aclose()


__all__ = [
    "ENV_MODEL",
    "ENV_OLLAMA_HOST",
    "ENV_OPENAI_API_KEY",
    "ENV_OPENAI_BASE_URL",
    "PROVIDERS",
    "ModelConfig",
    "ModelMissing",
    "UnknownProvider",
    "make_provider",
    "openai_base_url",
    "parse_spec",
    "probe_ollama",
    "resolve_model",
]
