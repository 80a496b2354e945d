"""Structured output on the wire: the providers put a profile's ``output_schema`` where the official
clients put it (Ollama ``format``; OpenAI-compatible ``response_format`` of type ``json_schema``),
and the scripted servers answer such requests as the real ones do (the clients parse the JSON text)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.models.base import ChatMessage, ModelRequest
from services.models.ollama import OllamaProvider
from services.models.openai_compat import OpenAICompatProvider
from tests.models.servers import Reply, ScriptedServer

ollama = pytest.importorskip("ollama")
openai = pytest.importorskip("openai")

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["summary"],
    "properties": {"summary": {"type": "string"}},
}
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "summarise"}]
ANSWER = json.dumps({"summary": "ok"})


def request() -> ModelRequest:
    return ModelRequest(messages=[ChatMessage(role="user", content="summarise")], output_schema=SCHEMA)


async def test_ollama_format_is_where_the_official_client_puts_it(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text=ANSWER))
    client = ollama.AsyncClient(host=ollama_server.url)
    parts = [p async for p in await client.chat(model="llama3.2:3b", messages=MESSAGES, format=SCHEMA, stream=True)]
    assert json.loads("".join(p.message.content or "" for p in parts)) == {"summary": "ok"}
    sent = ollama_server.chat_requests()[0]
    ours = OllamaProvider("llama3.2:3b", ollama_server.url).payload(request())
    assert sent["format"] == ours["format"] == SCHEMA


async def test_openai_response_format_is_the_json_schema_shape(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text=ANSWER))
    ours = OpenAICompatProvider("qwen2.5", openai_server.base_url).payload(request())
    assert ours["response_format"] == {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}
    client = openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="x", max_retries=0, timeout=10)
    stream = await client.chat.completions.create(
        model="qwen2.5",
        messages=MESSAGES,  # type: ignore[arg-type]
        response_format=ours["response_format"],
        stream=True,
    )
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
    await client.close()
    assert json.loads(text) == {"summary": "ok"}
    assert openai_server.chat_requests()[0]["response_format"] == ours["response_format"]
