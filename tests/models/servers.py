"""Scripted loopback servers that speak the Ollama and OpenAI-compatible chat protocols.

Each server runs an aiohttp application on 127.0.0.1 (an ephemeral port) in a background thread, so
that it serves async tests, the official clients and ``aries`` subprocesses alike.  It answers chat
requests from a script — a list of :class:`Reply`, one consumed per chat request — and records
every request it receives (:attr:`ScriptedServer.requests`) and every stream the client abandoned
(:attr:`ScriptedServer.disconnects`).

What a reply can script: text (explicit pieces or fixed-size chunking, a delay before each piece),
tool calls (Ollama: whole, in one line; OpenAI: split into deltas — id and name first, then the
arguments text in ``arg_chunk``-sized pieces — with several calls interleaved by index), an HTTP
error status, an error reported mid-stream, a malformed line, a stream that stalls (holds the
connection open and sends nothing more) or is cut (ends without its end marker).

The wire formats follow the real servers: Ollama's NDJSON ``/api/chat`` lines with ``done: true``
and ``prompt_eval_count``/``eval_count`` last, ``{"error": "..."}`` bodies; OpenAI's
``chat.completion.chunk`` SSE events, the usage chunk with empty ``choices`` only when the request
asked for ``stream_options.include_usage``, ``data: [DONE]``, ``{"error": {"message": ...}}`` bodies.
``tests/models/test_conformance.py`` checks them with the official ``ollama`` and ``openai`` clients.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import Any

CREATED_AT = "2025-01-01T00:00:00.000000Z"
CREATED = 1735689600


@dataclass
class Call:
    """A scripted tool call.  ``arguments`` as a string is sent verbatim (it may be invalid JSON)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Reply:
    """One scripted answer to one chat request."""

    text: str = ""
    chunks: list[str] | None = None  # explicit text pieces (default: ``text`` cut every ``chunk_size``)
    chunk_size: int = 4
    delay: float = 0.0  # seconds before each piece
    tool_calls: list[Call] = field(default_factory=list)
    arg_chunk: int = 5  # OpenAI: characters of arguments per delta
    interleave: bool = True  # OpenAI: alternate the deltas of different calls
    status: int = 200  # an HTTP error status (with ``error`` as the message)
    error: str = "scripted failure"
    error_after: int | None = None  # an in-band error after this many pieces
    malformed_after: int | None = None  # a line that is not JSON after this many pieces
    stall_after: int | None = None  # send nothing more after this many pieces, keep the connection
    cut_after: int | None = None  # end the response after this many pieces, without the end marker
    finish_reason: str | None = None  # default: "tool_calls" with calls (OpenAI), else "stop"
    prompt_tokens: int = 11
    completion_tokens: int | None = None  # default: the number of pieces plus calls
    done_marker: bool = True  # OpenAI: end with ``data: [DONE]``
    usage_chunk: bool = True  # OpenAI: the usage chunk when asked (llama-cpp-python's stream never sends one)
    location: str | None = None  # with a 3xx status: the redirect target
    raw_lines: list[str] | None = None  # send exactly these lines (each + "\n") as the stream body

    def pieces(self) -> list[str]:
        if self.chunks is not None:
            return list(self.chunks)
        size = max(1, self.chunk_size)
        return [self.text[i : i + size] for i in range(0, len(self.text), size)]

    def completion(self) -> int:
        return (
            self.completion_tokens if self.completion_tokens is not None else len(self.pieces()) + len(self.tool_calls)
        )


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class ScriptedServer:
    """A scripted Ollama (``kind="ollama"``) or OpenAI-compatible (``kind="openai"``) server."""

    def __init__(self, kind: str, models: list[str] | None = None) -> None:
        assert kind in ("ollama", "openai")
        self.kind = kind
        self.models = list(models or (["llama3.2:3b", "qwen2.5:7b"] if kind == "ollama" else ["qwen2.5", "llama-3"]))
        self.script: list[Reply] = []
        # What the server says of its context window: Ollama's /api/show (a num_ctx parameter, and
        # the trained length in model_info), an OpenAI-compatible /v1/models entry's max_model_len.
        self.num_ctx: int | None = None
        self.context_length = 131072
        self.max_model_len: int | None = None
        self.requests: list[Recorded] = []
        self.disconnects: list[str] = []
        self.disconnected = threading.Event()
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"scripted-{kind}")

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> ScriptedServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("scripted server did not start")
        return self

    def _serve(self) -> None:
        from aiohttp import web

        asyncio.set_event_loop(self._loop)
        app = web.Application()
        if self.kind == "ollama":
            app.router.add_post("/api/chat", self._ollama_chat)
            app.router.add_get("/api/tags", self._ollama_tags)
            app.router.add_post("/api/show", self._ollama_show)
        else:
            app.router.add_post("/v1/chat/completions", self._openai_chat)
            app.router.add_get("/v1/models", self._openai_models)

        async def start() -> None:
            self._runner = web.AppRunner(app, shutdown_timeout=0.2, handler_cancellation=True)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            assert site._server is not None
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

        self._loop.run_until_complete(start())
        self._ready.set()
        self._loop.run_forever()

    def stop(self) -> None:
        async def cleanup() -> None:
            await self._runner.cleanup()
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    @property
    def url(self) -> str:
        """The server root (the Ollama host)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``…/v1``)."""
        return f"{self.url}/v1"

    def add(self, *replies: Reply) -> ScriptedServer:
        self.script.extend(replies)
        return self

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith(("/api/chat", "/chat/completions"))]

    # -- shared -------------------------------------------------------------------------------
    async def _record(self, request: Any) -> Any:
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        self.requests.append(Recorded(request.method, request.path, dict(request.headers), body))
        return body

    def _next(self) -> Reply | None:
        return self.script.pop(0) if self.script else None

    async def _stream(self, request: Any, response: Any, lines: list[tuple[str, Reply | None]]) -> Any:
        """Write ``lines``; a ``("PIECE", reply)`` entry honours the reply's delay; ``STALL`` and
        ``CUT`` entries stall or end the stream.  Records a client that goes away."""
        try:
            await response.prepare(request)
            for line, reply in lines:
                if line == "STALL":
                    await asyncio.sleep(3600)
                if line == "CUT":
                    break
                if reply is not None and reply.delay:
                    await asyncio.sleep(reply.delay)
                await response.write(line.encode("utf-8"))
            await response.write_eof()
        except (asyncio.CancelledError, ConnectionResetError, ConnectionError):
            self.disconnects.append(request.path)
            self.disconnected.set()
            raise
        return response

    async def _raw(self, request: Any, reply: Reply, content_type: str) -> Any:
        from aiohttp import web

        assert reply.raw_lines is not None
        response = web.StreamResponse(status=200, headers={"Content-Type": content_type})
        return await self._stream(request, response, [(line + "\n", reply) for line in reply.raw_lines])

    def _script_points(self, reply: Reply, index: int) -> str | None:
        """What replaces the piece at ``index``: an error, a malformed line, a stall or a cut."""
        for name, at in (
            ("ERROR", reply.error_after),
            ("MALFORMED", reply.malformed_after),
            ("STALL", reply.stall_after),
            ("CUT", reply.cut_after),
        ):
            if at is not None and at == index:
                return name
        return None

    # -- Ollama -------------------------------------------------------------------------------
    def _ollama_line(self, model: str, message: dict[str, Any], **extra: Any) -> str:
        data = {"model": model, "created_at": CREATED_AT, "message": {"role": "assistant", **message}, **extra}
        return json.dumps(data) + "\n"

    def _ollama_calls(self, reply: Reply) -> list[dict[str, Any]]:
        return [{"function": {"name": c.name, "arguments": c.arguments}} for c in reply.tool_calls]

    def _ollama_final(self, reply: Reply) -> dict[str, Any]:
        return {
            "done_reason": reply.finish_reason or "stop",
            "done": True,
            "total_duration": 1_000_000,
            "load_duration": 1000,
            "prompt_eval_count": reply.prompt_tokens,
            "prompt_eval_duration": 1000,
            "eval_count": reply.completion(),
            "eval_duration": 1000,
        }

    async def _ollama_chat(self, request: Any) -> Any:
        from aiohttp import web

        body = await self._record(request)
        model = body.get("model") if isinstance(body, dict) else None
        if not model:
            return web.json_response({"error": "model is required"}, status=400)
        if model not in self.models:
            return web.json_response({"error": f'model "{model}" not found, try pulling it first'}, status=404)
        reply = self._next()
        if reply is None:
            return web.json_response({"error": "the script has no reply left"}, status=500)
        if reply.location is not None:
            return web.Response(status=reply.status, headers={"Location": reply.location})
        if reply.status != 200:
            return web.json_response({"error": reply.error}, status=reply.status)
        if reply.raw_lines is not None:
            return await self._raw(request, reply, "application/x-ndjson")
        if body.get("stream") is False:
            message: dict[str, Any] = {"content": reply.text or "".join(reply.pieces())}
            if reply.tool_calls:
                message["tool_calls"] = self._ollama_calls(reply)
            return web.json_response(json.loads(self._ollama_line(model, message, **self._ollama_final(reply))))
        lines: list[tuple[str, Reply | None]] = []
        pieces = reply.pieces()
        for index in range(len(pieces) + 1):
            point = self._script_points(reply, index)
            if point == "ERROR":
                lines.append((json.dumps({"error": reply.error}) + "\n", reply))
                lines.append(("CUT", None))
                break
            if point == "MALFORMED":
                lines.append(('{"model": "' + model + '", "message": {"role": "assist\n', reply))
                lines.append(("CUT", None))
                break
            if point in ("STALL", "CUT"):
                lines.append((point, None))
                break
            if index < len(pieces):
                lines.append((self._ollama_line(model, {"content": pieces[index]}, done=False), reply))
        if reply.tool_calls:
            lines.append(
                (self._ollama_line(model, {"content": "", "tool_calls": self._ollama_calls(reply)}, done=False), reply)
            )
        lines.append((self._ollama_line(model, {"content": ""}, **self._ollama_final(reply)), reply))
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/x-ndjson"})
        return await self._stream(request, response, lines)

    async def _ollama_tags(self, request: Any) -> Any:
        from aiohttp import web

        await self._record(request)
        models = [
            {
                "name": name,
                "model": name,
                "modified_at": "2025-01-01T00:00:00Z",
                "size": 2_019_393_189,
                "digest": "a80c4f17acd5" + "0" * 52,
                "details": {
                    "parent_model": "",
                    "format": "gguf",
                    "family": "llama",
                    "families": ["llama"],
                    "parameter_size": "3.2B",
                    "quantization_level": "Q4_K_M",
                },
            }
            for name in self.models
        ]
        return web.json_response({"models": models})

    async def _ollama_show(self, request: Any) -> Any:
        from aiohttp import web

        body = await self._record(request)
        model = body.get("model") if isinstance(body, dict) else None
        if model not in self.models:
            return web.json_response({"error": f"model '{model}' not found"}, status=404)
        parameters = 'stop                           "<|eot_id|>"'
        if self.num_ctx is not None:
            parameters = f"num_ctx                        {self.num_ctx}\n{parameters}"
        return web.json_response(
            {
                "modelfile": f"FROM {model}\n",
                "parameters": parameters,
                "template": "{{ .Prompt }}",
                "details": {
                    "parent_model": "",
                    "format": "gguf",
                    "family": "llama",
                    "families": ["llama"],
                    "parameter_size": "3.2B",
                    "quantization_level": "Q4_K_M",
                },
                "model_info": {"general.architecture": "llama", "llama.context_length": self.context_length},
                "capabilities": ["completion", "tools"],
                "modified_at": "2025-01-01T00:00:00Z",
            }
        )

    # -- OpenAI-compatible ----------------------------------------------------------------------
    def _openai_error(self, status: int, message: str, kind: str = "invalid_request_error") -> Any:
        from aiohttp import web

        return web.json_response(
            {"error": {"message": message, "type": kind, "param": None, "code": None}}, status=status
        )

    def _chunk(self, model: str, delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        data = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": "fp_scripted",
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(data)}\n\n"

    def _call_ids(self, reply: Reply) -> list[str]:
        return [c.id or f"call_scripted_{n}" for n, c in enumerate(reply.tool_calls)]

    def _call_deltas(self, reply: Reply) -> list[dict[str, Any]]:
        per_call: list[list[dict[str, Any]]] = []
        for index, (call, call_id) in enumerate(zip(reply.tool_calls, self._call_ids(reply), strict=True)):
            text = call.text()
            size = max(1, reply.arg_chunk)
            deltas: list[dict[str, Any]] = [
                {"index": index, "id": call_id, "type": "function", "function": {"name": call.name, "arguments": ""}}
            ]
            deltas += [
                {"index": index, "function": {"arguments": text[i : i + size]}} for i in range(0, len(text), size)
            ]
            per_call.append(deltas)
        if not reply.interleave:
            return [d for deltas in per_call for d in deltas]
        out: list[dict[str, Any]] = []
        for step in range(max((len(d) for d in per_call), default=0)):
            out += [deltas[step] for deltas in per_call if step < len(deltas)]
        return out

    def _usage(self, reply: Reply) -> dict[str, int]:
        completion = reply.completion()
        return {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": reply.prompt_tokens + completion,
        }

    async def _openai_chat(self, request: Any) -> Any:
        from aiohttp import web

        body = await self._record(request)
        if not isinstance(body, dict) or not body.get("model") or not isinstance(body.get("messages"), list):
            return self._openai_error(400, "'model' and 'messages' are required")
        model = body["model"]
        if model not in self.models:
            return self._openai_error(404, f"The model `{model}` does not exist.", "NotFoundError")
        reply = self._next()
        if reply is None:
            return self._openai_error(500, "the script has no reply left", "server_error")
        if reply.location is not None:
            return web.Response(status=reply.status, headers={"Location": reply.location})
        if reply.status != 200:
            return self._openai_error(reply.status, reply.error, "server_error")
        if reply.raw_lines is not None:
            return await self._raw(request, reply, "text/event-stream")
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or "".join(reply.pieces()) or None}
            if reply.tool_calls:
                message["tool_calls"] = [
                    {"id": call_id, "type": "function", "function": {"name": c.name, "arguments": c.text()}}
                    for c, call_id in zip(reply.tool_calls, self._call_ids(reply), strict=True)
                ]
            return web.json_response(
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion",
                    "created": CREATED,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                    "usage": self._usage(reply),
                }
            )
        lines: list[tuple[str, Reply | None]] = [(self._chunk(model, {"role": "assistant", "content": ""}), reply)]
        pieces = reply.pieces()
        for index in range(len(pieces) + 1):
            point = self._script_points(reply, index)
            if point == "ERROR":
                error = {"error": {"message": reply.error, "type": "server_error", "param": None, "code": None}}
                lines += [(f"data: {json.dumps(error)}\n\n", reply), ("CUT", None)]
                break
            if point == "MALFORMED":
                lines += [('data: {"id": "chatcmpl-scripted", "choices": [{"delta": \n\n', reply), ("CUT", None)]
                break
            if point in ("STALL", "CUT"):
                lines.append((point, None))
                break
            if index < len(pieces):
                lines.append((self._chunk(model, {"content": pieces[index]}), reply))
        lines += [(self._chunk(model, {"tool_calls": [delta]}), reply) for delta in self._call_deltas(reply)]
        lines.append((self._chunk(model, {}, finish), reply))
        options = body.get("stream_options") or {}
        if options.get("include_usage") and reply.usage_chunk:
            lines.append((self._chunk(model, None, usage=self._usage(reply)), reply))
        if reply.done_marker:
            lines.append(("data: [DONE]\n\n", reply))
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        return await self._stream(request, web.StreamResponse(status=200, headers=headers), lines)

    async def _openai_models(self, request: Any) -> Any:
        from aiohttp import web

        await self._record(request)
        data = [{"id": name, "object": "model", "created": CREATED, "owned_by": "scripted"} for name in self.models]
        if self.max_model_len is not None:  # as vLLM says it
            for entry in data:
                entry["max_model_len"] = self.max_model_len
        return web.json_response({"object": "list", "data": data})
