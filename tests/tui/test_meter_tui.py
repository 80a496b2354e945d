"""The context meter and ``/usage`` in the TUI (issue 30 item 6), against the scripted Ollama server: the
header follows the turn's ``ContextMeasured`` events through the session's signals; ``/usage`` prints
the last request's breakdown as a transcript notice."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from app.aries_app import AriesApp
from services.models.window_budget import ContextBreakdown
from services.workspace.manager import Workspace
from tests.models.servers import Reply, ScriptedServer
from tests.tui.helpers import settle, until
from tests.tui.test_assistant_tui import (
    QUESTION,
    SIZE,
    entries,
    frozen_time,
    server,
    workspace,
)
from widgets.header import WorkbenchHeader

__all__ = ["frozen_time", "server", "workspace"]  # the fixtures, used by name


def fixed_conversation(workspace: Workspace) -> None:
    """The conversation's id and first line fixed (the snapshot shows them)."""
    from services.workspace.transcripts import Transcript
    from tests.tui.fixtures import CONVERSATION

    Transcript(workspace.transcripts_dir, CONVERSATION).append(
        "notice", "Workspace demo opened.", timestamp="2026-01-01T09:00:00.000Z"
    )


async def ask(pilot: Pilot[Any], app: AriesApp, text: str) -> None:
    app.screen.query_one("#prompt").focus()
    await pilot.press(*text, "enter")
    await until(pilot, lambda: not app.commands.assistant.running and entries(app)[-1]["role"] == "assistant")
    await settle(pilot)


async def test_the_header_shows_the_meter_after_a_request_and_usage_breaks_it_down(
    server: ScriptedServer, workspace: Workspace
) -> None:
    server.add(Reply(text="Writes wait for the operator."))
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        assert not app.sub_title.startswith("ctx ")  # no request yet: no meter
        app.screen.query_one("#prompt").focus()
        await pilot.press(*"/usage", "enter")
        await until(pilot, lambda: entries(app)[-1].get("title") == "usage")
        assert "No request has been sent" in entries(app)[-1]["content"]
        await ask(pilot, app, QUESTION)
        recorded = ContextBreakdown.from_dict(entries(app)[-1]["usage"]["context"])
        assert app.meter is not None and app.meter == recorded
        assert app.sub_title.startswith(f"ctx {app.meter.used:,}/8,192 · workspace demo")
        await pilot.press(*"/usage", "enter")
        await until(pilot, lambda: entries(app)[-1].get("title") == "usage")
        shown = entries(app)[-1]["content"].splitlines()
        assert shown[1:] == app.meter.lines()
        assert any(line.startswith("tool definitions") for line in shown)
        assert shown[-2].startswith("free") and f"{app.meter.free:,}" in shown[-2]


async def test_a_full_window_says_full_in_words_and_in_the_error_colour(
    server: ScriptedServer, workspace: Workspace
) -> None:
    workspace.update(models={"ollama:llama3.2:3b": {"context_window": 1200, "max_tokens": 100, "tool_budget": 0}})
    for n in range(1, 3):
        server.add(Reply(text=f"answer {n}: " + "the operator approves writes " * 200))
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await ask(pilot, app, "question 1: " + "how are writes approved " * 8)
        assert app.meter is not None and app.meter.level == "ok" and "ctx" in app.sub_title
        title = app.screen.query_one(WorkbenchHeader).format_title()
        assert not any("$error" in str(span.style) or "$warning" in str(span.style) for span in title.spans)
        await ask(pilot, app, "question 2: " + "how are writes approved " * 8)
        assert app.meter is not None and app.meter.level == "full"  # turn 1's long answer fills the room
        assert app.sub_title.startswith(f"ctx {app.meter.used:,}/1,200 full · ")
        title = app.screen.query_one(WorkbenchHeader).format_title()
        meter = title.plain.index("ctx ")
        styles = {str(span.style) for span in title.spans if span.start <= meter < span.end}
        assert "bold $error" in styles


def test_snapshot_the_meter_at_80_columns(
    frozen_time: None, snap_compare: Any, server: ScriptedServer, workspace: Workspace
) -> None:
    """You should see, at 80×24, the header "Aries — ctx 1,080/1,200 full · demo · ollama:lla….2:3b · guide"
    (the model's name cut in its middle, the mode whole, no trailing "…") with the meter first, in the
    error colour and with the word "full" (turn 1's long answer fills more than 90 % of the room beside
    turn 2); the transcript ends with "answer 2: writes wait.", its mark "! uncited" (a number, no
    citation, in a turn that had a passage), the marks' legend and the answer's usage line."""
    fixed_conversation(workspace)
    workspace.update(models={"ollama:llama3.2:3b": {"context_window": 1200, "max_tokens": 100, "tool_budget": 0}})
    server.add(Reply(text="answer 1: " + "the operator approves writes " * 200))
    server.add(Reply(text="answer 2: writes wait."))

    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, AriesApp)
        await app.ready()
        await ask(pilot, app, "question 1: " + "how are writes approved " * 8)
        await ask(pilot, app, "question 2: " + "how are writes approved " * 8)

    assert snap_compare(AriesApp("demo"), terminal_size=(80, 24), run_before=run_before)
