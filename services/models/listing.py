"""What each known provider serves: for ``aries model list`` and the TUI's ``/model``.

Known providers: ``offline`` always, Ollama at ``OLLAMA_HOST`` (default localhost), and an
OpenAI-compatible server at ``OPENAI_BASE_URL`` when that is set.  They are asked concurrently;
one that does not answer gets one line saying why instead of a list.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from services.errors import AriesError
from services.models.base import ModelProvider, ProviderError
from services.models.config import ENV_OLLAMA_HOST, ENV_OPENAI_API_KEY, ENV_OPENAI_BASE_URL, openai_base_url
from services.models.http import Timeouts
from services.text.textsafe import neutralize

LIST_TIMEOUTS = Timeouts(connect=2.0, first_byte=5.0, idle=5.0, listing=5.0)


@dataclass(frozen=True)
class ProviderListing:
    """One provider's models (``provider:model`` specs via :meth:`specs`), or why it has none."""

    provider: str
    url: str | None
    models: list[str] = field(default_factory=list)
    error: str | None = None

    def specs(self) -> list[str]:
        """The ``ARIES_MODEL`` values that select each model."""
        if self.provider == "offline":
            return ["offline"]
        return [f"{self.provider}:{model}" for model in self.models]

    def line(self) -> str:
        """One line: where the provider is and what it serves or why not."""
        where = self.provider if self.url is None else f"{self.provider} at {self.url}"
        if self.error is not None:
            return f"{where}: {self.error}"
        return f"{where}: {', '.join(self.models) if self.models else 'no models'}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clean(text: str) -> str:
    return neutralize(text, single_line=True)


async def _listing(provider: ModelProvider) -> ProviderListing:
    url = getattr(provider, "base_url", None)
    try:
        models = await provider.list_models()
    except ProviderError as exc:
        return ProviderListing(provider.name, url, error=_clean(exc.cause))
    finally:
        await provider.aclose()
    return ProviderListing(provider.name, url, [_clean(model) for model in models])


async def list_providers(env: Mapping[str, str], timeouts: Timeouts = LIST_TIMEOUTS) -> list[ProviderListing]:
    """Every known provider with the models it serves (or the reason it serves none), in a fixed order."""
    from services.models.offline import OfflineProvider
    from services.models.ollama import OllamaProvider
    from services.models.openai_compat import OpenAICompatProvider

    providers: list[ModelProvider] = [OfflineProvider()]
    failed: list[ProviderListing] = []
    try:
        providers.append(OllamaProvider("", env.get(ENV_OLLAMA_HOST), timeouts=timeouts))
    except AriesError as exc:
        failed.append(ProviderListing("ollama", _clean(env.get(ENV_OLLAMA_HOST) or ""), error=_clean(exc.message)))
    base = (env.get(ENV_OPENAI_BASE_URL) or "").strip()
    if base:
        try:
            key = env.get(ENV_OPENAI_API_KEY) or None
            providers.append(OpenAICompatProvider("", openai_base_url(base), api_key=key, timeouts=timeouts))
        except AriesError as exc:
            failed.append(ProviderListing("openai", _clean(base), error=_clean(exc.message)))
    listings = list(await asyncio.gather(*(_listing(provider) for provider in providers)))
    order = {"offline": 0, "ollama": 1, "openai": 2}
    return sorted(listings + failed, key=lambda listing: order.get(listing.provider, 9))


__all__ = ["LIST_TIMEOUTS", "ProviderListing", "list_providers"]
