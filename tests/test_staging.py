"""The shared staging folders (services.files.staging) as workspace-bundle imports use them.

A ``--force`` import swaps the old workspace out and the new one in with two renames; a SIGKILL
between them leaves the old workspace inside the staging folder. The next start must put it back,
not delete it with the staging folder (before the shared staging, it was deleted).
"""

from __future__ import annotations

from pathlib import Path

from services.files.staging import StagingArea
from services.workspace.manager import STAGING_PREFIX, WorkspaceManager


def test_a_workspace_moved_aside_by_a_killed_force_import_comes_back_at_the_next_start(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    staging = root / f"{STAGING_PREFIX}0123456789ab"
    (staging / "old").mkdir(parents=True)
    (staging / "old" / "workspace.yaml").write_text("format_version: 1\nname: kept\n")
    (staging / "tree").mkdir()
    (staging / "target").write_text("kept")
    manager = WorkspaceManager(root)  # the next start cleans what killed imports left
    assert sorted(p.name for p in root.iterdir()) == ["kept"]
    assert (root / "kept" / "workspace.yaml").read_text() == "format_version: 1\nname: kept\n"
    assert manager.list() == ["kept"]


def test_a_finished_swap_leaves_only_the_new_tree_and_a_live_one_is_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    (root / "w").mkdir(parents=True)
    (root / "w" / "old.txt").write_text("old")
    with StagingArea(root, STAGING_PREFIX) as area:
        (area.create() / "new.txt").write_text("new")
        WorkspaceManager(root)  # a start while the import runs: its staging folder is not touched
        assert area.tree.is_dir()
        assert area.install(root / "w")
    assert sorted(p.name for p in root.iterdir()) == ["w"]
    assert sorted(p.name for p in (root / "w").iterdir()) == ["new.txt"]
