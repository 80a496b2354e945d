"""The provider layer's vocabulary: messages, tool calls, stream events, requests and typed errors.

A provider turns a :class:`ModelRequest` into an async stream of :data:`ModelEvent`:

    TextDelta* → ToolCallEvent* → Usage → Done

``ToolCallEvent`` is emitted once a call is complete (for OpenAI-compatible servers, after its
deltas have been assembled), always before ``Usage`` and ``Done``.  A stream that fails raises one
of the :class:`ProviderError` subclasses instead of ending with ``Done``.  Cancelling the task that
consumes the stream (or ``aclose()`` on it) closes the HTTP response at once; a caller that stops
reading early should use ``contextlib.aclosing(provider.stream(...))`` so that this happens at once
rather than when the generator is collected.

Nothing here imports aiohttp: ``import services.models`` stays light.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from services.errors import AriesError

Role = Literal["system", "user", "assistant", "tool"]


@dataclass
class ToolCall:
    """One tool call asked for by the model.

    ``name`` is the provider-side name (map it back with :class:`ToolNameMap`).  ``raw_arguments``
    is the exact argument text received.  When that text is not a JSON object, the call is still
    delivered with ``arguments == {}`` and ``arguments_error`` saying why, so that the caller can send
    the model a structured schema error instead of dropping the call.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str
    arguments_error: str | None = None


@dataclass
class ChatMessage:
    """One message of the conversation sent to the model."""

    role: Role
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)  # assistant messages
    tool_call_id: str | None = None  # tool messages: the call this answers
    name: str | None = None  # tool messages: the provider-side tool name


@dataclass
class ToolSchema:
    """A tool offered to the model: provider-safe ``name``, ``description``, JSON Schema ``parameters``."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class ModelOptions:
    """Generation options; ``None`` means "the server's default" and is not sent."""

    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    top_p: float | None = None
    stop: list[str] | None = None
    context_window: int | None = None  # Ollama ``num_ctx``; not sent to OpenAI-compatible servers
    tool_choice: str | None = None
    """``auto``, ``none``, ``required`` or one offered tool's provider-side name (OpenAI-compatible
    servers only: Ollama has no such option); None: the server's default (``auto``)."""
    schema_format: str | None = None
    """How an OpenAI-compatible server is asked for output that satisfies a JSON Schema: ``json_schema``
    (OpenAI, llama.cpp's server, vLLM; the default) or ``json_object`` (``{"type": "json_object",
    "schema": …}``: llama-cpp-python's server, which refuses the other)."""


@dataclass
class ModelRequest:
    """What the turn loop asks a provider: the conversation, the tools offered, options.

    ``retrieved`` holds the hits the loop injected (dicts as returned by retrieval: ``rank``,
    ``handle``, ``text``, ``source_path``…); the offline provider answers from them, ``index`` names
    the index they came from (``None``: no index in use).
    """

    messages: list[ChatMessage]
    tools: list[ToolSchema] = field(default_factory=list)
    options: ModelOptions = field(default_factory=ModelOptions)
    retrieved: list[dict[str, Any]] = field(default_factory=list)
    index: str | None = None
    output_schema: dict[str, Any] | None = None
    """A JSON Schema the answer must satisfy: the provider asks for JSON in its structured-output
    mode (Ollama ``format``, OpenAI-compatible ``response_format``)."""


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """``(arguments, error)`` for a tool call's argument text; ``({}, reason)`` when it is unusable.

    An empty text means "no arguments" (``{}``, no error).
    """
    if not raw.strip():
        return {}, None
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON: {exc.msg} at position {exc.pos}"
    if not isinstance(parsed, dict):
        return {}, f"arguments must be a JSON object, not {type(parsed).__name__}"
    return parsed, None


# -- stream events ------------------------------------------------------------------------------
@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallEvent:
    call: ToolCall


@dataclass(frozen=True)
class Usage:
    """Token counts as the server reported them (0 when it did not) and the wall time of the call."""

    prompt_tokens: int
    completion_tokens: int
    total_ms: int
    reported: bool = True  # False: the server sent no counts at all (llama-cpp-python's stream)


@dataclass(frozen=True)
class Done:
    """The end of a reply: ``stop``, ``length``, ``tool_calls`` (whenever calls were emitted) or the
    server's own reason."""

    finish_reason: str


ModelEvent = TextDelta | ToolCallEvent | Usage | Done


@runtime_checkable
class ModelProvider(Protocol):
    """A model endpoint.  One HTTP session per provider; ``aclose`` releases it."""

    name: str
    model: str

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]: ...

    async def list_models(self) -> list[str]: ...

    async def aclose(self) -> None: ...


# -- errors -------------------------------------------------------------------------------------
class ProviderError(AriesError):
    """A model provider failed; the message names the provider, its URL and the cause."""

    code = "provider_error"
    exit_code = 4  # the model gave no answer: unreachable, timed out, an error status, a broken stream

    def __init__(self, provider: str, url: str, cause: str, **details: Any) -> None:
        cause = " ".join(cause.split())
        super().__init__(f"{provider} at {url}: {cause}", provider=provider, url=url, **details)
        self.provider = provider
        self.url = url
        self.cause = cause


class ProviderUnavailable(ProviderError):
    """Nothing answers: connection refused, unknown host, connection lost."""

    code = "provider_unavailable"


class ProviderTimeout(ProviderError):
    """No connection, no first byte or no further data within the configured time."""

    code = "provider_timeout"


class ProviderHTTPError(ProviderError):
    """The server answered with an error status (``status``; the start of the body in the message)."""

    code = "provider_http_error"

    def __init__(self, provider: str, url: str, status: int, body: str) -> None:
        super().__init__(provider, url, f"HTTP {status}: {body}" if body else f"HTTP {status}", status=status)
        self.status = status


class ProviderStreamError(ProviderError):
    """The server reported an error in the middle of a stream (an ``error`` object or line)."""

    code = "provider_stream_error"


class MalformedStream(ProviderError):
    """A stream line that is not valid NDJSON/SSE JSON, or a stream that ends without its end marker."""

    code = "malformed_stream"

    def __init__(self, provider: str, url: str, cause: str, line: int) -> None:
        super().__init__(provider, url, f"malformed stream at line {line}: {cause}", line=line)
        self.line = line


class ContextOverflow(ProviderError):
    """The request does not fit the model's context window, as the server said: in an error status
    (``status``), in the stream (``status`` None), or — llama-cpp-python's server — by an empty
    stream whose non-streamed repeat says so.

    ``window`` and ``prompt_tokens`` are the numbers the server gave (``None`` when it gave none);
    the turn loop learns from them, fits the request again and retries."""

    code = "context_overflow"

    def __init__(
        self, provider: str, url: str, cause: str, *, status: int | None, window: int | None, prompt_tokens: int | None
    ) -> None:
        head = f"HTTP {status}: " if status is not None else ""
        super().__init__(provider, url, head + cause, status=status, window=window, prompt_tokens=prompt_tokens)
        self.status = status
        self.window = window
        self.prompt_tokens = prompt_tokens


class ModelNotFound(ProviderError):
    """The server does not serve the requested model."""

    code = "model_not_found"


__all__ = [
    "ChatMessage",
    "ContextOverflow",
    "Done",
    "MalformedStream",
    "ModelEvent",
    "ModelNotFound",
    "ModelOptions",
    "ModelProvider",
    "ModelRequest",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderStreamError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "Role",
    "TextDelta",
    "ToolCall",
    "ToolCallEvent",
    "ToolSchema",
    "Usage",
    "parse_arguments",
]
