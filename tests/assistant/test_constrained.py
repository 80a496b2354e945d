"""Valid arguments by construction (issue 33 item 2): a call the model started with arguments that
cannot be read gets a second pass for them constrained by the tool's schema (OpenAI-compatible
``response_format``, Ollama ``format``) — against the scripted servers, real HTTP on loopback. The
first pass never carries a constraint (a prose answer stays prose); a model whose settings say the
server does not constrain gets no second pass, and the gateway answers the broken arguments."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from services.assistant import TurnLoop
from services.assistant.constrained import started_name
from services.audit.log import AuditStore
from services.session.session import Session
from tests.assistant.conftest import provider_for
from tests.models.servers import Call, Reply, ScriptedServer

BROKEN = '{"path": "notes.txt"'  # cut short: not JSON


@pytest.fixture
def openai_only() -> Iterator[ScriptedServer]:
    """Native calls with broken JSON come from OpenAI-compatible servers (Ollama sends objects)."""
    server = ScriptedServer("openai").start()
    yield server
    server.stop()


def constraint(body: dict[str, Any]) -> Any:
    """The JSON Schema a request constrains its output to (None: free)."""
    if "format" in body:
        return body["format"]
    response_format = body.get("response_format")
    return response_format["json_schema"]["schema"] if response_format else None


def read_name(session: Session, server: ScriptedServer) -> str:
    _, names = TurnLoop(session, provider_for(server)).offered_tools()  # type: ignore[arg-type]
    return names.provider_name("builtin:fs:read_text")


def audited(session: Session, call_ids: list[str]) -> list[dict[str, Any]]:
    with AuditStore.for_workspace(session.workspace.root) as audit:
        return [row for row in audit.calls(limit=20) if row["call_id"] in call_ids]


def notices(session: Session) -> list[str]:
    return [e["content"] for e in session.conversation.read().entries if e.get("title") == "constrained decoding"]


async def test_a_prose_answer_is_never_constrained(session: Session, server: ScriptedServer) -> None:
    server.add(Reply(text="Notes are plain text."))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("read the file notes.txt")
    await loop.provider.aclose()
    assert outcome.text == "Notes are plain text." and len(server.chat_requests()) == 1
    assert constraint(server.chat_requests()[0]) is None


async def test_a_written_call_with_broken_arguments_gets_a_constrained_second_pass(
    session: Session, server: ScriptedServer
) -> None:
    name = read_name(session, server)
    block = f'<tool_call>\n{{"name": "{name}", "arguments": {BROKEN}\n</tool_call>'
    server.add(Reply(text=f"Let me read it.\n{block}"), Reply(text='{"path": "notes.txt"}'), Reply(text="Done."))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("read the file notes.txt")
    await loop.provider.aclose()
    first, second, third = server.chat_requests()
    assert constraint(first) is None and constraint(third) is None  # only the second pass is constrained
    schema = constraint(second)
    assert schema is not None and "path" in schema["properties"] and not second.get("tools")
    assert "could not be read" in second["messages"][-1]["content"]
    rows = audited(session, outcome.tool_calls)
    assert [(r["tool_name"], r["status"]) for r in rows] == [("builtin:fs:read_text", "success")]
    assert outcome.text == "Done." and "written again under the tool's schema" in notices(session)[0]
    refused = [e for e in session.conversation.read().entries if e.get("title") == "text tool call"]
    assert refused == []  # repaired: nothing is said to be "not run"


async def test_native_call_with_invalid_json_arguments_is_repaired(
    session: Session, openai_only: ScriptedServer
) -> None:
    server = openai_only
    name = read_name(session, server)
    server.add(
        Reply(tool_calls=[Call(name, BROKEN, id="c1")]),
        Reply(text='{"path": "notes.txt"}'),
        Reply(text="Read."),
    )
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("read the file notes.txt")
    await loop.provider.aclose()
    first, second, third = server.chat_requests()
    assert constraint(first) is None and constraint(third) is None
    assert constraint(second)["properties"]["path"]["type"] == "string"
    rows = audited(session, outcome.tool_calls)
    assert [(r["tool_name"], r["status"]) for r in rows] == [("builtin:fs:read_text", "success")]
    assert notices(session)


async def test_when_the_second_pass_fails_too_the_gateway_answers_the_broken_arguments(
    session: Session, openai_only: ScriptedServer
) -> None:
    server = openai_only
    name = read_name(session, server)
    server.add(Reply(tool_calls=[Call(name, BROKEN, id="c1")]), Reply(text="not json"), Reply(text="Sorry."))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("read the file notes.txt")
    await loop.provider.aclose()
    assert len(server.chat_requests()) == 3
    rows = audited(session, outcome.tool_calls)
    assert [(r["tool_name"], r["status"]) for r in rows] == [("builtin:fs:read_text", "denied")]  # InvalidInput
    assert "did not give them either" in notices(session)[0]


async def test_a_server_that_does_not_constrain_gets_no_second_pass(
    session: Session, openai_only: ScriptedServer
) -> None:
    server = openai_only
    session.workspace.update(models={"qwen2.5": {"constrained": False}})
    name = read_name(session, server)
    server.add(Reply(tool_calls=[Call(name, BROKEN, id="c1")]), Reply(text="Sorry."))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("read the file notes.txt")
    await loop.provider.aclose()
    assert len(server.chat_requests()) == 2 and all(constraint(body) is None for body in server.chat_requests())
    rows = audited(session, outcome.tool_calls)
    assert [(r["tool_name"], r["status"]) for r in rows] == [("builtin:fs:read_text", "denied")]  # InvalidInput
    assert not notices(session)


def test_the_tool_a_cut_short_call_names_is_found() -> None:
    assert started_name('<tool_call>{"name": "read_text", "arguments": {"path": "a') == "read_text"
    assert started_name("read it please") is None
