"""Snapshots of the conversation list (/history), the find bar (Ctrl+F) and the multi-line prompt,
at 160×48 and 80×24. Baselines live in snapshots/test_snapshots_t24/."""

from __future__ import annotations

import os
from typing import Any

from textual.pilot import Pilot

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import Transcript
from tests.tui.helpers import until

SIZE = (160, 48)
SMALL = (80, 24)
OLDER, NEWER = "c-20260101-090000-00000001", "c-20260102-100000-00000002"


def two_conversations() -> None:
    workspace = WorkspaceManager().create("demo")[0]
    for n, (cid, day, prompts) in enumerate(
        [
            (OLDER, "2026-01-01", ["where does the gateway decide?", "and the audit rows?"]),
            (NEWER, "2026-01-02", ["summarize README.md for a new user"]),
        ]
    ):
        transcript = Transcript(workspace.transcripts_dir, cid)
        for t, prompt in enumerate(prompts, 1):
            turn = f"{cid}-t{t:04d}"
            transcript.append("user", prompt, turn_id=turn, timestamp=f"{day}T09:0{t}:00.000Z")
            transcript.append(
                "assistant",
                f"The gateway answers turn {t}: every call passes the policy.",
                turn_id=turn,
                timestamp=f"{day}T09:0{t}:05.000Z",
                provider="ollama",
                model="llama3.2:3b",
            )
        os.utime(transcript.path, (1_767_000_000 + n, 1_767_000_000 + n))
    workspace.close()


def _opened(press: list[str]) -> Any:
    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, AriesApp)
        await app.ready()
        await until(pilot, lambda: bool(app.screen.query("TranscriptEntry")))
        app.screen.query_one("#prompt").focus()
        await pilot.press(*press)
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    return run_before


def test_history_lists_the_conversations(snap_compare: Any) -> None:
    """You should see the Conversations modal over the workbench: "Conversations · workspace demo · 2
    stored", then the newest first — 2026-01-02 09:01, 1 turn(s) · llama3.2:3b, its id marked (open),
    "summarize README.md for a new user" beneath — then 2026-01-01 09:02, 2 turn(s), "where does the
    gateway decide?"; the first row highlighted; the keys line (Enter resume · f fork · Esc close)."""
    two_conversations()
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=_opened([*"/history", "enter"]))


def test_find_bar_marks_the_matches(snap_compare: Any) -> None:
    """You should see the conversation of 2026-01-02 with "gateway" highlighted in the answer (the
    current match, lit), and the find bar above the prompt: "Find:", the query gateway, "1/1"."""
    two_conversations()
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=_opened(["ctrl+f", *"gateway"]))


def test_find_bar_small(snap_compare: Any) -> None:
    """You should see, at 80×24, the transcript with "gateway" highlighted and the find bar with "1/1"
    above the prompt, nothing cut mid-word in the bar."""
    two_conversations()
    assert snap_compare(AriesApp("demo"), terminal_size=SMALL, run_before=_opened(["ctrl+f", *"gateway"]))


def test_multiline_prompt(snap_compare: Any) -> None:
    """You should see the multi-line editor in the prompt's place holding three lines — "first line",
    "second line", "third line" — with the cursor at the end of the third; the one-line prompt hidden."""
    two_conversations()
    keys = [*"first line", "ctrl+j", *"second line", "ctrl+j", *"third line"]
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=_opened(keys))
