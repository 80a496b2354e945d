"""The Ollama provider against the scripted Ollama server: events, what is sent, typed errors,
cancellation."""

from __future__ import annotations

import asyncio
import socket
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
    ToolSchema,
    Usage,
)
from services.models.ollama import OllamaProvider, ollama_base_url
from tests.models.helpers import ask, calls_of, collect, text_of
from tests.models.servers import Call, Reply, ScriptedServer

READ = ToolSchema(
    "builtin__fs__read_text", "Read a text file", {"type": "object", "properties": {"path": {"type": "string"}}}
)


def provider(server: ScriptedServer, model: str = "llama3.2:3b", **timeouts: float) -> OllamaProvider:
    return OllamaProvider(model, server.url, timeouts=Timeouts(**timeouts))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_text_streams_as_deltas_then_usage_then_done(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="The answer is 42.", chunk_size=4, prompt_tokens=26, completion_tokens=5))
    model = provider(ollama_server)
    events = await collect(model, ask())
    await model.aclose()
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["The ", "answ", "er i", "s 42", "."]
    usage, done = events[-2], events[-1]
    assert isinstance(usage, Usage) and (usage.prompt_tokens, usage.completion_tokens) == (26, 5)
    assert usage.total_ms >= 0 and done == Done("stop")
    sent = ollama_server.chat_requests()[0]
    assert sent == {
        "model": "llama3.2:3b",
        "messages": [{"role": "user", "content": "What is in notes.txt?"}],
        "stream": True,
    }


async def test_tools_and_options_are_sent_in_ollama_shape(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="ok"))
    model = provider(ollama_server)
    options = ModelOptions(temperature=0.0, max_tokens=64, seed=7, context_window=4096)
    await collect(model, ask(tools=[READ], options=options))
    await model.aclose()
    sent = ollama_server.chat_requests()[0]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {"name": READ.name, "description": READ.description, "parameters": READ.parameters},
        }
    ]
    assert sent["options"] == {"temperature": 0.0, "num_predict": 64, "seed": 7, "num_ctx": 4096}


async def test_whole_tool_calls_get_deterministic_ids_from_the_turn(ollama_server: ScriptedServer) -> None:
    calls = [Call("builtin__fs__read_text", {"path": "a.txt"}), Call("builtin__fs__read_text", {"path": "b.txt"})]
    ollama_server.add(Reply(text="Reading.", tool_calls=calls), Reply(tool_calls=calls[:1]))
    model = provider(ollama_server)
    first = await collect(model, ask(tools=[READ]))
    assert [(c.id, c.name, c.arguments) for c in calls_of(first)] == [
        ("ollama_0_0", "builtin__fs__read_text", {"path": "a.txt"}),
        ("ollama_0_1", "builtin__fs__read_text", {"path": "b.txt"}),
    ]
    assert calls_of(first)[0].raw_arguments == '{"path": "a.txt"}' and first[-1] == Done("tool_calls")
    # The next turn sends the calls and their results back, and gets ids from its own position.
    call = calls_of(first)[0]
    follow_up = ModelRequest(
        messages=[
            ChatMessage("user", "What is in a.txt?"),
            ChatMessage("assistant", "Reading.", tool_calls=[call]),
            ChatMessage("tool", "alpha", tool_call_id=call.id, name=call.name),
        ],
        tools=[READ],
    )
    second = await collect(model, follow_up)
    await model.aclose()
    assert [c.id for c in calls_of(second)] == ["ollama_1_0"]
    sent = ollama_server.chat_requests()[1]["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": "Reading.",
        "tool_calls": [{"function": {"name": "builtin__fs__read_text", "arguments": {"path": "a.txt"}}}],
    }
    assert sent[2] == {"role": "tool", "content": "alpha", "tool_name": "builtin__fs__read_text"}


async def test_lenient_lines_ids_and_string_arguments(ollama_server: ScriptedServer) -> None:
    ollama_server.add(
        Reply(
            raw_lines=[
                '{"model":"m","message":{"role":"assistant","content":"hi"},"done":false}',
                "",
                '{"model":"m","message":{"role":"assistant","content":"","tool_calls":['
                '{"id":"call_x","function":{"index":0,"name":"t","arguments":"{\\"a\\": 1}"}},'
                '{"function":{"name":"u","arguments":"{oops"}}]},"done":false}',
                '{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}',
            ]
        )
    )
    model = provider(ollama_server)
    events = await collect(model, ask())
    await model.aclose()
    assert text_of(events) == "hi"
    first, second = calls_of(events)
    assert (first.id, first.arguments, first.arguments_error) == ("call_x", {"a": 1}, None)
    assert (second.id, second.arguments, second.raw_arguments) == ("ollama_0_1", {}, "{oops")
    assert second.arguments_error is not None and "not valid JSON" in second.arguments_error
    assert events[-2] == Usage(0, 0, events[-2].total_ms)  # type: ignore[union-attr]


async def test_list_models(ollama_server: ScriptedServer) -> None:
    ollama_server.models = ["qwen2.5:7b", "llama3.2:3b"]
    model = provider(ollama_server)
    assert await model.list_models() == ["llama3.2:3b", "qwen2.5:7b"]
    await model.aclose()


async def test_http_error_status_is_typed_and_names_provider_url_and_body(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(status=500, error="llama runner: out of memory"))
    model = provider(ollama_server)
    with pytest.raises(ProviderHTTPError) as caught:
        await collect(model, ask())
    await model.aclose()
    assert caught.value.status == 500
    assert caught.value.message == f"ollama at {ollama_server.url}/api/chat: HTTP 500: llama runner: out of memory"


async def test_unknown_model_is_model_not_found(ollama_server: ScriptedServer) -> None:
    model = provider(ollama_server, model="mistral")
    with pytest.raises(ModelNotFound, match='model "mistral" not found'):
        await collect(model, ask())
    await model.aclose()


async def test_error_mid_stream_after_the_text_so_far(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="partial answer", error_after=2, error="llama runner process has terminated"))
    model = provider(ollama_server)
    seen: list[str] = []
    with pytest.raises(ProviderStreamError, match="error at line 3: llama runner process has terminated"):
        async for event in model.stream(ask()):
            if isinstance(event, TextDelta):
                seen.append(event.text)
    await model.aclose()
    assert "".join(seen) == "partial "


async def test_malformed_line_names_its_line(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="abcdefgh", malformed_after=1))
    model = provider(ollama_server)
    with pytest.raises(MalformedStream) as caught:
        await collect(model, ask())
    await model.aclose()
    assert caught.value.line == 2 and "malformed stream at line 2" in caught.value.message


async def test_a_stream_cut_before_done_is_malformed(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="abcdefgh", cut_after=1))
    model = provider(ollama_server)
    with pytest.raises(MalformedStream, match="ended before its final line"):
        await collect(model, ask())
    await model.aclose()


async def test_a_stalled_stream_times_out_and_the_connection_is_closed(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="abcdefgh", stall_after=1))
    model = provider(ollama_server, idle=0.3)
    started = time.monotonic()
    with pytest.raises(ProviderTimeout, match="stream stalled: no data for 0.3s after line 1"):
        await collect(model, ask())
    assert time.monotonic() - started < 2
    assert await asyncio.to_thread(ollama_server.disconnected.wait, 5)
    await model.aclose()


async def test_no_first_byte_in_time_is_a_timeout(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="late", delay=2.0))
    model = provider(ollama_server, first_byte=0.3)
    with pytest.raises(ProviderTimeout, match="no answer within 0.3s"):
        await collect(model, ask())
    await model.aclose()


async def test_nothing_listening_is_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    model = OllamaProvider("llama3.2", url)
    with pytest.raises(ProviderUnavailable) as caught:
        await collect(model, ask())
    assert caught.value.message == f"ollama at {url}/api/chat: not reachable (connection refused)"
    with pytest.raises(ProviderUnavailable, match="not reachable"):
        await model.list_models()
    await model.aclose()


async def test_cancelling_the_consumer_closes_the_response_promptly(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="slow " * 40, chunk_size=5, delay=0.5))
    model = provider(ollama_server)
    first = asyncio.Event()
    received: list[str] = []

    async def consume() -> None:
        async for event in model.stream(ask()):
            if isinstance(event, TextDelta):
                received.append(event.text)
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 0.2
    assert await asyncio.to_thread(ollama_server.disconnected.wait, 5)
    assert received == ["slow "]
    await model.aclose()


async def test_closing_the_stream_early_closes_the_response(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="slow " * 40, chunk_size=5, delay=0.3))
    model = provider(ollama_server)
    stream = model.stream(ask())
    assert isinstance(await anext(stream), TextDelta)
    await stream.aclose()  # type: ignore[attr-defined]
    assert await asyncio.to_thread(ollama_server.disconnected.wait, 5)
    await model.aclose()


@pytest.mark.parametrize(
    ("host", "url"),
    [
        (None, "http://127.0.0.1:11434"),
        ("", "http://127.0.0.1:11434"),
        ("0.0.0.0", "http://0.0.0.0:11434"),
        ("gpu-box:8000", "http://gpu-box:8000"),
        (":56789", "http://127.0.0.1:56789"),
        ("http://gpu-box", "http://gpu-box:80"),
        ("https://gpu-box", "https://gpu-box:443"),
        ("https://gpu-box:56789/ollama/", "https://gpu-box:56789/ollama"),
        ("[::1]:9000", "http://[::1]:9000"),
    ],
)
def test_ollama_host_is_read_as_ollama_reads_it(host: str | None, url: str) -> None:
    assert ollama_base_url(host) == url
