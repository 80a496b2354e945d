"""Snapshot tests at 80×24: the main screen and every modal fit, with their keys on screen.

Baselines live in snapshots/test_snapshots_small/.
"""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from services.workspace.manager import WorkspaceManager
from tests.tui.fixtures import workspace_with_transcript
from tests.tui.helpers import settle, until
from tests.tui.test_approvals import wait_for_pending
from widgets.approvals.pane import ApprovalsPane

SIZE = (80, 24)


async def _settle(pilot: Pilot[int]) -> None:
    await pilot.app.ready()  # type: ignore[attr-defined]
    await settle(pilot)


def test_main_screen_empty_small(snap_compare) -> None:
    """You should see, at 80×24: the header in its compact form, whole ("Aries — demo · default ·
    offline · guide · default policy", no ellipsis), the pane strip with F2 Transcript highlighted, the
    Transcript pane across the whole width with its hint, the prompt, and the key bar with whole labels
    and without the F2–F5 keys the strip shows ("Ctrl+Q Quit  Ctrl+O Workspaces  F1 Help  Ctrl+P
    Palette")."""
    WorkspaceManager().create("demo")
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE)


def test_main_screen_with_transcript_small(snap_compare) -> None:
    """You should see the four entries of the fixture across the width: you, assistant, the
    fs:list_dir tool block (✓ ok, docs, 4 ms, a table of a.md b.md c.md with their sizes) and the aries
    note."""
    workspace_with_transcript("demo")
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE)


def test_artifacts_pane_in_view_small(snap_compare) -> None:
    """You should see the Artifacts pane in view across the whole width after F5 (the strip shows F5
    Artifacts highlighted), with findings.md listed and previewed."""
    workspace_with_transcript("demo")
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, press=["f5"])


def test_approval_modal_with_a_long_diff_small(snap_compare) -> None:
    """You should see the approval modal inside the screen: its title, the body (risk, rule, the start of
    a 60-line diff) with a scrollbar, what approving for the session covers and what "always in this
    workspace" stores, and the keys a, s, w, *, d, Esc
    at the bottom, all visible at 80×24."""
    workspace, _ = WorkspaceManager().create("demo")
    (workspace.root / "notes.txt").write_text("".join(f"old line {n}\n" for n in range(60)))

    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, AriesApp)
        await pilot.pause()
        await pilot.press(*"/fs write notes.txt replaced", "enter")
        await wait_for_pending(app, pilot)
        app.screen.query_one(ApprovalsPane).focus_main()
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval modal")
        app.clear_notifications()  # the "waits for your approval" toast expires on its own

    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=run_before)


def test_chunk_viewer_small(snap_compare, tmp_path: Path) -> None:
    """You should see the chunk viewer inside the screen: "Chunk docs:…", the metadata and the start of
    the text in a scrolling body, and "Esc closes" at the bottom."""
    from services.retrieval import RetrievalEngine

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\n" + "Rivers flow to the sea and carry silt. " * 30 + "\n")
    import os

    os.utime(docs / "rivers.md", (1767258000, 1767258000))
    workspace, _ = WorkspaceManager().create("demo")
    engine = RetrievalEngine(workspace)
    try:
        engine.index_add(docs, "docs")
    finally:
        engine.close()

    async def run_before(pilot: Pilot[int]) -> None:
        await pilot.pause()
        await pilot.press(*"/rag query rivers silt", "enter")
        await _settle(pilot)
        await pilot.press("f3", "enter")
        await _settle(pilot)

    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=run_before)


def test_help_small(snap_compare) -> None:
    """You should see the help modal inside the screen, the commands table from its start, a scrollbar,
    and the "Esc closes this help" line at the bottom."""
    WorkspaceManager().create("demo")
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, press=["f1"])


def test_switcher_small(snap_compare) -> None:
    """You should see the workspace switcher inside the screen: the filter "al", alpha and alpine, and
    the key hints at the bottom."""
    for name in ("alpha", "alpine", "beta", "gamma-ray"):
        WorkspaceManager().create(name)
    assert snap_compare(AriesApp("beta"), terminal_size=SIZE, press=["ctrl+o", "a", "l"])


def test_confirm_small(snap_compare) -> None:
    """You should see the confirmation "Drop index docs?" with its explanation and "y yes · n / Esc no"
    inside the screen."""
    WorkspaceManager().create("demo")
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, press=[*"/rag index drop docs", "enter"])
