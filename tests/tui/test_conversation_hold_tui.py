"""One conversation, one writer at a time (issue 30 item 7): while the TUI shows a conversation, a real
``aries -w W ask -c`` subprocess is refused with the TUI's pid and exit code 5, and writes nothing;
after ``/new`` the hold has moved and the same command appends its turn; ``/resume`` of a conversation
another process holds is one error line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.aries_app import AriesApp
from app.cli._common import EXIT_CONVERSATION_BUSY
from services.conversation import Conversation
from services.conversation.hold import ConversationBusy, hold_conversation
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import SUFFIX, Transcript, read_transcript
from tests.models.servers import Reply, ScriptedServer
from tests.pipe.test_ask_cli import aries, model_env, one_line
from tests.tui.helpers import Messages, command, panes_show, settle
from widgets.messages import ConversationStarted

SIZE = (120, 36)
pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def ollama() -> Iterator[ScriptedServer]:
    server = ScriptedServer("ollama").start()
    yield server
    server.stop()


def seeded() -> tuple[Path, str]:
    """Workspace ``talk`` with one conversation of one turn: its folder and the conversation's id."""
    workspace = WorkspaceManager().create("talk")[0]
    transcript = workspace.new_transcript()
    turn = f"{transcript.conversation_id}-t0001"
    transcript.append("user", "the first question", turn_id=turn)
    transcript.append("assistant", "the first answer", turn_id=turn, provider="offline")
    root = workspace.root
    workspace.close()
    return root, transcript.conversation_id


async def test_ask_continue_is_refused_while_the_tui_shows_it_and_allowed_after_new(
    aries_home: Path, ollama: ScriptedServer
) -> None:
    root, conversation = seeded()
    path = root / "transcripts" / f"{conversation}{SUFFIX}"
    before = path.read_bytes()
    app, messages = AriesApp("talk", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        assert app.session is not None and app.session.conversation.conversation_id == conversation
        ollama.add(Reply(text="never sent"))
        refused = await asyncio.to_thread(
            aries, "-w", "talk", "ask", "-c", "a second writer?", home=aries_home, **model_env(ollama)
        )
        assert refused.returncode == EXIT_CONVERSATION_BUSY == 5, refused.stderr
        line = one_line(refused.stderr)
        assert f"conversation {conversation} is open in another Aries (pid {os.getpid()})" in line
        assert "start a new one without -c" in line
        assert path.read_bytes() == before and ollama.chat_requests() == []  # nothing sent, nothing written
        # --conversation ID is the same writer as -c.
        by_id = await asyncio.to_thread(
            aries, "-w", "talk", "ask", "--conversation", conversation, "hi", home=aries_home, **model_env(ollama)
        )
        assert by_id.returncode == 5 and str(os.getpid()) in one_line(by_id.stderr)
        # /new moves the hold: the stored conversation is free for `ask -c`.
        messages.listen(app)
        mark = messages.mark()
        await command(pilot, "/new")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        assert app.session.conversation.conversation_id != conversation
        allowed = await asyncio.to_thread(
            aries, "-w", "talk", "ask", "--conversation", conversation, "now?", home=aries_home, **model_env(ollama)
        )
        assert allowed.returncode == 0, allowed.stderr
        assert "never sent" in allowed.stdout
        # /resume of it takes the hold back: refused again.
        await command(pilot, f"/resume {conversation}")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        await settle(pilot)
        again = await asyncio.to_thread(
            aries, "-w", "talk", "ask", "--conversation", conversation, "again?", home=aries_home, **model_env(ollama)
        )
        assert again.returncode == 5, again.stderr
    entries = read_transcript(path).entries
    assert [e["content"] for e in entries if e["role"] == "user"] == ["the first question", "now?"]
    # Closed: nothing holds it any more.
    assert not (root / "transcripts" / ".holds" / f"{conversation}.json").exists()


async def test_resume_of_a_conversation_held_elsewhere_is_one_line(aries_home: Path) -> None:
    root, conversation = seeded()
    app, messages = AriesApp("talk", conversation="new"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        assert app.session is not None
        current = app.session.conversation.conversation_id
        with hold_conversation(root / "transcripts", conversation, purpose="ask"):
            mark = messages.mark()
            await command(pilot, f"/resume {conversation}")
            note = await messages.notified(pilot, "is open in another Aries", since=mark)
            assert f"pid {os.getpid()}" in note and "\n" not in note
            assert app.session.conversation.conversation_id == current  # it stays where it was
            assert app.session.hold is not None and app.session.hold.conversation_id == current


def test_a_sigkilled_holder_does_not_block(aries_home: Path, tmp_path: Path) -> None:
    """A holder killed with SIGKILL leaves its record behind; the OS lock went with it, so the next
    writer takes the conversation (and replaces the stale record)."""
    root, conversation = seeded()
    holds = root / "transcripts"
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from services.conversation.hold import hold_conversation\n"
        f"hold = hold_conversation(Path({str(holds)!r}), {conversation!r}, purpose='tui')\n"
        "print('held', flush=True)\n"
        "time.sleep(600)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        refused = aries("-w", "talk", "ask", "-c", "hi", home=aries_home)
        assert refused.returncode == 5 and f"(pid {child.pid})" in one_line(refused.stderr)
        # A writer that does not hold (a one-shot command's tool call, a plan) is refused at its write.
        before = (holds / f"{conversation}{SUFFIX}").read_bytes()
        with pytest.raises(ConversationBusy, match=f"pid {child.pid}"):
            Conversation(Transcript(holds, conversation)).notice("an interleaved entry")
        assert (holds / f"{conversation}{SUFFIX}").read_bytes() == before
    finally:
        child.kill()
        child.wait()
    record = holds / ".holds" / f"{conversation}.json"
    assert record.exists() and f'"pid": {child.pid}' in record.read_text()  # stale, left by the dead holder
    allowed = aries("-w", "talk", "ask", "-c", "hi", home=aries_home)  # the offline model answers
    assert allowed.returncode == 0, allowed.stderr
    assert not record.exists()


async def test_the_tui_opened_on_a_conversation_being_written_starts_a_new_one(aries_home: Path) -> None:
    root, conversation = seeded()
    with hold_conversation(root / "transcripts", conversation, purpose="ask"):
        app, messages = AriesApp("talk", conversation="last"), Messages()
        async with app.run_test(size=SIZE, message_hook=messages) as pilot:
            await app.ready()
            await panes_show(pilot)
            note = await messages.notified(pilot, "is open in another Aries")
            assert f"pid {os.getpid()}" in note
            assert app.session is not None and app.session.conversation.conversation_id != conversation
            assert app.session.hold is not None and app.session.hold.conversation_id != conversation
