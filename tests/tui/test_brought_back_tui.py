"""Earlier turns brought back, in the TUI (issue 30 item 1), against the scripted Ollama server: the
Context pane lists the turn beside the passages with its own handle, Enter on it shows the turn's
text, and the transcript's left-out notice names it."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.chunk_viewer import ChunkViewer
from services.history_search.turns import turn_handle
from services.workspace.manager import Workspace
from tests.models.servers import Reply, ScriptedServer
from tests.tui.helpers import settle, until
from tests.tui.test_assistant_tui import SIZE, entries, frozen_time, server, workspace
from tests.tui.test_meter_tui import fixed_conversation

__all__ = ["frozen_time", "server", "workspace"]  # the fixtures, used by name

FACT = "Remember this: the spare generator key is kept in the blue toolbox behind the greenhouse."
SUBJECTS = ("rivers", "mountains", "deserts", "forests", "islands", "oceans", "valleys", "glaciers")


async def ask(pilot: Pilot[Any], app: AriesApp, text: str) -> None:
    app.screen.query_one("#prompt").focus()
    await pilot.press(*text, "enter")
    await until(pilot, lambda: not app.commands.assistant.running and entries(app)[-1]["role"] == "assistant")
    await settle(pilot)


def script(server: ScriptedServer, workspace: Workspace) -> None:
    workspace.update(models={"ollama:llama3.2:3b": {"context_window": 700, "max_tokens": 40, "tool_budget": 0}})
    server.add(Reply(text="Noted.", prompt_tokens=0))
    for _ in SUBJECTS:
        server.add(Reply(text="Here are a few sentences. " * 6, prompt_tokens=0))
    server.add(Reply(text="In the blue toolbox.", prompt_tokens=0))


async def converse(pilot: Pilot[Any], app: AriesApp) -> None:
    await app.ready()
    await ask(pilot, app, FACT)
    for subject in SUBJECTS:
        await ask(pilot, app, f"Tell me about {subject} in a few sentences, nothing more than that.")
    await ask(pilot, app, "Where is the generator key kept?")


async def test_the_context_pane_lists_the_turn_brought_back_and_enter_shows_it(
    server: ScriptedServer, workspace: Workspace
) -> None:
    script(server, workspace)
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await converse(pilot, app)
        assert app.session is not None
        handle = turn_handle(app.session.conversation.conversation_id, 1)
        report = [e for e in entries(app) if e.get("kind") == "context"][-1]
        assert report["brought_back"] == [handle]
        table = app.screen.query_one("#context-table")
        rows = [table.get_row_at(n) for n in range(table.row_count)]  # type: ignore[attr-defined]
        turn_rows = [row for row in rows if str(row[1]) == handle]
        assert len(turn_rows) == 1 and str(turn_rows[0][0]) == "↩1"
        assert "earlier turn(s) brought back" in str(app.screen.query_one("#context-caption").render())
        pane = app.screen.query_one("#context")
        pane.focus_main()  # type: ignore[attr-defined]
        await settle(pilot)
        table.move_cursor(row=[str(row[1]) for row in rows].index(handle))  # type: ignore[attr-defined]
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ChunkViewer))
        viewer = app.screen
        assert isinstance(viewer, ChunkViewer)
        assert viewer.chunk.handle == handle and viewer.chunk.text.startswith(f"operator: {FACT}")


def test_snapshot_a_turn_brought_back(
    frozen_time: None, snap_compare: Any, server: ScriptedServer, workspace: Workspace
) -> None:
    """You should see, at 160×48, the header "ctx 583/700 full"; the transcript ending with the question
    "Where is the generator key kept?", the context-window notice "… left out: the 4 oldest turn(s)
    (t0001–t0004) … Brought back as relevant to this message: turn(s) 1
    (turn:c-20260101-090000-00000001:1)." and the answer "In the blue toolbox."; the Context pane's
    caption "injected for: Where is the generator key kept?  ·  index docs  ·  turn c-2026…" (cut at
    the pane's width) over one row "↩1  turn:c-20260101-090000-00000001:1  turn 1 of this conv…"
    with its fused score 0.0328 and BM25 rank #1 (no passage of index docs passed the threshold)."""
    fixed_conversation(workspace)
    script(server, workspace)

    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, AriesApp)
        await converse(pilot, app)

    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=run_before)
