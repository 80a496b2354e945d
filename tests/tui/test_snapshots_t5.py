"""Snapshot tests of issue 34 item 4: the approval modal's diff and the Artifacts pane's diff preview take
their colours from the theme (here the light one), each line keeping its ``+``/``-``/``@@``.

Baselines live in snapshots/test_snapshots_t5/.
"""

from __future__ import annotations

from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from services.settings.operator import update_settings
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import until
from tests.tui.test_approvals import wait_for_pending
from tests.tui.test_snapshots_t4 import PATCH
from widgets.approvals.pane import ApprovalsPane

SIZE = (100, 30)


def _light() -> None:
    update_settings(lambda settings: settings.model_copy(update={"theme": "textual-light"}))


def test_approval_diff_in_the_light_theme(snap_compare) -> None:
    """You should see, in textual-light (dark text on light grey), the approval modal of
    "/fs write notes.txt new line": its diff with "--- a/notes.txt" and "+++ b/notes.txt" in bold, the
    "@@ … @@" line in the theme's accent, "-old line" in the theme's red and "+new line" in its green
    (not the dark terminal palette of before), then the keys a, s, w, *, d, Esc."""
    workspace, _ = WorkspaceManager().create("demo")
    (workspace.root / "notes.txt").write_text("old line\n")
    _light()

    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, AriesApp)
        await pilot.pause()
        await pilot.press(*"/fs write notes.txt new line", "enter")
        await wait_for_pending(app, pilot)
        app.screen.query_one(ApprovalsPane).focus_main()
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval modal")
        app.clear_notifications()  # the "waits for your approval" toast expires on its own

    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=run_before)


def test_artifacts_pane_diff_in_the_light_theme(snap_compare) -> None:
    """You should see, in textual-light, the Artifacts pane in view (F5) with notes.txt.diff listed and
    previewed: its name in bold, "text/x-diff" (or the mime it was given), then the diff with "@@ -1,2
    +1,2 @@" in the theme's accent, "-old line" in its red and "+new line" in its green, " first line"
    plain."""
    workspace, _ = WorkspaceManager().create("demo")
    workspace.artifacts.add_bytes(
        PATCH.encode(), "notes.txt.diff", description="diff of notes.txt", provenance={"kind": "test", "role": "diff"}
    )
    workspace.close()
    _light()
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, press=["f5"])
