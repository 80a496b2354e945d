"""``/desktop`` in the TUI: the plan in the transcript, then each step through the gateway with the
approval modal where the policy asks — the one question (issue 34: no y/n on the plan before it); a
request that cannot be planned is one clear notification."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from screens.confirm import ConfirmScreen
from services.workspace.transcripts import read_transcript
from tests.tui.helpers import Messages, until
from tests.tui.test_approvals import SIZE, make_workspace, wait_for_pending, wait_for_tools


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARIES_MODEL", raising=False)


async def submit(app: AriesApp, pilot: object, line: str) -> None:
    app.screen.query_one("#prompt", Input).value = line
    await pilot.press("enter")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


def entries(app: AriesApp) -> list[dict]:
    assert app.session is not None
    return read_transcript(app.session.conversation.transcript.path).entries


async def test_desktop_create_asks_once_in_the_approval_modal() -> None:
    workspace = make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await submit(app, pilot, '/desktop create notes/todo.md with "buy milk"')
        await wait_for_pending(app, pilot)  # guide mode: the write waits for the operator, the only question
        assert not isinstance(app.screen, ConfirmScreen)
        assert not (workspace.root / "notes" / "todo.md").exists()
        plan = entries(app)[-1]  # the plan is in the transcript while its step waits
        assert plan["content"].startswith('Plan for: create notes/todo.md with "buy milk"')
        assert "1. builtin:fs:write_text" in plan["content"]
        await pilot.press("f4", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.press("a")
        await wait_for_tools(app, pilot)
        assert (workspace.root / "notes" / "todo.md").read_text() == "buy milk\n"
        roles = [(e["role"], e.get("tool_name")) for e in entries(app)]
        assert roles[-3:] == [("notice", None), ("tool", "builtin:fs:write_text"), ("notice", None)]
        *_, plan_notice, tool, summary = entries(app)
        assert plan_notice["content"].startswith("Plan for: create notes/todo.md") and tool["status"] == "success"
        assert summary["content"].endswith("Done: 1 step(s) ran.")
        decision = app.session.gateway().last_decision()  # type: ignore[union-attr]
        assert decision is not None and decision["approved_by"] == "operator_once"
    assert not any(isinstance(screen, ConfirmScreen) for screen in app.screen_stack)


async def test_desktop_step_denied_in_the_modal_runs_nothing() -> None:
    workspace = make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await submit(app, pilot, "/desktop create notes/todo.md with milk")
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.press("d")  # the reason field: none given
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: "failed or denied" in entries(app)[-1]["content"], what="the plan's summary")
        assert not (workspace.root / "notes").exists()
        [tool] = [e for e in entries(app) if e["role"] == "tool"]
        assert tool["status"] != "success"


async def test_desktop_list_runs_without_approval() -> None:
    make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await submit(app, pilot, "/desktop list")
        await wait_for_tools(app, pilot)
        [tool] = [e for e in entries(app) if e["role"] == "tool"]
        assert tool["tool_name"] == "builtin:fs:list_dir" and tool["status"] == "success"
        assert "notes.txt" in [e["name"] for e in tool["output"]["data"]["entries"]]


async def test_desktop_request_that_cannot_be_planned_is_one_notification() -> None:
    make_workspace()
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await submit(app, pilot, "/desktop dance wildly")
        await messages.notified(pilot, "cannot tell what to do with 'dance'")
        assert not isinstance(app.screen, ConfirmScreen)
        mark = messages.mark()
        await submit(app, pilot, "/desktop")
        await messages.notified(pilot, "/desktop say what to do", since=mark)


async def test_desktop_with_a_model_is_one_turn_of_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a model configured no plan is parsed: the request is a turn, its tool call governed as usual."""
    from services.audit.log import AuditStore
    from tests.models.servers import Call, Reply, ScriptedServer
    from tests.tui.test_assistant_tui import tool_name

    workspace = make_workspace()
    server = ScriptedServer("ollama").start()
    try:
        monkeypatch.setenv("ARIES_MODEL", "ollama:llama3.2:3b")
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        server.add(
            Reply(tool_calls=[Call(tool_name("builtin:fs:list_dir"), {"path": "."}, id="c1")]),
            Reply(text="One file: notes.txt."),
        )
        app = AriesApp("demo")
        async with app.run_test(size=SIZE) as pilot:
            await app.ready()
            await submit(app, pilot, "/desktop what files are here? (no parser phrasing)")
            assert not isinstance(app.screen, ConfirmScreen)
            await wait_for_tools(app, pilot)
            kinds = [(e["role"], e.get("tool_name")) for e in entries(app)]
            assert ("user", None) in kinds and ("tool", "builtin:fs:list_dir") in kinds
            assert entries(app)[-1]["role"] == "assistant" and "One file: notes.txt." in entries(app)[-1]["content"]
    finally:
        server.stop()
    with AuditStore.for_workspace(workspace.root) as audit:
        [row] = audit.calls(limit=10)
    assert row["tool_name"] == "builtin:fs:list_dir" and row["source"] == "assistant"
