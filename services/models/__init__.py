"""Model providers: Ollama, OpenAI-compatible servers and the offline extractive answer.

``import services.models`` loads no HTTP library: aiohttp is imported when a provider first talks
to its server.  See :mod:`services.models.base` for the event stream every provider produces.
"""

from services.models.base import (
    ChatMessage,
    Done,
    MalformedStream,
    ModelEvent,
    ModelNotFound,
    ModelOptions,
    ModelProvider,
    ModelRequest,
    ProviderError,
    ProviderHTTPError,
    ProviderStreamError,
    ProviderTimeout,
    ProviderUnavailable,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    ToolSchema,
    Usage,
)
from services.models.config import (
    ModelConfig,
    ModelMissing,
    UnknownProvider,
    make_provider,
    probe_ollama,
    resolve_model,
)
from services.models.http import Timeouts
from services.models.toolnames import ToolNameMap

__all__ = [
    "ChatMessage",
    "Done",
    "MalformedStream",
    "ModelConfig",
    "ModelEvent",
    "ModelMissing",
    "ModelNotFound",
    "ModelOptions",
    "ModelProvider",
    "ModelRequest",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderStreamError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "TextDelta",
    "Timeouts",
    "ToolCall",
    "ToolCallEvent",
    "ToolNameMap",
    "ToolSchema",
    "UnknownProvider",
    "Usage",
    "make_provider",
    "probe_ollama",
    "resolve_model",
]
