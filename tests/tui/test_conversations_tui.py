"""``/history`` lists the workspace's conversations (Enter resumes the highlighted one, ``f`` forks
it); ``/resume ID`` reopens one: the Transcript pane shows it, the model is sent its earlier turns,
and the next turn appends to it; ``/fork N`` continues a copy of the first N turns."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.aries_app import AriesApp
from screens.conversations import ConversationsScreen
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import SUFFIX, read_transcript
from tests.models.servers import Reply, ScriptedServer
from tests.tui.helpers import Messages, command, panes_show, settle, until
from widgets.messages import ConversationStarted
from widgets.transcript.pane import TranscriptPane

SIZE = (120, 36)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    server = ScriptedServer("ollama").start()
    monkeypatch.setenv("ARIES_MODEL", "ollama:llama3.2:3b")
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    yield server
    server.stop()


def seeded() -> tuple[str, str]:
    """Two conversations of workspace ``talk``: an older one of two turns, a newer one of one."""
    workspace = WorkspaceManager().create("talk")[0]
    older = workspace.new_transcript()
    for n, (question, answer) in enumerate([("first question", "first answer"), ("second question", "second")], 1):
        turn = f"{older.conversation_id}-t{n:04d}"
        older.append("user", question, turn_id=turn)
        older.append("assistant", answer, turn_id=turn, provider="ollama", model="llama3.2:3b")
    newer = workspace.new_transcript()
    newer.append("user", "yesterday's question", turn_id=f"{newer.conversation_id}-t0001")
    os.utime(older.path, (1_700_000_000, 1_700_000_000))
    workspace.close()
    return older.conversation_id, newer.conversation_id


def transcript_path(app: AriesApp, conversation_id: str) -> Path:
    return Path(app.manager.path_for("talk")) / "transcripts" / f"{conversation_id}{SUFFIX}"


def shown(app: AriesApp) -> list[str]:
    return [str(e["content"]) for e in app.screen_stack[0].query_one(TranscriptPane).entries()]


async def test_resume_by_prefix_shows_it_sends_its_turns_and_appends(server: ScriptedServer) -> None:
    older, newer = seeded()
    server.add(Reply("third answer"))
    app, messages = AriesApp("talk", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        messages.listen(app)  # the conversation signal's news
        assert app.session is not None and app.session.conversation.conversation_id == newer
        mark = messages.mark()
        await command(pilot, f"/resume {older[:-3]}")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        assert app.session.conversation.conversation_id == older
        assert shown(app) == ["first question", "first answer", "second question", "second"]
        assert app.screen_stack[0].query_one(TranscriptPane).border_subtitle == older
        await command(pilot, "third question")
        conversation = app.session.conversation
        await until(pilot, lambda: "third answer" in str(conversation.read().entries[-1:]), messages=messages)
        await settle(pilot)
    sent = [m["content"] for m in server.chat_requests()[-1]["messages"] if m["role"] in ("user", "assistant")]
    assert sent[-5:] == ["first question", "first answer", "second question", "second", "third question"]
    entries = read_transcript(transcript_path(app, older)).entries
    turns = [e["turn_id"] for e in entries if e["role"] == "user"]
    assert turns == [f"{older}-t0001", f"{older}-t0002", f"{older}-t0003"]


async def test_resume_of_an_unknown_conversation_is_one_error_line() -> None:
    _, newer = seeded()
    app, messages = AriesApp("talk", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        mark = messages.mark()
        await command(pilot, "/resume nosuch")
        note = await messages.notified(pilot, "no conversation 'nosuch'", since=mark)
        assert note.startswith("/resume") and "/history" in note  # the workbench's own command is named
        assert app.session is not None and app.session.conversation.conversation_id == newer


async def test_history_lists_newest_first_and_enter_resumes() -> None:
    older, newer = seeded()
    app, messages = AriesApp("talk", conversation="new"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        messages.listen(app)  # the conversation signal's news
        await command(pilot, "/history")
        await until(pilot, lambda: isinstance(app.screen, ConversationsScreen), messages=messages)
        screen = app.screen
        assert isinstance(screen, ConversationsScreen)
        assert [s.conversation_id for s in screen.summaries] == [newer, older]
        mark = messages.mark()
        await pilot.press("down", "enter")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        assert app.session is not None and app.session.conversation.conversation_id == older
        assert shown(app)[0] == "first question"
        assert app.screen.focused is not None and app.screen.focused.id == "prompt"


async def test_fork_keeps_the_first_turns_and_leaves_the_original() -> None:
    older, _ = seeded()
    app, messages = AriesApp("talk", conversation=older), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        messages.listen(app)  # the conversation signal's news
        mark = messages.mark()
        await command(pilot, "/fork 1")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        assert app.session is not None
        forked = app.session.conversation.conversation_id
        assert forked != older
        contents = shown(app)
        assert contents[:2] == ["first question", "first answer"] and "second question" not in contents
        assert "Forked from conversation" in contents[-1]
    original = read_transcript(transcript_path(app, older)).entries
    assert [e["content"] for e in original][-1] == "second"
