"""The conversation search index of a workspace is built in the background once the workbench is
settled (never on the start-up path), a search meanwhile answers "partial" and says how far, and a
turn just written in the TUI is findable within a second."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from app.aries_app import AriesApp
from screens.history_search import HistorySearchScreen
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import Messages, panes_show, until
from widgets.messages import ConversationEntry

SIZE = (120, 36)
REPO = Path(__file__).resolve().parents[2]
HOLD_WRITER = """
import sys, time
from services.history_search.store import HistoryIndex
index = HistoryIndex(sys.argv[1])
assert index.locks.try_writer()
print("held", flush=True)
time.sleep(60)
"""


def seeded(count: int) -> Path:
    """Workspace ``logbook`` with ``count`` conversations of two turns each, through the real writer."""
    workspace = WorkspaceManager().create("logbook")[0]
    for n in range(count):
        talk = workspace.new_transcript()
        for t, (question, answer) in enumerate([(f"day {n}: a grebe dives", "noted"), ("and a coot", "yes")], 1):
            turn = f"{talk.conversation_id}-t{t:04d}"
            talk.append("user", question, turn_id=turn)
            talk.append("assistant", answer, turn_id=turn, provider="offline")
    workspace.close()
    return workspace.root


def said(app: AriesApp, text: str) -> str:
    """The last notice in the open conversation that contains ``text`` ('' when none does)."""
    if app.session is None:
        return ""
    notes = [str(e.get("content")) for e in app.session.conversation.read().entries if e.get("role") == "notice"]
    return next((note for note in reversed(notes) if text in note), "")


async def test_the_index_is_built_after_the_workbench_settles_not_before() -> None:
    root = seeded(30)
    index_dir = root / "cache" / "conversations"
    app = AriesApp("logbook", conversation="new")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        assert not index_dir.exists(), "built on the start-up path"
        await app.settled.wait()
        await panes_show(pilot)
        indexer = app.commands.history_index
        await until(pilot, indexer.done.is_set, what="the background build")
        assert indexer.coverage is not None and not indexer.coverage.partial and indexer.coverage.total == 30
        assert (index_dir / "tantivy").is_dir()


async def test_a_search_during_the_build_says_how_far_then_finds_it_all() -> None:
    root = seeded(3)
    holder = subprocess.Popen(  # another Aries process indexing: holds the writer lock
        [sys.executable, "-c", HOLD_WRITER, str(root)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        app, messages = AriesApp("logbook", conversation="new"), Messages()
        async with app.run_test(size=SIZE, message_hook=messages) as pilot:
            await app.ready()
            await panes_show(pilot)
            await app.settled.wait()
            app.commands.run("/history search grebe")
            await until(pilot, lambda: said(app, "Nothing found"), messages=messages, what="the notice")
            assert "(partial: 0 of 3 indexed so far)" in said(app, "Nothing found")
            holder.kill()
            holder.wait()
            await until(pilot, app.commands.history_index.done.is_set, messages=messages, what="the build")
            app.commands.run("/history search grebe")
            await until(pilot, lambda: isinstance(app.screen, HistorySearchScreen), messages=messages)
            screen = app.screen
            assert isinstance(screen, HistorySearchScreen)
            assert not screen.result.partial and len(screen.result.hits) == 3
    finally:
        holder.kill()
        holder.wait()


async def test_a_turn_written_in_the_tui_is_findable_within_one_second() -> None:
    seeded(40)  # the background build may still be running: the search takes the lock between slices
    app, messages = AriesApp("logbook", conversation="new"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        messages.listen(app)
        await app.settled.wait()
        mark = messages.mark()
        app.commands.assistant.ask("the shearwater skims the swell")  # the offline model answers
        await messages.wait_for(
            pilot,
            ConversationEntry,
            lambda m: m.entry.get("role") == "user" and "shearwater" in str(m.entry.get("content")),
            since=mark,
        )
        written = time.monotonic()
        app.commands.run("/history search shearwater --role user")
        await until(pilot, lambda: isinstance(app.screen, HistorySearchScreen), messages=messages)
        found = time.monotonic() - written
        screen = app.screen
        assert isinstance(screen, HistorySearchScreen)
        assert [h.role for h in screen.result.hits] == ["user"]
        assert app.session is not None
        assert screen.result.hits[0].conversation_id == app.session.conversation.conversation_id
        assert found <= 1.0, f"findable after {found:.2f} s"


async def test_a_damaged_index_is_rebuilt_in_the_background_with_one_notice() -> None:
    from services.history_search.query import search
    from services.history_search.store import HistoryIndex

    root = seeded(5)
    assert len(search(HistoryIndex(root), "grebe").hits) == 5
    (root / "cache" / "conversations" / "tantivy" / "meta.json").write_text("{not json")
    app, messages = AriesApp("logbook", conversation="new"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        await until(pilot, app.commands.history_index.done.is_set, messages=messages, what="the build")
        note = await messages.notified(pilot, "rebuilt from the transcripts")
        assert "Tantivy files are missing or damaged" in note
        app.commands.run("/history search grebe")
        await until(pilot, lambda: isinstance(app.screen, HistorySearchScreen), messages=messages)
        screen = app.screen
        assert isinstance(screen, HistorySearchScreen) and len(screen.result.hits) == 5
        assert len([n for n in messages.notes() if "rebuilt" in n]) == 1
