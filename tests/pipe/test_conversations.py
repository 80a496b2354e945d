"""Conversations that continue: the services (list, resolve, reopen, fork) and the command line
(``aries history``, ``aries ask --continue`` / ``--conversation ID``, ``aries -w W --continue``).

Real ``aries`` subprocesses with their own ``ARIES_HOME``, the real turn loop and transcripts, and a
scripted Ollama-protocol server on loopback that records what the model was sent."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.assistant import TurnLoop
from services.conversation.history import fork, list_summaries, resolve
from services.errors import InvalidInput, NotFound
from services.models.config import make_provider, resolve_model
from services.session.session import Session
from services.workspace.manager import Workspace, WorkspaceManager
from services.workspace.transcripts import read_transcript
from tests.models.servers import Reply, ScriptedServer
from tests.pipe.test_ask_cli import aries, model_env, one_line

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def ollama() -> Any:
    server = ScriptedServer("ollama").start()
    yield server
    server.stop()


@pytest.fixture
def workspace(aries_home: Path) -> Workspace:
    return WorkspaceManager().create("talk")[0]


async def turn(session: Session, server: ScriptedServer, text: str, answer: str) -> Any:
    server.add(Reply(text=answer))
    env = {"ARIES_MODEL": "ollama:llama3.2:3b", "OLLAMA_HOST": server.url}
    loop = TurnLoop(session, make_provider(resolve_model(None, env)))
    outcome = await loop.run(text)
    await loop.provider.aclose()
    return outcome


@contextlib.asynccontextmanager
async def opened(workspace: Workspace, conversation: str | None) -> AsyncIterator[Session]:
    session = Session(workspace, interactive=False, conversation=conversation)
    try:
        yield session
    finally:
        await session.aclose()


def touch_later(path: Path, seconds: float) -> None:
    stamp = time.time() + seconds
    os.utime(path, (stamp, stamp))


# -- services ----------------------------------------------------------------------------------------
async def test_list_reopen_and_continue_with_the_same_ids(workspace: Workspace, ollama: ScriptedServer) -> None:
    async with opened(workspace, None) as session:
        first = session.conversation.conversation_id
        await turn(session, ollama, "What is Tantivy?", "A search library.")
        await turn(session, ollama, "Written in?", "Rust.")
    async with opened(workspace, None) as session:
        second = session.conversation.conversation_id
        await turn(session, ollama, "Another topic", "Sure.")
    summaries = list_summaries(workspace)
    assert [s.conversation_id for s in summaries] == [first, second]  # least recently written first
    older = summaries[0]
    assert older.turns == 2 and older.first_prompt == "What is Tantivy?" and older.model == "ollama:llama3.2:3b"
    assert older.started_at is not None and older.updated_at is not None and older.started_at <= older.updated_at
    # Reopen the older one: the model sees its turns, the new turn continues its ids.
    async with opened(workspace, first) as session:
        outcome = await turn(session, ollama, "And its licence?", "MIT.")
    assert outcome.turn_id == f"{first}-t0003"
    sent = ollama.chat_requests()[-1]["messages"]
    assert [m["content"] for m in sent[1:5]] == ["What is Tantivy?", "A search library.", "Written in?", "Rust."]
    entries = read_transcript(workspace.transcripts_dir / f"{first}.ndjson").entries
    ids = [e["message_id"] for e in entries]
    assert ids == [f"{first}-{n:06d}" for n in range(1, len(ids) + 1)]
    # It is now the last one written: "last" and --continue mean it.
    assert resolve(workspace, "last") == first
    assert list_summaries(workspace)[-1].conversation_id == first


def test_resolve_by_prefix_and_its_errors(workspace: Workspace) -> None:
    a = workspace.new_transcript()
    a.append("user", "one", turn_id=f"{a.conversation_id}-t0001")
    b = workspace.new_transcript()
    b.append("user", "two", turn_id=f"{b.conversation_id}-t0001")
    touch_later(a.path, 5)
    assert resolve(workspace, "last") == a.conversation_id
    assert resolve(workspace, b.conversation_id[:-3]) == b.conversation_id
    with pytest.raises(InvalidInput, match="names 2 conversations"):
        resolve(workspace, "c-")
    with pytest.raises(NotFound, match="no conversation 'zz'"):
        resolve(workspace, "zz")
    empty = WorkspaceManager().create("empty")[0]
    with pytest.raises(NotFound, match="has no conversation yet"):
        resolve(empty, "last")


async def test_fork_after_an_earlier_turn(workspace: Workspace, ollama: ScriptedServer) -> None:
    async with opened(workspace, None) as session:
        source = session.conversation.conversation_id
        for n in range(1, 4):
            await turn(session, ollama, f"question {n}", f"answer {n}")
    before = (workspace.transcripts_dir / f"{source}.ndjson").read_bytes()
    target = fork(workspace, source, 2)
    assert (workspace.transcripts_dir / f"{source}.ndjson").read_bytes() == before
    entries = target.read().entries
    assert [e["content"] for e in entries if e["role"] == "user"] == ["question 1", "question 2"]
    assert {e["turn_id"] for e in entries if e.get("turn_id")} == {
        f"{target.conversation_id}-t0001",
        f"{target.conversation_id}-t0002",
    }
    assert all(e["forked_from"] == {"conversation_id": source, "turn_id": f"{source}-t0002"} for e in entries)
    assert entries[-1]["title"] == "fork"
    async with opened(workspace, target.conversation_id) as session:
        outcome = await turn(session, ollama, "question 3 again", "another answer")
    assert outcome.turn_id == f"{target.conversation_id}-t0003"
    sent = [m["content"] for m in ollama.chat_requests()[-1]["messages"]]
    assert "answer 2" in sent and "answer 3" not in sent
    summary = list_summaries(workspace)[-1]
    assert summary.conversation_id == target.conversation_id and summary.forked_from is not None
    with pytest.raises(InvalidInput, match="has 3 turn"):
        fork(workspace, source, 4)


# -- the command line ------------------------------------------------------------------------------------
def test_ask_continue_and_conversation_and_history(aries_home: Path, ollama: ScriptedServer) -> None:
    env = model_env(ollama)
    assert aries("workspace", "new", "talk", home=aries_home).returncode == 0
    ollama.add(Reply(text="Tantivy is a search library."))
    first = aries("-w", "talk", "ask", "--json", "What is Tantivy?", home=aries_home, **env)
    assert first.returncode == 0, first.stderr
    conversation = json.loads(first.stdout)["conversation_id"]
    ollama.add(Reply(text="It is written in Rust."))
    second = aries("-w", "talk", "ask", "-c", "--json", "What is it written in?", home=aries_home, **env)
    assert second.returncode == 0, second.stderr
    response = json.loads(second.stdout)
    assert response["conversation_id"] == conversation and response["turn_id"] == f"{conversation}-t0002"
    sent = [m["content"] for m in ollama.chat_requests()[-1]["messages"]]
    assert "What is Tantivy?" in sent and "Tantivy is a search library." in sent
    # A plain ask starts a conversation of its own; --conversation ID goes back to the first.
    ollama.add(Reply(text="Unrelated."), Reply(text="BM25."))
    other = json.loads(aries("-w", "talk", "ask", "--json", "Unrelated?", home=aries_home, **env).stdout)
    assert other["conversation_id"] != conversation
    assert [m["content"] for m in ollama.chat_requests()[-1]["messages"][1:]] == ["Unrelated?"]
    back = aries("-w", "talk", "ask", "--conversation", conversation[:-2], "Ranking?", home=aries_home, **env)
    assert back.returncode == 0 and "BM25." in back.stdout
    assert "It is written in Rust." in [m["content"] for m in ollama.chat_requests()[-1]["messages"]]
    # aries history: both conversations, the continued one last (written to most recently).
    listed = aries("-w", "talk", "history", "--json", home=aries_home)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [r["conversation_id"] for r in rows] == [other["conversation_id"], conversation]
    assert rows[-1]["turns"] == 3 and rows[-1]["first_prompt"] == "What is Tantivy?"
    assert rows[-1]["model"] == "ollama:llama3.2:3b"
    text = aries("-w", "talk", "history", home=aries_home)
    assert text.returncode == 0 and conversation in text.stdout.splitlines()[-1]
    assert "3 turn(s)" in text.stdout.splitlines()[-1]
    forked = aries("-w", "talk", "history", "fork", conversation, "--turn", "1", "--json", home=aries_home)
    assert forked.returncode == 0, forked.stderr
    assert json.loads(forked.stdout)["turns"] == 1


def test_continue_errors_are_one_line(aries_home: Path) -> None:
    no_workspace = aries("ask", "--continue", "hi", home=aries_home)
    assert no_workspace.returncode == 2 and "need a workspace" in one_line(no_workspace.stderr)
    assert aries("workspace", "new", "talk", home=aries_home).returncode == 0
    nothing = aries("-w", "talk", "ask", "--continue", "hi", home=aries_home)  # as `llm -c`: a new one, said
    assert nothing.returncode == 0 and "has no conversation yet: this starts a new one" in one_line(nothing.stderr)
    unknown = aries("-w", "talk", "ask", "--conversation", "c-nope", "hi", home=aries_home)
    assert unknown.returncode == 1 and "no conversation 'c-nope'" in one_line(unknown.stderr)
    both = aries("-w", "talk", "ask", "-c", "--conversation", "x", "hi", home=aries_home)
    assert both.returncode == 2 and "not allowed with" in both.stderr
    history = aries("history", home=aries_home)
    assert history.returncode == 2 and "history needs a workspace" in one_line(history.stderr)
    tui = aries("--continue", home=aries_home)
    assert tui.returncode == 2 and "need a workspace" in one_line(tui.stderr)


def test_the_tui_command_line_takes_continue() -> None:
    from app.cli import _opens_the_tui, build_parser

    for argv in (["-w", "x", "--continue"], ["-c", "-w", "x"], ["-w", "x", "--conversation", "c-1"]):
        assert _opens_the_tui(argv), argv
    assert not _opens_the_tui(["-w", "x", "ask", "--continue"])
    args = build_parser(subcommands=False).parse_args(["-w", "x", "--continue"])
    assert args.conversation == "last" and args.workspace == "x"


def test_ask_says_a_length_stop_and_the_context_it_used(aries_home: Path, ollama: ScriptedServer) -> None:
    assert aries("workspace", "new", "talk", home=aries_home).returncode == 0
    ollama.num_ctx = 2048
    ollama.add(Reply(text="cut sh", finish_reason="length"))
    done = aries("-w", "talk", "ask", "--json", "Tell me everything.", home=aries_home, **model_env(ollama))
    assert done.returncode == 0, done.stderr
    assert "stopped at its length limit" in one_line(done.stderr)
    response = json.loads(done.stdout)
    assert response["finish_reason"] == "length"
    assert response["context"]["window"] == 2048 and response["context"]["window_source"] == "provider"
    # Aries' thirteen tool schemas (≈4,700 tokens) do not fit a 2,048-token window; none matches the
    # message, so none is offered (services/assistant/tool_offer.py), and nothing is left out to fit.
    assert (
        response["context"]["tools_offered"]["offered"] == []
        and len(response["context"]["tools_offered"]["tools"]) == 13
    )
    assert response["context"]["left_out"]["tools"] == 0 and response["context"]["left_out"]["turns"] == 0
    transcript = Path(response["logs_ref"].split("#")[0])
    reports = [json.loads(line) for line in transcript.read_text().splitlines() if '"kind": "context"' in line]
    assert reports == []


def test_ask_that_recovers_from_a_server_overflow_exits_0(aries_home: Path) -> None:
    """Found by the 200-turn run: the turn was fitted again and answered, but ``aries ask`` exited 4
    with the server's first (overflow) error."""
    from tests.assistant.test_context_window import LLAMA_CPP_PYTHON

    server = ScriptedServer("openai").start()
    try:
        server.add(Reply(raw_lines=[]), Reply(status=400, error=LLAMA_CPP_PYTHON), Reply(text="fitted and answered"))
        env = {"ARIES_MODEL": "openai:qwen2.5", "OPENAI_BASE_URL": server.base_url}
        # the tools that match it (read, file) make the first request larger than the server's 512
        done = aries("ask", "--json", "read the file notes.txt " + "hello " * 30, home=aries_home, **env)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout)
    assert response["answer"] == "fitted and answered" and response["context"]["window"] == 512
