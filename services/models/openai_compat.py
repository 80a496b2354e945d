"""The ``openai`` provider: any OpenAI-compatible ``/chat/completions`` endpoint (SSE stream).

Works with llama.cpp's server, vLLM, LM Studio and Ollama's ``/v1``: the base URL is the part
before ``/chat/completions`` (``OPENAI_BASE_URL``, e.g. ``http://127.0.0.1:8080/v1``).  Only fields
that all of them accept are sent (``tools`` only when some are offered, options only when set).

The stream is read leniently: every ``data:`` line is one JSON chunk (a missing blank line between
events is tolerated), comments and ``event:``/``id:``/``retry:`` fields are skipped, a chunk with an
``error`` object is an error reported mid-stream, and ``data: [DONE]`` ends it (a stream that ends
after a ``finish_reason`` without ``[DONE]`` is accepted too).

Tool calls arrive as deltas keyed by ``index``: the first carries ``id`` and ``function.name``, the
following ones pieces of ``function.arguments`` (a JSON text) to concatenate; calls with different
indices may interleave.  Each call is emitted once the reply finishes, in index order.  When the
assembled arguments are not a JSON object the call is *still emitted*, with ``arguments == {}``,
the text in ``raw_arguments`` and the reason in ``arguments_error``: the turn loop answers the model
with a structured schema error for that call instead of running it.  A call without an id gets
``call_<assistant turn>_<index>``.

The API key comes from ``OPENAI_API_KEY`` only (sent as ``Authorization: Bearer``); it is never
written anywhere nor shown in a message.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from services.models.base import (
    ChatMessage,
    Done,
    MalformedStream,
    ModelEvent,
    ModelNotFound,
    ModelRequest,
    ProviderError,
    ProviderStreamError,
    ProviderUnavailable,
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
    error_text,
    looks_like_missing_model,
    overflow_error,
    parse_json_line,
    short,
)
from services.models.ollama import assistant_turns


def _message(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
            }
            for call in message.tool_calls
        ]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id or ""
    return out


def _tool(schema: ToolSchema) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": schema.name, "description": schema.description, "parameters": schema.parameters},
    }


@dataclass
class _Assembly:
    """One tool call being assembled from its deltas."""

    index: int
    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)
    emitted: bool = False

    def add(self, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("id"), str) and delta["id"] and not self.id:
            self.id = delta["id"]
        function = delta.get("function")
        if not isinstance(function, dict):
            return
        name = function.get("name")
        if isinstance(name, str) and name and name != self.name:
            self.name = name if not self.name else self.name + name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            self.pieces.append(arguments)
        elif isinstance(arguments, dict):  # lenient: some servers send the object itself
            self.pieces.append(json.dumps(arguments, ensure_ascii=False))

    def call(self, turn: int) -> ToolCall:
        raw = "".join(self.pieces)
        arguments, error = parse_arguments(raw)
        return ToolCall(
            id=self.id or f"call_{turn}_{self.index}",
            name=self.name,
            arguments=arguments,
            raw_arguments=raw,
            arguments_error=error,
        )


class OpenAICompatProvider(HttpProvider):
    """A model behind an OpenAI-compatible chat-completions endpoint."""

    name = "openai"
    not_found_hint = "is OPENAI_BASE_URL the part before /chat/completions, such as http://127.0.0.1:8080/v1?"

    def __init__(
        self, model: str, base_url: str, *, api_key: str | None = None, timeouts: Timeouts | None = None
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        super().__init__(base_url, timeouts=timeouts, headers=headers)
        self.model = model

    def payload(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of ``POST /chat/completions`` for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_message(message) for message in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [_tool(schema) for schema in request.tools]
        options = request.options
        pairs = {
            "temperature": options.temperature,
            "max_tokens": options.max_tokens,
            "seed": options.seed,
            "top_p": options.top_p,
            "stop": options.stop,
        }
        body.update({key: value for key, value in pairs.items() if value is not None})
        if request.tools and options.tool_choice is not None:
            choice = options.tool_choice
            named = choice not in ("auto", "none", "required")
            body["tool_choice"] = {"type": "function", "function": {"name": choice}} if named else choice
        if request.output_schema is not None and options.schema_format == "json_object":
            body["response_format"] = {"type": "json_object", "schema": request.output_schema}
        elif request.output_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": request.output_schema},
            }
        return body

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        url = f"{self.base_url}/chat/completions"
        started = time.monotonic()
        turn = assistant_turns(request.messages)
        calls: dict[int, _Assembly] = {}
        emitted = 0
        finish: str | None = None
        usage: dict[str, Any] = {}
        done_marker = False
        line_no = 0
        data_lines = 0
        payload = self.payload(request)
        lines = self.stream_lines("/chat/completions", payload)
        async with contextlib.aclosing(lines):
            async for line_no, line in lines:
                data_text = self._data(line, url, line_no)
                if data_text is None:
                    continue
                data_lines += 1
                if data_text.strip() == "[DONE]":
                    done_marker = True
                    break
                chunk = parse_json_line(self.name, url, data_text, line_no)
                if not isinstance(chunk, dict):
                    raise MalformedStream(self.name, url, "expected a JSON object", line_no)
                self._check_error(chunk, url, line_no)
                if isinstance(chunk.get("usage"), dict):
                    usage = chunk["usage"]
                for choice in chunk.get("choices") or []:
                    if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                        continue
                    delta = choice.get("delta") or choice.get("message")
                    delta = delta if isinstance(delta, dict) else {}
                    content = delta.get("content")
                    if isinstance(content, str) and content:
                        yield TextDelta(content)
                    for position, piece in enumerate(delta.get("tool_calls") or []):
                        if not isinstance(piece, dict):
                            raise MalformedStream(self.name, url, "a tool-call delta that is not an object", line_no)
                        index = piece.get("index", position)
                        if not isinstance(index, int):
                            raise MalformedStream(self.name, url, f"tool-call index {index!r}", line_no)
                        calls.setdefault(index, _Assembly(index)).add(piece)
                    if choice.get("finish_reason"):
                        finish = str(choice["finish_reason"])
                if finish is not None:
                    for assembly in sorted(calls.values(), key=lambda a: a.index):
                        if not assembly.emitted:
                            assembly.emitted = True
                            emitted += 1
                            yield ToolCallEvent(self._complete(assembly, turn, url, line_no))
        if data_lines == 0:
            await self._explain_empty(payload, url)
        if not done_marker and finish is None:
            raise MalformedStream(self.name, url, "the stream ended before a finish_reason or [DONE]", line_no + 1)
        for assembly in sorted(calls.values(), key=lambda a: a.index):
            if not assembly.emitted:
                assembly.emitted = True
                emitted += 1
                yield ToolCallEvent(self._complete(assembly, turn, url, line_no))
        yield Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            total_ms=round((time.monotonic() - started) * 1000),
            reported=bool(usage),
        )
        reason = finish or "stop"
        yield Done("tool_calls" if emitted and reason == "stop" else reason)

    async def _explain_empty(self, payload: dict[str, Any], url: str) -> None:
        """A stream that ended before its first event. llama-cpp-python's server answers a request
        larger than its context window that way (200, then nothing): the same request, not streamed
        and asking for one token, gets the server's real error, which is raised instead (a
        :class:`ContextOverflow` for that case). When the repeat succeeds, nothing is raised here."""
        probe = {key: value for key, value in payload.items() if key not in ("stream", "stream_options")}
        probe["max_tokens"] = 1
        try:
            await self.post_json("/chat/completions", probe)
        except ProviderUnavailable:  # the pooled connection the server broke off: once more, on a new one
            await self.post_json("/chat/completions", probe)

    def _data(self, line: str, url: str, line_no: int) -> str | None:
        """The payload of an SSE ``data:`` line; ``None`` for blank lines, comments and other fields."""
        if not line.strip() or line.startswith(":"):
            return None
        if line.lstrip().startswith("{"):  # lenient: a bare JSON line
            return line
        field_name, sep, value = line.partition(":")
        if not sep:
            raise MalformedStream(self.name, url, f"not an SSE line: {short(line, 80)!r}", line_no)
        if field_name == "data":
            return value[1:] if value.startswith(" ") else value
        if field_name in ("event", "id", "retry"):
            return None
        if field_name == "error":  # llama.cpp's server reports a failure as an ``error:`` line
            self._check_error({"error": error_text(value.strip()) or "error"}, url, line_no)
        raise MalformedStream(self.name, url, f"unknown SSE field {short(field_name, 40)!r}", line_no)

    def _check_error(self, chunk: dict[str, Any], url: str, line_no: int) -> None:
        error = chunk.get("error")
        if not error and chunk.get("object") == "error":  # vLLM's shape
            error = chunk.get("message") or "error"
        if not error:
            return
        message = error.get("message", error) if isinstance(error, dict) else error
        text = short(str(message))
        overflow = overflow_error(self.name, url, None, str(message), error if isinstance(error, dict) else {})
        if overflow is not None:
            raise overflow
        if looks_like_missing_model(text):
            raise ModelNotFound(self.name, url, text)
        raise ProviderStreamError(self.name, url, f"error at line {line_no}: {text}")

    def _complete(self, assembly: _Assembly, turn: int, url: str, line_no: int) -> ToolCall:
        if not assembly.name:
            raise MalformedStream(self.name, url, f"tool call {assembly.index} has no function name", line_no)
        return assembly.call(turn)

    async def context_window(self) -> int | None:
        """``max_model_len`` of this model's ``GET /models`` entry (vLLM says it there); None when the
        server does not say (llama.cpp's servers, LM Studio: the window is then learned from the
        first overflow error, see :mod:`services.models.window`)."""
        try:
            data = await self.get_json("/models")
        except ProviderError:
            return None
        entries = data.get("data") if isinstance(data, dict) else None
        for entry in entries or []:
            if isinstance(entry, dict) and entry.get("id") == self.model:
                value = entry.get("max_model_len")
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
        return None

    async def prompt_tokens_of(self, message: str, tools: list[dict[str, Any]] | None) -> int | None:
        """The server's own count of the prompt of one user ``message`` (and ``tools``): a
        non-streamed request for one token (:mod:`services.models.template`); None when it says none."""
        payload: dict[str, Any] = {"model": self.model, "messages": [{"role": "user", "content": message}]}
        if tools:
            payload["tools"] = tools
        return await self._count(payload)

    async def count_request(self, request: ModelRequest) -> int | None:
        """The server's own count of ``request``'s prompt, for a server whose stream counted nothing:
        the same body, not streamed, one token out (llama.cpp answers it from the prompt it has just
        cached); None when it says none."""
        return await self._count(self.payload(request))

    async def _count(self, payload: dict[str, Any]) -> int | None:
        body = {key: value for key, value in payload.items() if key not in ("stream", "stream_options")}
        body.update(stream=False, max_tokens=1, temperature=0)
        body.pop("response_format", None)  # one token of a constrained answer may not parse: the count is all
        try:
            data = await self.post_json("/chat/completions", body)
        except ProviderError:
            return None
        usage = data.get("usage") if isinstance(data, dict) else None
        count = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None

    async def list_models(self) -> list[str]:
        data = await self.get_json("/models")
        entries = data.get("data") if isinstance(data, dict) else None
        names = {str(entry["id"]) for entry in entries or [] if isinstance(entry, dict) and entry.get("id")}
        return sorted(names)


__all__ = ["OpenAICompatProvider"]
