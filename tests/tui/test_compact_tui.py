"""``/compact`` in the TUI (issue 30 item 2) against the scripted Ollama server: the summary is written
in a worker and shown as a transcript entry, ``/compact show`` reads it, ``/compact edit`` takes the
operator's editor (a real subprocess), ``/compact undo`` takes the last back; the next request carries
the summary as data and the meter moves."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from app.aries_app import AriesApp
from services.workspace.manager import Workspace
from tests.models.servers import Reply, ScriptedServer
from tests.tui.helpers import Messages, settle, until
from tests.tui.test_assistant_tui import SIZE, entries, frozen_time, server, workspace
from tests.tui.test_brought_back_tui import FACT, ask, converse, script
from tests.tui.test_meter_tui import fixed_conversation

__all__ = ["frozen_time", "server", "workspace"]  # the fixtures, used by name

SUMMARY = "The operator keeps the spare generator key in the blue toolbox behind the greenhouse."


async def command(pilot: Pilot[Any], app: AriesApp, line: str) -> None:
    app.screen.query_one("#prompt").focus()
    await pilot.press(*line, "enter")
    await settle(pilot)


def compactions(app: AriesApp) -> list[dict[str, Any]]:
    return [e for e in entries(app) if e.get("kind") == "compaction"]


async def compacted(pilot: Pilot[Any], app: AriesApp) -> None:
    await converse(pilot, app)
    await command(pilot, app, "/compact")
    await until(pilot, lambda: bool(compactions(app)) and app.commands.compact.worker is None)
    await settle(pilot)


async def test_compact_show_edit_and_undo(
    server: ScriptedServer, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(server, workspace)
    server.add(Reply(text=SUMMARY, prompt_tokens=0), Reply(text="In the blue toolbox.", prompt_tokens=0))
    editor = tmp_path / "editor.sh"  # the operator's editor: rewrites the file it is given
    editor.write_text('#!/bin/sh\nprintf "Edited: the key is in the blue toolbox.\\n" > "$1"\n')
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    app = AriesApp("demo")
    heard = Messages()
    async with app.run_test(size=SIZE, message_hook=heard) as pilot:
        await compacted(pilot, app)
        written = compactions(app)
        assert [e["action"] for e in written] == ["summary"] and written[0]["summary"] == SUMMARY
        summary_request = server.chat_requests()[-1]
        assert FACT in str(summary_request["messages"][-1]["content"])  # the left-out turn, to summarise
        pane = app.screen.query_one("#transcript")
        shown = [str(w.render()) for w in pane.query("TranscriptEntry")]
        assert any("summary k1 of turns 1–" in text and SUMMARY in text for text in shown)
        await command(pilot, app, "/compact show")
        said = [e for e in entries(app) if e.get("role") == "notice" and e.get("title") == "compact"]
        assert said and said[-1]["content"].startswith("Summary k1 of turns 1–") and SUMMARY in said[-1]["content"]
        await command(pilot, app, "/compact edit")
        await until(pilot, lambda: len(compactions(app)) == 2)
        assert compactions(app)[-1]["action"] == "edit"
        assert compactions(app)[-1]["summary"] == "Edited: the key is in the blue toolbox."
        # the next request carries the summary in force, as data; the meter counts its part
        await ask(pilot, app, "Where is the key?")
        sent = str(server.chat_requests()[-1]["messages"][-1]["content"])
        assert "<<<untrusted summary of earlier turns 1-" in sent and "Edited: the key" in sent
        assert app.meter is not None and app.meter.summary > 0
        assert any("Summary k1 of turns 1–" in note for note in heard.notes())  # the worker's notice
        await command(pilot, app, "/compact undo")
        await command(pilot, app, "/compact undo")
        assert [e["action"] for e in compactions(app)] == ["summary", "edit", "undo", "undo"]
        said = [e for e in entries(app) if e.get("title") == "compact"]
        assert said[-1]["content"].startswith("Summary undone: none is in force now.")


async def test_compact_with_the_offline_model_says_so_in_one_line(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARIES_MODEL", "offline")
    app = AriesApp("demo")
    heard = Messages()
    async with app.run_test(size=SIZE, message_hook=heard) as pilot:
        await app.ready()
        await command(pilot, app, "/compact")
        await settle(pilot)
        assert compactions(app) == []
        errors = heard.notes(severity="error")
        assert len(errors) == 1 and "The offline provider cannot write a summary" in errors[0]
        assert "\n" not in errors[0]


def test_snapshot_a_compaction_entry(
    frozen_time: None, snap_compare: Any, server: ScriptedServer, workspace: Workspace
) -> None:
    """You should see, at 160×48, the transcript ending with the answer "In the blue toolbox.", then an
    "aries" entry "summary k1 of turns 1–4, written by ollama:llama3.2:3b (/compact show · edit · undo;
    sent to the model as data when those turns are left out)" followed by the summary "The operator
    keeps the spare generator key in the blue toolbox behind the greenhouse." (the summary covers
    turns 1–4, the ones the last request left out); the header's meter as the last request left it
    ("ctx 583/700 full"); the Context pane with turn 1 brought back."""
    fixed_conversation(workspace)
    script(server, workspace)
    server.add(Reply(text=SUMMARY, prompt_tokens=0))

    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, AriesApp)
        await compacted(pilot, app)
        app.clear_notifications()  # the "written" toast expires on its own

    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=run_before)
