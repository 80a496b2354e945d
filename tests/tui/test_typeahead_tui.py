"""Type-ahead in the workbench (issue 34 item 5), against a scripted Ollama-protocol server: a line
sent while a turn runs is queued below the prompt, can be taken back to edit (Esc) or removed (Esc
again), and is sent when the turn ends — after its approval wait — under what is in force then;
Ctrl+X cancels only the running turn and says how many remain."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from services.workspace.manager import Workspace, WorkspaceManager
from tests.models.servers import Call, Reply, ScriptedServer
from tests.tui.helpers import Messages, settle, until
from widgets.prompt.queued import QueuedLines

SIZE = (160, 48)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    server = ScriptedServer("ollama").start()
    monkeypatch.setenv("ARIES_MODEL", "ollama:llama3.2:3b")
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    yield server
    server.stop()


@pytest.fixture
def workspace() -> Workspace:
    workspace, _ = WorkspaceManager().create("demo")
    (workspace.root / "notes.txt").write_text("the notes\n")
    return workspace


def tool_name(tool_id: str) -> str:
    from services.models.toolnames import ToolNameMap
    from services.policy import default_policy
    from services.tools.builtin import default_registry
    from services.tools.records import describe_tools

    enabled = [t["id"] for t in describe_tools(default_registry(), default_policy()) if t["enabled"]]
    return ToolNameMap(enabled).provider_name(tool_id)


def entries(app: AriesApp) -> list[dict[str, Any]]:
    assert app.session is not None
    return app.session.conversation.read().entries


def said(app: AriesApp) -> list[tuple[str, str]]:
    """(role, content) of the user and assistant entries, in order."""
    return [(e["role"], e["content"]) for e in entries(app) if e["role"] in ("user", "assistant")]


def strip(app: AriesApp) -> QueuedLines:
    return app.screen.query_one(QueuedLines)


def prompt_value(app: AriesApp) -> str:
    return str(app.screen.query_one("#prompt").value)  # type: ignore[attr-defined]


async def test_a_queued_message_queued_edited_removed_and_sent_after_the_approval_wait(
    server: ScriptedServer, workspace: Workspace
) -> None:
    server.add(
        Reply(tool_calls=[Call(tool_name("builtin:fs:write_text"), {"path": "out.txt", "text": "hi\n"})]),
        Reply(text="Written."),
        Reply(text="The notes say: the notes."),
    )
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"write hi to out.txt", "enter")
        await until(pilot, lambda: app.session is not None and len(app.session.approvals) == 1)
        # Two lines typed while the turn waits for its approval: both queued, neither sent.
        await pilot.press(*"what do the notes say?", "enter")
        await pilot.press(*"/policy mode strict", "enter")
        await until(pilot, lambda: len(strip(app).queued) == 2, what="two queued lines")
        assert strip(app).display and prompt_value(app) == ""
        shown = strip(app).strip_text().plain
        assert "queued 1: what do the notes say?" in shown and "queued 2: /policy mode strict" in shown
        assert [c for r, c in said(app) if r == "user"] == ["write hi to out.txt"]
        assert app.session is not None and app.session.mode == "guide"  # the queued command has not run
        # Esc at the empty prompt takes the newest back; Esc again removes it.
        await pilot.press("escape")
        await until(pilot, lambda: prompt_value(app) == "/policy mode strict", what="the line back in the prompt")
        assert strip(app).queued == ("what do the notes say?",) and strip(app).editing
        await pilot.press("escape")
        await until(pilot, lambda: prompt_value(app) == "" and not strip(app).editing, what="the line removed")
        # Esc again: the remaining one back, edited, queued again with Enter.
        await pilot.press("escape")
        await until(pilot, lambda: prompt_value(app) == "what do the notes say?")
        await pilot.press("end", *" (short)", "enter")
        await until(pilot, lambda: strip(app).queued == ("what do the notes say? (short)",))
        assert len(server.chat_requests()) == 1  # still nothing sent for it
        # The approval wait resolves; the turn ends; the queued message is the next turn.
        await pilot.press("f4", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval modal")
        await pilot.press("a")
        await until(pilot, lambda: len(said(app)) == 4, what="the queued message's answer")
        await until(pilot, lambda: not app.commands.assistant.running, what="the second turn to end")
        await settle(pilot)
        assert said(app) == [
            ("user", "write hi to out.txt"),
            ("assistant", "Written."),
            ("user", "what do the notes say? (short)"),
            ("assistant", "The notes say: the notes."),
        ]
        assert not strip(app).display and strip(app).queued == ()
        assert app.session.mode == "guide"  # the removed command never ran
        assert (workspace.root / "out.txt").read_text() == "hi\n"
        assert len(server.chat_requests()) == 3


async def test_queued_lines_run_in_order_under_what_is_in_force_then(
    server: ScriptedServer, workspace: Workspace
) -> None:
    """A /policy mode queued behind a waiting turn runs when that turn ends, before the message queued
    after it: the next turn is asked under the new mode (its write runs without asking)."""
    write = tool_name("builtin:fs:write_text")
    server.add(
        Reply(tool_calls=[Call(write, {"path": "one.txt", "text": "1\n", "if_exists": "error"})]),
        Reply(text="Wrote one."),
        Reply(tool_calls=[Call(write, {"path": "two.txt", "text": "2\n", "if_exists": "error"})]),
        Reply(text="Wrote two."),
    )
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"write one", "enter")
        await until(pilot, lambda: app.session is not None and len(app.session.approvals) == 1)
        await pilot.press(*"/policy mode commander", "enter", *"write two", "enter")
        await until(pilot, lambda: len(strip(app).queued) == 2, what="two queued lines")
        assert app.session is not None and app.session.mode == "guide"
        await pilot.press("f4", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval modal")
        await pilot.press("a")
        await until(pilot, lambda: len(said(app)) == 4, what="the queued message's answer")
        await settle(pilot)
        assert app.session.mode == "commander"
        assert [c for r, c in said(app) if r == "user"] == ["write one", "write two"]
        assert (workspace.root / "two.txt").read_text() == "2\n"  # not asked: commander mode was in force
        assert len(app.session.approvals) == 0 and not isinstance(app.screen, ApprovalScreen)
        roles = [(e["role"], e["content"]) for e in entries(app) if e["role"] in ("user", "notice")]
        assert [r for r, c in roles if r == "user" or "commander" in c] == ["user", "notice", "user"]


async def test_ctrl_x_cancels_only_the_running_turn_and_says_how_many_remain(
    server: ScriptedServer, workspace: Workspace
) -> None:
    server.add(Reply(text="a long answer that stalls", chunk_size=5, stall_after=2), Reply(text="fine"))
    messages = Messages()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: bool(app.screen.query("StreamingAnswer")), what="the answer streaming")
        await pilot.press(*"next one", "enter")
        await until(pilot, lambda: strip(app).queued == ("next one",))
        mark = messages.mark()
        await pilot.press("ctrl+x")
        await until(pilot, lambda: any("Cancelling the turn" in n for n in messages.notes(mark)), messages=messages)
        note = next(n for n in messages.notes(mark) if "Cancelling the turn" in n)
        assert "1 queued message remains" in note
        await until(pilot, lambda: said(app)[-1] == ("assistant", "fine"), what="the queued message's answer")
        await settle(pilot)
        recorded = entries(app)
        cancelled = [e for e in recorded if e["role"] == "notice" and "cancelled" in e["content"]]
        assert len(cancelled) == 1  # only the first turn was cancelled
        assert [c for r, c in said(app) if r == "user"] == ["go", "next one"]


async def test_lines_typed_faster_than_the_app_handles_them_stay_apart(
    server: ScriptedServer, workspace: Workspace
) -> None:
    """Keys that arrive in one burst (a terminal under tmux, a busy App): each Enter ends its own line.
    Enter used to be a binding run once the key had bubbled up to the App — after the keys behind it
    had reached the prompt — so both lines were sent as "onetwo"."""
    from textual import events

    server.add(Reply(text="a long answer that stalls", chunk_size=5, stall_after=2))
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: bool(app.screen.query("StreamingAnswer")), what="the answer streaming")
        for key in [*"one", "enter", *"two", "enter"]:  # posted at once, none waited for
            app.post_message(events.Key(key, "\r" if key == "enter" else key))
        await until(pilot, lambda: len(strip(app).queued) == 2, what="two queued lines")
        assert strip(app).queued == ("one", "two") and prompt_value(app) == ""


async def test_a_workspace_switch_drops_the_queue(server: ScriptedServer, workspace: Workspace) -> None:
    WorkspaceManager().create("other")
    server.add(Reply(text="a long answer that stalls", chunk_size=5, stall_after=2))
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"go", "enter", *"queued for demo", "enter")
        await until(pilot, lambda: strip(app).queued == ("queued for demo",))
        await app.open_workspace("other")
        await until(pilot, lambda: not app.commands.assistant.running, what="the old turn to end")
        await settle(pilot)
        assert app.workspace_name == "other" and strip(app).queued == () and not strip(app).display
        assert entries(app) == [] or all(e["content"] != "queued for demo" for e in entries(app))
        assert len(server.chat_requests()) == 1


# -- snapshot ------------------------------------------------------------------------------------------


def test_snapshot_a_queued_message(snap_compare: Any, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """You should see the question "write hi to out.txt" and the status row above the prompt with the
    turn and its builtin:fs:write_text call "waiting for your approval — F4"; the empty prompt, and
    below it the strip "queued 1: and then read notes.txt" with "Sent when the turn ends · Esc at an
    empty prompt takes the newest back to edit"; the Approvals pane lists the waiting call."""
    monkeypatch.setenv("ARIES_FROZEN_TIME", "1")
    monkeypatch.setattr("widgets.status.monotonic", lambda: 0.0)
    workspace, _ = WorkspaceManager().create("demo")
    from services.workspace.transcripts import Transcript
    from tests.tui.fixtures import CONVERSATION

    Transcript(workspace.transcripts_dir, CONVERSATION).append(
        "notice", "Workspace demo opened.", timestamp="2026-01-01T09:00:00.000Z"
    )
    server.add(Reply(tool_calls=[Call(tool_name("builtin:fs:write_text"), {"path": "out.txt", "text": "hi\n"})]))

    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, AriesApp)
        await app.ready()
        app.screen.query_one("#prompt").focus()
        await pilot.press(*"write hi to out.txt", "enter")
        await until(pilot, lambda: app.session is not None and len(app.session.approvals) == 1)
        await pilot.press(*"and then read notes.txt", "enter")
        await until(pilot, lambda: strip(app).queued == ("and then read notes.txt",))
        await pilot.pause()

    assert snap_compare(AriesApp("demo", conversation="last"), terminal_size=SIZE, run_before=run_before)
