"""Memory extraction (offline rules and a model over the scripted Ollama/OpenAI loopback servers) and
the memory files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.context.memory import (
    extract_offline,
    extract_with_model,
    model_extractor,
    read_memory_file,
    write_memories,
)
from services.context.memory_model import SCHEMA, approx_tokens, batches
from services.context.memory_types import (
    MAX_MEMORIES,
    MAX_MEMORY_CHARS,
    Memory,
    MemoryExtractionFailed,
    MemorySource,
    SessionMessage,
    memory_id,
)
from services.context.sessions import SessionStore
from services.models.ollama import OllamaProvider
from services.models.openai_compat import OpenAICompatProvider
from tests.models.servers import Call, Reply, ScriptedServer


@pytest.fixture
def ollama_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer("ollama").start()
    yield server
    server.stop()


@pytest.fixture
def openai_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer("openai").start()
    yield server
    server.stop()


def msg(index: int, role: str, content: str, tool: str | None = None) -> SessionMessage:
    return SessionMessage("s1", index, role, content, "2026-01-01T09:00:00.000Z", tool)


# -- offline rules ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("role", "content", "category", "scope", "text"),
    [
        ("user", "I prefer dark themes.", "preferences", "user", "I prefer dark themes."),
        ("user", "I'd rather use pytest", "preferences", "user", "I'd rather use pytest"),
        ("user", "Always run the linter first.", "preferences", "user", "Always run the linter first."),
        ("system", "Never answer in French.", "preferences", "user", "Never answer in French."),
        ("user", "We decided to ship on Monday.", "decisions", "user", "We decided to ship on Monday."),
        ("user", "Let's go with Postgres.", "decisions", "user", "Let's go with Postgres."),
        ("assistant", "I'll use the cached index.", "decisions", "agent", "I'll use the cached index."),
        ("user", "TODO: rotate the keys", "tasks", "user", "Rotate the keys"),
        ("user", "- [ ] book the room", "tasks", "user", "Book the room"),
        ("user", "- fix the flaky test", "tasks", "user", "fix the flaky test"),
        ("user", "Remind me to call Bob.", "tasks", "user", "Remind me to call Bob."),
        ("user", "Remember that the VPN drops at noon.", "facts", "user", "Remember that the VPN drops at noon."),
        ("user", "My manager is Dana.", "facts", "user", "My manager is Dana."),
        ("user", "I am a data engineer.", "facts", "user", "I am a data engineer."),
        ("tool", "kernel: 6.8.0", "facts", "agent", "uname: kernel: 6.8.0"),
    ],
)
def test_cue_phrases_give_categorized_memories(role: str, content: str, category: str, scope: str, text: str) -> None:
    memories = extract_offline([msg(0, role, content, "uname" if role == "tool" else None)])
    assert [(m.category, m.scope, m.text) for m in memories] == [(category, scope, text)]
    assert memories[0].source == MemorySource("s1", 0)


@pytest.mark.parametrize(
    "content",
    [
        "Do I prefer tabs?",  # a question
        "```\n# TODO: inside code\nI prefer this in a fence\n```",
        "The weather is nice.",
        "fix the tests",  # an imperative that is not a list item
    ],
)
def test_no_memory_without_a_cue(content: str) -> None:
    assert extract_offline([msg(0, "user", content)]) == []


def test_assistant_imperative_bullets_are_not_user_tasks() -> None:
    assert extract_offline([msg(0, "assistant", "- fix the tests")]) == []


def test_duplicates_collapse_and_output_is_bounded() -> None:
    same = [msg(0, "user", "I prefer tabs."), msg(1, "user", "i  PREFER tabs"), msg(2, "user", "I prefer tabs!")]
    memories = extract_offline(same)
    assert [(m.text, m.source.message_index) for m in memories] == [("I prefer tabs.", 0)]
    many = [msg(i, "user", f"I prefer option number {i}.") for i in range(MAX_MEMORIES + 20)]
    assert len(extract_offline(many)) == MAX_MEMORIES
    long = extract_offline([msg(0, "user", "I prefer " + "very " * 200 + "long text")])
    assert len(long[0].text) <= MAX_MEMORY_CHARS and long[0].text.endswith("…")
    control = extract_offline([msg(0, "user", "I prefer\x1b[31m red\x07\ttext")])
    assert control[0].text == "I prefer [31m red text"


def test_extraction_is_deterministic_and_ids_ignore_case_and_spacing() -> None:
    messages = [msg(i, "user", f"I prefer tea {i}. TODO: buy milk {i}. My cat is Tom {i}.") for i in range(10)]
    assert extract_offline(messages) == extract_offline(list(messages))
    assert memory_id("facts", "My cat is Tom.") == memory_id("facts", "  my CAT is   tom ")
    assert memory_id("facts", "My cat is Tom.") != memory_id("tasks", "My cat is Tom.")


# -- memory files -------------------------------------------------------------------------------------
def test_memory_files_are_append_only_idempotent_and_keep_hand_edits(tmp_path: Path) -> None:
    first = Memory("preferences", "I prefer tabs.", MemorySource("s1", 0), "user")
    second = Memory("preferences", "I like short answers.", MemorySource("s1", 3), "user")
    paths = write_memories(tmp_path, [first])
    assert paths == [tmp_path / "user/memories/preferences.md"]
    path = paths[0]
    path.write_text(path.read_text() + "A note I typed by hand.\n")
    write_memories(tmp_path, [first, second])
    once = path.read_bytes()
    write_memories(tmp_path, [second, first])
    assert path.read_bytes() == once
    assert "A note I typed by hand.\n" in once.decode()
    entries = read_memory_file(path).entries
    assert [(e.id, e.text, e.source) for e in entries] == [
        (first.id, "I prefer tabs.", "s1#0"),
        (second.id, "I like short answers.", "s1#3"),
    ]
    # text that looks like an entry inside an entry does not count as one
    tricky = Memory("preferences", "I prefer - [m-0000000000000000] this", MemorySource("s1", 4), "user")
    write_memories(tmp_path, [tricky])
    assert len(read_memory_file(path).entries) == 3


# -- model extraction over the scripted servers ---------------------------------------------------------
CONVERSATION = [
    msg(0, "user", "Please keep answers short; I work in Lisbon."),
    msg(1, "tool", "python 3.12.1", "version"),
    msg(2, "assistant", "I will pin the version."),
]
ANSWER = {
    "memories": [
        {"category": "preferences", "text": "Keep answers short.", "message": 0},
        {"category": "facts", "text": "The user works in Lisbon.", "message": 0},
        {"category": "facts", "text": "Python 3.12.1 is installed.", "message": 1},
        {"category": "decisions", "text": "Pin the Python version.", "message": 2},
        {"category": "facts", "text": "the user works in lisbon", "message": 0},  # a duplicate
    ]
}


async def test_ollama_extraction_asks_for_json_and_validates_it(ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text=json.dumps(ANSWER)))
    provider = OllamaProvider("llama3.2:3b", ollama_server.url)
    try:
        memories = await extract_with_model(CONVERSATION, provider, token_budget=2000)
    finally:
        await provider.aclose()
    assert [(m.category, m.scope, m.text, m.source.message_index) for m in memories] == [
        ("preferences", "user", "Keep answers short.", 0),
        ("facts", "user", "The user works in Lisbon.", 0),
        ("facts", "agent", "Python 3.12.1 is installed.", 1),
        ("decisions", "agent", "Pin the Python version.", 2),
    ]
    sent = ollama_server.chat_requests()
    assert len(sent) == 1 and sent[0]["format"] == SCHEMA
    assert sent[0]["options"]["temperature"] == 0 and sent[0]["options"]["seed"] == 0
    assert "[1] tool (version): python 3.12.1" in sent[0]["messages"][1]["content"]


async def test_openai_extraction_uses_response_format(openai_server: ScriptedServer) -> None:
    openai_server.add(Reply(text="```json\n" + json.dumps(ANSWER) + "\n```"))
    provider = OpenAICompatProvider("qwen2.5", openai_server.base_url)
    try:
        memories = await extract_with_model(CONVERSATION, provider, token_budget=2000)
    finally:
        await provider.aclose()
    assert len(memories) == 4
    sent = openai_server.chat_requests()[0]
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (Reply(text="Sure! Here are the memories: none"), "not JSON"),
        (Reply(text=json.dumps({"items": []})), '"memories" list'),
        (Reply(text=json.dumps({"memories": ["x"]})), "memory 1 is not an object"),
        (Reply(text=json.dumps({"memories": [{"category": "gossip", "text": "x", "message": 0}]})), "'gossip'"),
        (Reply(text=json.dumps({"memories": [{"category": "facts", "text": " ", "message": 0}]})), "no text"),
        (Reply(text=json.dumps({"memories": [{"category": "facts", "text": "x", "message": 9}]})), "message 9"),
        (Reply(text=json.dumps({"memories": [{"category": "facts", "text": "x", "message": True}]})), "message True"),
        (Reply(status=500, error="out of memory"), "out of memory"),
        (Reply(text='{"memories": [', error_after=2), "scripted failure"),
        (Reply(tool_calls=[Call("fs_read", {"path": "x"})]), "called a tool"),
        (Reply(text='{"memories": [', finish_reason="length"), "cut at its length"),
    ],
)
async def test_every_model_failure_is_one_loud_typed_error(
    ollama_server: ScriptedServer, reply: Reply, says: str
) -> None:
    ollama_server.add(reply)
    provider = OllamaProvider("llama3.2:3b", ollama_server.url)
    try:
        with pytest.raises(MemoryExtractionFailed) as caught:
            await extract_with_model(CONVERSATION, provider, token_budget=2000)
    finally:
        await provider.aclose()
    assert says in caught.value.message and "ollama:llama3.2:3b" in caught.value.message
    assert "\n" not in caught.value.message


async def test_nothing_listening_is_a_loud_failure() -> None:
    provider = OllamaProvider("llama3.2:3b", "http://127.0.0.1:9")
    try:
        with pytest.raises(MemoryExtractionFailed, match="memory extraction by ollama"):
            await extract_with_model(CONVERSATION, provider, token_budget=2000)
    finally:
        await provider.aclose()


async def test_the_token_budget_splits_the_conversation_into_requests(ollama_server: ScriptedServer) -> None:
    messages = [msg(i, "user", f"message {i} " + "word " * 60) for i in range(6)]
    groups = batches(messages, token_budget=400)
    assert len(groups) > 1 and [m.index for g in groups for m, _ in g] == list(range(6))
    for _ in groups:
        ollama_server.add(Reply(text=json.dumps({"memories": []})))
    provider = OllamaProvider("llama3.2:3b", ollama_server.url)
    try:
        assert await extract_with_model(messages, provider, token_budget=400) == []
    finally:
        await provider.aclose()
    sent = ollama_server.chat_requests()
    assert len(sent) == len(groups)
    assert all(sum(approx_tokens(m["content"]) for m in body["messages"]) <= 400 for body in sent)
    huge = batches([msg(0, "user", "x" * 50_000)], token_budget=400)
    assert huge[0][0][1].endswith("[…truncated]") and approx_tokens(huge[0][0][1]) < 400
    with pytest.raises(MemoryExtractionFailed, match="too small"):
        batches(messages, token_budget=50)
    with pytest.raises(MemoryExtractionFailed, match="extraction requests"):
        batches([msg(i, "user", "y" * 2000) for i in range(40)], token_budget=400)


def test_commit_with_the_model_extractor_writes_its_memories(tmp_path: Path, ollama_server: ScriptedServer) -> None:
    ollama_server.add(Reply(text=json.dumps(ANSWER)))
    root = tmp_path / "context"
    session = SessionStore(root).create("s1")
    for m in CONVERSATION:
        session.append(m.role, m.content, tool_name=m.tool_name)
    provider = OllamaProvider("llama3.2:3b", ollama_server.url)
    report = session.commit(model_extractor(provider, token_budget=2000))
    assert len(report.memories) == 4 and session.messages() == []
    facts = [e.text for e in read_memory_file(root / "agent/memories/facts.md").entries]
    assert facts == ["Python 3.12.1 is installed."]
    # a model that fails: loud, and the messages stay active
    session.append("user", "I prefer tea.")
    ollama_server.add(Reply(text="not json"))
    with pytest.raises(MemoryExtractionFailed):
        session.commit(model_extractor(provider, token_budget=2000))
    assert [m.content for m in session.messages()] == ["I prefer tea."]
