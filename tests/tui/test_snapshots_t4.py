"""Snapshot tests of issue 34's last defects: a diff, an undo and a denied call in the light theme.

Baselines live in snapshots/test_snapshots_t4/.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot

from app.aries_app import AriesApp
from services.settings.operator import update_settings
from services.workspace.manager import Workspace, WorkspaceManager
from services.workspace.transcripts import Transcript
from tests.tui.fixtures import CONVERSATION
from tests.tui.helpers import until

SIZE = (160, 48)
PATCH = """--- a/notes.txt
+++ b/notes.txt
@@ -1,2 +1,2 @@
 first line
-old line
+new line
"""


def workspace_with_tool_outcomes(name: str = "demo") -> Workspace:
    """A patch (its diff), the undo of a write (the files it put back) and a call the operator denied."""
    workspace, _ = WorkspaceManager().create(name)
    transcript = Transcript(workspace.transcripts_dir, CONVERSATION)
    transcript.append("user", "Fix the second line of notes.txt.", timestamp="2026-01-01T09:00:00.000Z")
    transcript.append(
        "tool",
        "patched",
        timestamp="2026-01-01T09:00:01.000Z",
        tool_name="builtin:fs:apply_patch",
        input={"patch": PATCH},
        output={
            "files": [{"path": "notes.txt", "action": "modify", "hunks": 1, "added": 1, "removed": 1}],
            "applied": True,
        },
        status="success",
        duration_ms=3,
    )
    transcript.append(
        "tool",
        "restored",
        timestamp="2026-01-01T09:00:02.000Z",
        tool_name="builtin:fs:restore",
        input={"call_id": "call-0001"},
        output={
            "call_id": "call-0001",
            "files": [
                {"path": "/home/me/demo/notes.txt", "action": "restored", "existed": True},
                {"path": "/home/me/demo/draft.md", "action": "removed", "existed": False},
            ],
        },
        status="success",
        duration_ms=2,
    )
    transcript.append(
        "tool",
        "denied",
        timestamp="2026-01-01T09:00:03.000Z",
        tool_name="builtin:shell:run",
        input={"argv": ["rm", "-r", "build"]},
        output={
            "status": "error",
            "data": None,
            "error": {
                "type": "PolicyDenied",
                "message": "The operator denied this call.",
                "details": {"rule": "approval.operator_denied"},
            },
            "meta": {},
        },
        status="fail",
        duration_ms=1,
    )
    return workspace


def test_tool_outcomes_in_the_light_theme(snap_compare) -> None:
    """You should see, in textual-light (dark text on light grey): the apply_patch block "✓ ok" with
    "modify notes.txt +1 -1" and the diff ("-old line" and "+new line" in the theme's red and green,
    "@@" in its accent); the restore block "undid call call-0001", then "restored  …/notes.txt" and
    "removed (it did not exist before)  …/draft.md" as lines, not YAML; the shell:run block
    "✗ denied by operator" with "PolicyDenied: The operator denied this call."."""
    workspace_with_tool_outcomes("demo")
    update_settings(lambda settings: settings.model_copy(update={"theme": "textual-light"}))
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE)


def test_a_pasted_text_folded_in_the_transcript(snap_compare) -> None:
    """You should see the operator's message "What is wrong here?" and the first three lines of the
    pasted log ("line 01 …" to "line 03 …"), then "… 57 more lines · Enter or a click here unfolds" in dim
    italics, and the answer below it: not sixty rows of log."""
    from tests.tui.test_fold_tui import seeded

    seeded("demo")
    assert snap_compare(AriesApp("demo", conversation="last"), terminal_size=SIZE)


def indexed_docs(root: Path) -> None:
    """Workspace demo with an index of two files, one deep in folders with a section."""
    from services.retrieval import RetrievalEngine

    nested = root / "docs" / "operations" / "approvals-and-policies"
    nested.mkdir(parents=True)
    (nested / "gateway-approvals.md").write_text("# The approval gateway\n\nEvery tool call passes the gateway.\n")
    (root / "docs" / "readme.md").write_text("# Approvals\n\nThe gateway approves tool calls after policy.\n")
    created, _ = WorkspaceManager().create("demo")
    with RetrievalEngine(created) as engine:
        engine.index_add(str(root / "docs"), "docs")
    created.close()


def queried(*keys: str) -> Callable[[Pilot[int]], Awaitable[None]]:
    async def run_before(pilot: Pilot[int]) -> None:
        from textual.widgets import DataTable

        app = pilot.app
        await app.ready()  # type: ignore[attr-defined]
        app.commands.run("/rag query approval gateway")  # type: ignore[attr-defined]

        def rows() -> int:
            tables = app.screen.query("#context-table").results(DataTable)
            return sum(table.row_count for table in tables)

        await until(pilot, lambda: rows() == 2, what="the rows")
        for key in keys:
            await pilot.press(key)
        await pilot.pause()

    return run_before


def test_context_pane_at_160_columns(snap_compare, tmp_path: Path) -> None:
    """You should see, at 160×48, the transcript on the left (about 70 columns) and on the right the
    wider side column: the Context table with both rows whole to the dense column ("#1 0.631"), the
    deep file's row as "gateway-approvals.md · The ap…" (its folders given way first, its name whole)
    and "readme.md · Approvals"; the column headers "#  handle  source · page/section  fused  bm25  dense"."""
    indexed_docs(tmp_path)
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=queried())


def test_context_pane_at_80_columns(snap_compare, tmp_path: Path) -> None:
    """You should see, at 80×24, the Context pane alone (F3) filling the width: both rows fit to the
    dense column, the deep file shown by its name "gateway-approvals.md…", "readme.md · Approvals"."""
    indexed_docs(tmp_path)
    assert snap_compare(AriesApp("demo"), terminal_size=(80, 24), run_before=queried("f3"))
