"""Snapshots of the ``/history search`` screen (issue 32 item 1) at 160×48 and 80×24, and of the
transcript opened at a hit. Baselines live in snapshots/test_snapshots_history_search/."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.history_search import HistorySearchScreen
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import Transcript
from tests.tui.helpers import until

SIZE = (160, 48)
SMALL = (80, 24)
MARSH, COAST, HOSTILE_ID = "c-20261120-090000-00000001", "c-20261122-140000-00000002", "c-20261124-080000-00000003"
HOSTILE = "\x1b]52;c;aGVsbG8=\x07\x1b[2J \u202egnirts [bold red]loud[/] <b>tag</b>"


def week() -> None:
    """Workspace ``birds``: three conversations of a week, fixed ids and times; the heron in each."""
    workspace = WorkspaceManager().create("birds")[0]
    talks = [
        (MARSH, "2026-11-20", [("which birds wade in the marsh?", "Herons, egrets and the odd bittern.")]),
        (
            COAST,
            "2026-11-22",
            [
                ("list the shore birds we saw", "Oystercatchers, turnstones and one grey heron."),
                ("was the heron ringed?", "No ring was seen on the heron's legs."),
            ],
        ),
        (HOSTILE_ID, "2026-11-24", [(f"paste from a page: heron {HOSTILE}", f"The page says heron {HOSTILE}.")]),
    ]
    for cid, day, turns in talks:
        transcript = Transcript(workspace.transcripts_dir, cid)
        for t, (question, answer) in enumerate(turns, 1):
            turn = f"{cid}-t{t:04d}"
            transcript.append("user", question, turn_id=turn, timestamp=f"{day}T09:0{t}:00.000Z")
            transcript.append("assistant", answer, turn_id=turn, timestamp=f"{day}T09:0{t}:05.000Z", provider="offline")
    workspace.close()


def searched(line: str, *keys: str) -> Callable[[Pilot[int]], Awaitable[None]]:
    """``run_before``: wait for the background build, run ``line``, wait for the hits, press ``keys``."""

    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        await app.ready()  # type: ignore[attr-defined]
        await until(pilot, app.commands.history_index.done.is_set)  # type: ignore[attr-defined]
        app.commands.run(line)  # type: ignore[attr-defined]
        await until(pilot, lambda: isinstance(app.screen, HistorySearchScreen))
        for key in keys:
            await pilot.press(key)
        await pilot.pause()

    return run_before


def test_history_search_hits(snap_compare) -> None:
    """You should see the search modal over the workbench: the query line "heron" at the top, the
    title "6 hit(s) for 'heron' · workspace birds", then one hit per line pair — date and time, turn,
    role and conversation id, and beneath a snippet with "heron" in reverse video — among them the
    hostile hit's text shown as text (no OSC, no cleared screen, "[bold red]loud[/]" and "<b>tag</b>"
    literally, the reversed-text control made visible); the key line at the bottom."""
    week()
    assert snap_compare(
        AriesApp("birds", conversation="new"), terminal_size=SIZE, run_before=searched("/history search heron")
    )


def test_history_search_filtered_small(snap_compare) -> None:
    """You should see, at 80×24, the search modal with the query line "heron role:assistant since:2026-11-22",
    the hits of the assistant's answers from 22 November on only (three), each snippet on one line
    ending in an ellipsis where it does not fit, and the whole key line."""
    week()
    line = "/history search heron role:assistant since:2026-11-22"
    assert snap_compare(AriesApp("birds", conversation="new"), terminal_size=SMALL, run_before=searched(line))


def test_history_search_opens_the_conversation_at_the_hit(snap_compare) -> None:
    """You should see the coast conversation (its id in the Transcript pane's bottom border) with the
    second hit — the answer "No ring was seen on the heron's legs." — selected (marked at its left
    edge); the search modal closed and a notice "Resumed … (2 turn(s))"."""
    week()
    run_before = searched("/history search ringed heron legs", "enter")
    assert snap_compare(AriesApp("birds", conversation="new"), terminal_size=SIZE, run_before=run_before)
