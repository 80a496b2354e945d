"""The ``ollama`` provider: Ollama's native ``POST /api/chat`` (NDJSON stream) and ``GET /api/tags``.

Each stream line is a JSON object; ``message.content`` carries text, ``message.tool_calls`` carries
whole tool calls (``function.name`` and ``function.arguments`` as an object), an ``error`` key is an
error reported mid-stream, and the last line has ``done: true`` with ``done_reason``,
``prompt_eval_count`` and ``eval_count``.  Ollama gives tool calls no id (newer versions may): the
provider makes a deterministic one from the turn position, ``ollama_<assistant turn>_<n>``.

``OLLAMA_HOST`` is read as Ollama itself reads it: ``host``, ``host:port``, ``:port``,
``http://host:port`` or ``https://host[:port]``; default ``http://127.0.0.1:11434``.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.parse
from collections.abc import AsyncGenerator
from typing import Any

from services.errors import ConfigError
from services.models.base import (
    ChatMessage,
    Done,
    MalformedStream,
    ModelEvent,
    ModelNotFound,
    ModelOptions,
    ModelRequest,
    ProviderError,
    ProviderStreamError,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    ToolSchema,
    Usage,
    parse_arguments,
)
from services.models.http import (
    HttpProvider,
    Timeouts,
    looks_like_missing_model,
    overflow_error,
    parse_json_line,
    short,
)

DEFAULT_HOST = "http://127.0.0.1:11434"
DEFAULT_PORT = 11434
DEFAULT_NUM_CTX = 8192
"""The ``num_ctx`` Aries asks for when the model's Modelfile sets none (Ollama's own default, 4096, is
less than the prompt with the tool schemas takes); less when the model was trained on less."""


def ollama_base_url(host: str | None) -> str:
    """The base URL for an ``OLLAMA_HOST`` value (``None`` or empty: the default)."""
    host = (host or "").strip()
    port = DEFAULT_PORT
    scheme, sep, hostport = host.partition("://")
    if not sep:
        scheme, hostport = "http", host
    elif scheme == "http":
        port = 80
    elif scheme == "https":
        port = 443
    else:
        raise ConfigError(f"OLLAMA_HOST {host!r}: the scheme must be http or https")
    try:
        split = urllib.parse.urlsplit(f"{scheme}://{hostport}")
        name = split.hostname or "127.0.0.1"
        port = split.port or port
    except ValueError as exc:
        raise ConfigError(f"OLLAMA_HOST {host!r}: {exc}") from None
    if ":" in name:
        name = f"[{name}]"
    path = split.path.strip("/")
    return f"{scheme}://{name}:{port}/{path}" if path else f"{scheme}://{name}:{port}"


def assistant_turns(messages: list[ChatMessage]) -> int:
    """How many assistant messages precede the reply being generated (its turn position)."""
    return sum(1 for message in messages if message.role == "assistant")


def _message(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        out["tool_calls"] = [
            {"function": {"name": call.name, "arguments": call.arguments}} for call in message.tool_calls
        ]
    if message.role == "tool" and message.name:
        out["tool_name"] = message.name
    return out


def _tool(schema: ToolSchema) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": schema.name, "description": schema.description, "parameters": schema.parameters},
    }


def _options(options: ModelOptions) -> dict[str, Any]:
    pairs = {
        "temperature": options.temperature,
        "num_predict": options.max_tokens,
        "seed": options.seed,
        "top_p": options.top_p,
        "stop": options.stop,
        "num_ctx": options.context_window,
    }
    return {key: value for key, value in pairs.items() if value is not None}


def _arguments(value: Any) -> tuple[dict[str, Any], str, str | None]:
    """``(arguments, raw_arguments, error)`` from Ollama's ``function.arguments``."""
    if isinstance(value, dict):
        return value, json.dumps(value, ensure_ascii=False), None
    if value is None:
        return {}, "", None
    raw = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    arguments, error = parse_arguments(raw)
    return arguments, raw, error


class OllamaProvider(HttpProvider):
    """A model served by Ollama's native API."""

    name = "ollama"

    def __init__(self, model: str, host: str | None = None, *, timeouts: Timeouts | None = None) -> None:
        super().__init__(ollama_base_url(host), timeouts=timeouts)
        self.model = model

    def payload(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of ``POST /api/chat`` for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_message(message) for message in request.messages],
            "stream": True,
        }
        if request.tools:
            body["tools"] = [_tool(schema) for schema in request.tools]
        options = _options(request.options)
        if options:
            body["options"] = options
        if request.output_schema is not None:
            body["format"] = request.output_schema  # Ollama's structured outputs: a JSON Schema
        return body

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        url = f"{self.base_url}/api/chat"
        started = time.monotonic()
        turn = assistant_turns(request.messages)
        calls = 0
        line_no = 0
        final: dict[str, Any] | None = None
        lines = self.stream_lines("/api/chat", self.payload(request))
        async with contextlib.aclosing(lines):
            async for line_no, line in lines:
                if not line.strip():
                    continue
                data = parse_json_line(self.name, url, line, line_no)
                if not isinstance(data, dict):
                    raise MalformedStream(self.name, url, "expected a JSON object", line_no)
                error = data.get("error")
                if error:
                    message = short(str(error))
                    overflow = overflow_error(self.name, url, None, str(error), {})
                    if overflow is not None:
                        raise overflow
                    if looks_like_missing_model(message):
                        raise ModelNotFound(self.name, url, message)
                    raise ProviderStreamError(self.name, url, f"error at line {line_no}: {message}")
                message_obj = data.get("message")
                message_obj = message_obj if isinstance(message_obj, dict) else {}
                content = message_obj.get("content")
                if isinstance(content, str) and content:
                    yield TextDelta(content)
                for raw_call in message_obj.get("tool_calls") or []:
                    yield ToolCallEvent(self._call(raw_call, turn, calls, url, line_no))
                    calls += 1
                if data.get("done"):
                    final = data
                    break
        if final is None:
            raise MalformedStream(self.name, url, "the stream ended before its final line (done: true)", line_no + 1)
        yield Usage(
            prompt_tokens=int(final.get("prompt_eval_count") or 0),
            completion_tokens=int(final.get("eval_count") or 0),
            total_ms=round((time.monotonic() - started) * 1000),
        )
        reason = str(final.get("done_reason") or "stop")
        yield Done("tool_calls" if calls and reason == "stop" else reason)

    def _call(self, raw: Any, turn: int, position: int, url: str, line_no: int) -> ToolCall:
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise MalformedStream(self.name, url, "a tool call without function.name", line_no)
        arguments, raw_arguments, error = _arguments(function.get("arguments"))
        call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else None
        return ToolCall(
            id=call_id or f"ollama_{turn}_{position}",
            name=function["name"],
            arguments=arguments,
            raw_arguments=raw_arguments,
            arguments_error=error,
        )

    async def context_window(self) -> int | None:
        """The window this model runs with: its ``num_ctx`` parameter, else :data:`DEFAULT_NUM_CTX`
        (or less when the model was trained on less); None when ``/api/show`` does not answer. Aries
        then sends ``num_ctx`` itself, so the server's window is the one each request was fitted to
        (Ollama would otherwise cut a longer prompt silently)."""
        try:
            data = await self.post_json("/api/show", {"model": self.model}, timeout=self.timeouts.listing)
        except ProviderError:
            return None
        if not isinstance(data, dict):
            return None
        for line in str(data.get("parameters") or "").splitlines():
            key, _, value = line.strip().partition(" ")
            if key == "num_ctx" and value.strip().isdigit():
                return int(value.strip())
        info = data.get("model_info")
        trained = None
        if isinstance(info, dict):
            lengths = [v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int) and v > 0]
            trained = min(lengths) if lengths else None
        return min(DEFAULT_NUM_CTX, trained) if trained else DEFAULT_NUM_CTX

    async def list_models(self) -> list[str]:
        data = await self.get_json("/api/tags")
        models = data.get("models") if isinstance(data, dict) else None
        names = {
            str(entry.get("name") or entry.get("model"))
            for entry in models or []
            if isinstance(entry, dict) and (entry.get("name") or entry.get("model"))
        }
        return sorted(names)


__all__ = ["DEFAULT_HOST", "OllamaProvider", "ollama_base_url"]
