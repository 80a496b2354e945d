"""The OpenAI-compatible provider against the scripted server: SSE parsing, tool-call delta
assembly, what is sent, typed errors, cancellation."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from services.models import (
    ChatMessage,
    Done,
    MalformedStream,
    ModelNotFound,
    ModelOptions,
    ModelRequest,
    ProviderHTTPError,
    ProviderStreamError,
    ProviderTimeout,
    ProviderUnavailable,
    TextDelta,
    Timeouts,
    ToolCallEvent,
    ToolSchema,
    Usage,
)
from services.models.openai_compat import OpenAICompatProvider
from tests.models.helpers import ask, calls_of, collect, text_of
from tests.models.servers import Call, Reply, ScriptedServer
from tests.models.test_ollama import free_port

WRITE = ToolSchema(
    "builtin__fs__write_text",
    "Write a text file",
    {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}},
)


def provider(
    server: ScriptedServer, model: str = "qwen2.5", api_key: str | None = None, **timeouts: float
) -> OpenAICompatProvider:
    return OpenAICompatProvider(model, server.base_url, api_key=api_key, timeouts=Timeouts(**timeouts))


async def test_text_streams_as_deltas_then_usage_then_done(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="The answer is 42.", chunk_size=6, prompt_tokens=30, completion_tokens=3))
    model = provider(openai_server)
    events = await collect(model, ask())
    await model.aclose()
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["The an", "swer i", "s 42."]
    assert isinstance(events[-2], Usage) and (events[-2].prompt_tokens, events[-2].completion_tokens) == (30, 3)
    assert events[-1] == Done("stop")
    sent = openai_server.chat_requests()[0]
    assert sent == {
        "model": "qwen2.5",
        "messages": [{"role": "user", "content": "What is in notes.txt?"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert "Authorization" not in openai_server.requests[0].headers


async def test_api_key_options_and_tools_are_sent(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="ok"))
    model = provider(openai_server, api_key="sk-test-123")
    options = ModelOptions(temperature=0.2, max_tokens=128, seed=1, stop=["\n\n"], context_window=8192)
    await collect(model, ask(tools=[WRITE], options=options))
    await model.aclose()
    assert openai_server.requests[0].headers["Authorization"] == "Bearer sk-test-123"
    sent = openai_server.chat_requests()[0]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {"name": WRITE.name, "description": WRITE.description, "parameters": WRITE.parameters},
        }
    ]
    assert {k: sent[k] for k in ("temperature", "max_tokens", "seed", "stop")} == {
        "temperature": 0.2,
        "max_tokens": 128,
        "seed": 1,
        "stop": ["\n\n"],
    }
    assert "num_ctx" not in sent and "context_window" not in sent and "tool_choice" not in sent
    assert "sk-test-123" not in repr(model)


async def test_interleaved_tool_call_deltas_with_split_json_are_assembled(openai_server: ScriptedServer) -> None:
    calls = [
        Call("builtin__fs__read_text", {"path": "notes.txt"}, id="call_a"),
        Call("builtin__fs__write_text", {"path": "out.txt", "text": 'quote " brace } é\n'}, id="call_b"),
        Call("builtin__fs__list_dir", {}, id="call_c"),
    ]
    openai_server.add(Reply(text="Working.", tool_calls=calls, arg_chunk=2, interleave=True))
    model = provider(openai_server)
    events = await collect(model, ask(tools=[WRITE]))
    await model.aclose()
    assert text_of(events) == "Working."
    got = calls_of(events)
    assert [(c.id, c.name, c.arguments, c.arguments_error) for c in got] == [
        ("call_a", "builtin__fs__read_text", {"path": "notes.txt"}, None),
        ("call_b", "builtin__fs__write_text", {"path": "out.txt", "text": 'quote " brace } é\n'}, None),
        ("call_c", "builtin__fs__list_dir", {}, None),
    ]
    assert got[1].raw_arguments == calls[1].text()
    kinds = [type(e).__name__ for e in events]
    assert kinds[-5:] == ["ToolCallEvent", "ToolCallEvent", "ToolCallEvent", "Usage", "Done"]
    assert events[-1] == Done("tool_calls")


async def test_invalid_argument_json_still_emits_the_call_with_the_raw_text(openai_server: ScriptedServer) -> None:
    calls = [Call("builtin__fs__write_text", '{"path": "out.txt", "text": '), Call("x", "[1, 2]")]
    openai_server.add(Reply(tool_calls=calls, arg_chunk=4))
    model = provider(openai_server)
    events = await collect(model, ask())
    await model.aclose()
    broken, not_object = calls_of(events)
    assert (broken.arguments, broken.raw_arguments) == ({}, '{"path": "out.txt", "text": ')
    assert broken.arguments_error is not None and broken.arguments_error.startswith("arguments are not valid JSON")
    assert not_object.arguments == {} and not_object.arguments_error == "arguments must be a JSON object, not list"
    assert [c.id for c in (broken, not_object)] == ["call_scripted_0", "call_scripted_1"]


async def test_a_follow_up_sends_calls_and_results_in_openai_shape(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(tool_calls=[Call("builtin__fs__read_text", {"path": "a.txt"})]), Reply(text="alpha"))
    model = provider(openai_server)
    first = await collect(model, ask())
    call = calls_of(first)[0]
    follow_up = ModelRequest(
        messages=[
            ChatMessage("system", "You are Aries."),
            ChatMessage("user", "What is in a.txt?"),
            ChatMessage("assistant", "", tool_calls=[call]),
            ChatMessage("tool", '{"ok": true, "text": "alpha"}', tool_call_id=call.id, name=call.name),
        ]
    )
    second = await collect(model, follow_up)
    await model.aclose()
    assert text_of(second) == "alpha"
    assert openai_server.chat_requests()[1]["messages"][2:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_scripted_0",
                    "type": "function",
                    "function": {"name": "builtin__fs__read_text", "arguments": '{"path": "a.txt"}'},
                }
            ],
        },
        {"role": "tool", "content": '{"ok": true, "text": "alpha"}', "tool_call_id": "call_scripted_0"},
    ]


def _sse(data: object) -> str:
    return f"data: {json.dumps(data)}"


async def test_lenient_sse_comments_fields_missing_index_id_and_done(openai_server: ScriptedServer) -> None:
    delta = {"role": "assistant", "tool_calls": [{"function": {"name": "t", "arguments": {"a": 1}}}]}
    openai_server.add(
        Reply(
            raw_lines=[
                ": keep-alive",
                "event: message",
                "id: 1",
                _sse({"choices": [{"index": 0, "delta": {"content": "Hi"}}]}),
                _sse({"choices": [{"index": 0, "delta": {"content": " there"}}]}),  # no blank line between
                "",
                _sse({"choices": [{"index": 0, "delta": delta}]}),
                _sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
                "",
            ]  # no usage and no [DONE]: accepted after a finish_reason
        )
    )
    model = provider(openai_server)
    events = await collect(model, ask())
    await model.aclose()
    assert text_of(events) == "Hi there"
    (call,) = calls_of(events)
    assert (call.id, call.name, call.arguments) == ("call_0_0", "t", {"a": 1})
    assert events[-2] == Usage(0, 0, events[-2].total_ms, reported=False)  # type: ignore[union-attr]
    assert events[-1] == Done("tool_calls")


async def test_list_models(openai_server: ScriptedServer) -> None:
    model = provider(openai_server)
    assert await model.list_models() == ["llama-3", "qwen2.5"]
    await model.aclose()
    assert openai_server.requests[0].path == "/v1/models"


async def test_http_error_status_is_typed(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(status=503, error="server overloaded"))
    model = provider(openai_server)
    with pytest.raises(ProviderHTTPError) as caught:
        await collect(model, ask())
    await model.aclose()
    assert caught.value.status == 503
    assert caught.value.message == f"openai at {openai_server.base_url}/chat/completions: HTTP 503: server overloaded"


async def test_unknown_model_is_model_not_found(openai_server: ScriptedServer) -> None:
    model = provider(openai_server, model="gpt-9")
    with pytest.raises(ModelNotFound, match="The model `gpt-9` does not exist"):
        await collect(model, ask())
    await model.aclose()


async def test_error_mid_stream(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="partial answer", error_after=1, error="the engine failed"))
    model = provider(openai_server)
    with pytest.raises(ProviderStreamError, match="the engine failed"):
        await collect(model, ask())
    await model.aclose()


async def test_malformed_line_names_its_line(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="abcdefgh", malformed_after=1))
    model = provider(openai_server)
    with pytest.raises(MalformedStream) as caught:
        await collect(model, ask())
    await model.aclose()
    # line 1: role chunk, 2: blank, 3: first piece, 4: blank, 5: the malformed data line
    assert caught.value.line == 5


async def test_a_stream_cut_before_finish_is_malformed(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="abcdefgh", cut_after=1))
    model = provider(openai_server)
    with pytest.raises(MalformedStream, match=r"ended before a finish_reason or \[DONE\]"):
        await collect(model, ask())
    await model.aclose()


async def test_a_stalled_stream_times_out(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="abcdefgh", stall_after=1))
    model = provider(openai_server, idle=0.3)
    with pytest.raises(ProviderTimeout, match="stream stalled"):
        await collect(model, ask())
    assert await asyncio.to_thread(openai_server.disconnected.wait, 5)
    await model.aclose()


async def test_nothing_listening_is_unavailable() -> None:
    base = f"http://127.0.0.1:{free_port()}/v1"
    model = OpenAICompatProvider("qwen2.5", base)
    with pytest.raises(ProviderUnavailable, match=r"^openai at .*/v1/chat/completions: not reachable \(connection"):
        await collect(model, ask())
    await model.aclose()


async def test_a_redirect_is_refused_not_followed(openai_server: ScriptedServer) -> None:
    """Following it could carry the API key to another host."""
    target = f"{openai_server.url}/v1/elsewhere"
    openai_server.add(Reply(status=307, location=target))
    model = provider(openai_server, api_key="sk-secret")
    with pytest.raises(ProviderHTTPError, match=f"HTTP 307: redirect to {target} refused"):
        await collect(model, ask())
    await model.aclose()
    assert [r.path for r in openai_server.requests] == ["/v1/chat/completions"]


async def test_a_base_url_with_a_trailing_slash_works(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="ok"))
    model = OpenAICompatProvider("qwen2.5", openai_server.base_url + "/")
    assert text_of(await collect(model, ask())) == "ok"
    await model.aclose()


async def test_cancelling_the_consumer_closes_the_response_promptly(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="slow " * 40, chunk_size=5, delay=0.5))
    model = provider(openai_server)
    first = asyncio.Event()

    async def consume() -> None:
        async for event in model.stream(ask()):
            if isinstance(event, TextDelta | ToolCallEvent):
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 0.2
    assert await asyncio.to_thread(openai_server.disconnected.wait, 5)
    await model.aclose()


@pytest.mark.parametrize(
    "line",
    [
        'error: {"code": 500, "message": "slot unavailable", "type": "server_error"}',  # llama.cpp
        _sse({"object": "error", "message": "slot unavailable", "type": "BadRequestError", "code": 400}),  # vLLM
        _sse({"error": {"message": "slot unavailable", "type": "server_error"}}),  # OpenAI
    ],
)
async def test_each_servers_mid_stream_error_shape_is_a_stream_error(openai_server: ScriptedServer, line: str) -> None:
    openai_server.add(Reply(raw_lines=[_sse({"choices": [{"index": 0, "delta": {"content": "Hi"}}]}), "", line, ""]))
    model = provider(openai_server)
    with pytest.raises(ProviderStreamError, match="error at line 3: slot unavailable"):
        await collect(model, ask())
    await model.aclose()


async def test_a_base_url_without_v1_gets_a_hint(openai_server: ScriptedServer) -> None:
    model = OpenAICompatProvider("qwen2.5", openai_server.url)
    with pytest.raises(ProviderHTTPError, match=r"HTTP 404: .*Not Found \(is OPENAI_BASE_URL the part before"):
        await collect(model, ask())
    await model.aclose()


def test_one_provider_serves_successive_event_loops(openai_server: ScriptedServer) -> None:
    """As the CLI uses it: one ``asyncio.run`` per call, closed at the end of each."""
    model = provider(openai_server)

    async def once() -> list[str]:
        try:
            return await model.list_models()
        finally:
            await model.aclose()

    assert asyncio.run(once()) == ["llama-3", "qwen2.5"]
    assert asyncio.run(once()) == ["llama-3", "qwen2.5"]
