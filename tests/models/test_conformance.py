"""The scripted servers speak the real protocols: the official ``ollama`` and ``openai`` clients parse
every scripted reply — text, tool calls with their arguments, usage — and raise their own exception
types for the scripted errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.models.servers import Call, Reply, ScriptedServer

ollama = pytest.importorskip("ollama")
openai = pytest.importorskip("openai")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "builtin__fs__read_text",
            "description": "Read a text file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "builtin__fs__write_text",
            "description": "Write a text file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                "required": ["path", "text"],
            },
        },
    },
]
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "read notes.txt then write out.txt"}]
TWO_CALLS = [
    Call("builtin__fs__read_text", {"path": "notes.txt"}),
    Call("builtin__fs__write_text", {"path": "out.txt", "text": 'héllo {"quoted"}\nline'}),
]


# -- Ollama --------------------------------------------------------------------------------------
async def test_ollama_client_streams_text_with_usage(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="Hello from the scripted server.", chunk_size=3, prompt_tokens=26))
    client = ollama.AsyncClient(host=ollama_server.url)
    parts = [part async for part in await client.chat(model="llama3.2:3b", messages=MESSAGES, stream=True)]
    assert "".join(p.message.content or "" for p in parts) == "Hello from the scripted server."
    assert [p.done for p in parts].count(True) == 1 and parts[-1].done
    assert parts[-1].done_reason == "stop"
    assert parts[-1].prompt_eval_count == 26 and parts[-1].eval_count == 11


async def test_ollama_client_gets_whole_tool_calls(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="Let me look.", tool_calls=TWO_CALLS))
    client = ollama.AsyncClient(host=ollama_server.url)
    stream = await client.chat(model="llama3.2:3b", messages=MESSAGES, tools=TOOLS, stream=True)
    calls = [call for part in [p async for p in stream] for call in part.message.tool_calls or []]
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [(c.name, c.arguments) for c in TWO_CALLS]
    sent = ollama_server.chat_requests()[0]
    assert [t["function"]["name"] for t in sent["tools"]] == ["builtin__fs__read_text", "builtin__fs__write_text"]


async def test_ollama_client_non_stream(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="whole answer", tool_calls=TWO_CALLS[:1]))
    client = ollama.AsyncClient(host=ollama_server.url)
    response = await client.chat(model="llama3.2:3b", messages=MESSAGES, tools=TOOLS, stream=False)
    assert response.message.content == "whole answer" and response.done
    assert response.message.tool_calls is not None
    assert response.message.tool_calls[0].function.arguments == {"path": "notes.txt"}


async def test_ollama_client_lists_models(ollama_server: ScriptedServer) -> None:
    listing = await ollama.AsyncClient(host=ollama_server.url).list()
    assert [m.model for m in listing.models] == ["llama3.2:3b", "qwen2.5:7b"]
    assert listing.models[0].details is not None and listing.models[0].details.family == "llama"


@pytest.mark.parametrize(
    ("reply", "model", "status", "fragment"),
    [
        (Reply(status=500, error="out of memory"), "llama3.2:3b", 500, "out of memory"),
        (Reply(), "nope", 404, 'model "nope" not found'),
    ],
)
async def test_ollama_client_raises_response_error_for_http_errors(
    ollama_server: ScriptedServer, reply: Reply, model: str, status: int, fragment: str
) -> None:
    ollama_server.add(reply)
    client = ollama.AsyncClient(host=ollama_server.url)
    with pytest.raises(ollama.ResponseError) as caught:
        async for _ in await client.chat(model=model, messages=MESSAGES, stream=True):
            pass
    assert caught.value.status_code == status and fragment in caught.value.error


async def test_ollama_client_raises_response_error_mid_stream(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="partial answer", error_after=2, error="llama runner process has terminated"))
    client = ollama.AsyncClient(host=ollama_server.url)
    seen: list[str] = []
    with pytest.raises(ollama.ResponseError, match="llama runner process has terminated"):
        async for part in await client.chat(model="llama3.2:3b", messages=MESSAGES, stream=True):
            seen.append(part.message.content or "")
    assert "".join(seen) == "partial "


async def test_ollama_client_rejects_the_malformed_line(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text="abcdefgh", malformed_after=1))
    client = ollama.AsyncClient(host=ollama_server.url)
    with pytest.raises(json.JSONDecodeError):
        async for _ in await client.chat(model="llama3.2:3b", messages=MESSAGES, stream=True):
            pass


# -- OpenAI-compatible ---------------------------------------------------------------------------
def openai_client(server: ScriptedServer) -> Any:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10)


async def test_openai_client_streams_text_with_usage(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="Hello from the scripted server.", chunk_size=5, prompt_tokens=30))
    client = openai_client(openai_server)
    stream = await client.chat.completions.create(
        model="qwen2.5", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello from the scripted server."
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (30, 7)
    await client.close()


async def test_openai_client_assembles_interleaved_tool_call_deltas(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(tool_calls=TWO_CALLS, arg_chunk=3, interleave=True))
    client = openai_client(openai_server)
    stream = await client.chat.completions.create(model="qwen2.5", messages=MESSAGES, tools=TOOLS, stream=True)
    calls: dict[int, dict[str, str]] = {}
    indices: list[int] = []
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                indices.append(delta.index)
                slot = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] += delta.id or ""
                if delta.function is not None:
                    slot["name"] += delta.function.name or ""
                    slot["arguments"] += delta.function.arguments or ""
    assert indices[:4] == [0, 1, 0, 1]  # really interleaved
    assert finish == "tool_calls"
    assert [(calls[i]["name"], json.loads(calls[i]["arguments"])) for i in sorted(calls)] == [
        (c.name, c.arguments) for c in TWO_CALLS
    ]
    assert [calls[i]["id"] for i in sorted(calls)] == ["call_scripted_0", "call_scripted_1"]
    await client.close()


async def test_openai_client_non_stream(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="whole answer", tool_calls=TWO_CALLS[:1]))
    client = openai_client(openai_server)
    completion = await client.chat.completions.create(model="qwen2.5", messages=MESSAGES, tools=TOOLS)
    message = completion.choices[0].message
    assert message.content == "whole answer" and completion.choices[0].finish_reason == "tool_calls"
    assert message.tool_calls is not None
    assert json.loads(message.tool_calls[0].function.arguments) == {"path": "notes.txt"}
    assert completion.usage is not None and completion.usage.prompt_tokens == 11
    await client.close()


async def test_openai_client_lists_models(openai_server: ScriptedServer) -> None:
    client = openai_client(openai_server)
    assert [m.id async for m in client.models.list()] == ["qwen2.5", "llama-3"]
    await client.close()


@pytest.mark.parametrize(
    ("reply", "model", "error_type"),
    [
        (Reply(status=500, error="backend crashed"), "qwen2.5", "InternalServerError"),
        (Reply(status=401, error="bad key"), "qwen2.5", "AuthenticationError"),
        (Reply(), "nope", "NotFoundError"),
    ],
)
async def test_openai_client_raises_its_status_errors(
    openai_server: ScriptedServer, reply: Reply, model: str, error_type: str
) -> None:
    openai_server.add(reply)
    client = openai_client(openai_server)
    with pytest.raises(getattr(openai, error_type)):
        await client.chat.completions.create(model=model, messages=MESSAGES, stream=True)
    await client.close()


async def test_openai_client_raises_api_error_mid_stream(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="partial answer", error_after=1, error="context length exceeded"))
    client = openai_client(openai_server)
    stream = await client.chat.completions.create(model="qwen2.5", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError, match="context length exceeded"):
        async for _ in stream:
            pass
    await client.close()


async def test_openai_client_rejects_the_malformed_line(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="abcdefgh", malformed_after=1))
    client = openai_client(openai_server)
    stream = await client.chat.completions.create(model="qwen2.5", messages=MESSAGES, stream=True)
    with pytest.raises(json.JSONDecodeError):
        async for _ in stream:
            pass
    await client.close()


async def test_ollama_client_reads_show(ollama_server: ScriptedServer) -> None:
    """``/api/show`` as the official client reads it: the parameters text and the model's trained length."""
    ollama_server.num_ctx = 2048
    client = ollama.AsyncClient(host=ollama_server.url)
    shown = await client.show("llama3.2:3b")
    assert "num_ctx" in str(shown.parameters) and "2048" in str(shown.parameters)
    assert shown.modelinfo is not None and shown.modelinfo["llama.context_length"] == 131072
    with pytest.raises(ollama.ResponseError):
        await client.show("missing:1b")
