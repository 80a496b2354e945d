from pathlib import Path

import pytest

from services.errors import ConfigError, InvalidName, NotFound
from services.workspace.manager import WorkspaceManager, ephemeral_workspace, mark_closed, mark_open, session_marker


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_new_creates_the_layout(aries_home: Path) -> None:
    manager = WorkspaceManager()
    workspace, report = manager.create("demo")
    assert report.created
    assert workspace.root == aries_home / "workspaces" / "demo"
    for sub in ("transcripts", "artifacts", "indexes"):
        assert (workspace.root / sub).is_dir()
    assert workspace.profile == "default"
    # no approval mode is written: unset, the profile's or the policy file's applies (services.session.inforce)
    assert workspace.setting("approval_mode") is None and "approval_mode" not in workspace.meta_path.read_text()
    assert manager.list() == ["demo"]


def test_new_is_idempotent(aries_home: Path) -> None:
    manager = WorkspaceManager()
    workspace, _ = manager.create("demo")
    workspace.latest_transcript().append("user", "keep me")
    workspace.artifacts.add_bytes(b"data", "d.txt")
    meta_before = workspace.meta_path.read_bytes()
    before = tree(workspace.root)
    again, report = manager.create("demo")
    assert not report.created and report.repaired == []
    assert tree(again.root) == before
    assert again.meta_path.read_bytes() == meta_before
    assert [e["content"] for e in again.latest_transcript().read().entries] == ["keep me"]


def test_missing_parts_are_repaired_without_touching_the_rest(aries_home: Path) -> None:
    manager = WorkspaceManager()
    workspace, _ = manager.create("demo")
    workspace.latest_transcript().append("user", "keep me")
    (workspace.root / "indexes").rmdir()
    _, report = manager.open("demo")
    assert report.repaired == ["created missing indexes/"]
    assert (workspace.root / "indexes").is_dir()


@pytest.mark.parametrize("name", ["../x", "a/b", ".", "", "x" * 300, "..", "a\x00b"])
def test_refused_names_create_nothing(aries_home: Path, name: str) -> None:
    with pytest.raises(InvalidName):
        WorkspaceManager().create(name)
    assert not aries_home.exists() or list(aries_home.rglob("*")) == []


def test_open_unknown_is_a_typed_error() -> None:
    with pytest.raises(NotFound):
        WorkspaceManager().open("missing")


def test_settings_round_trip_keeps_comments(aries_home: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    text = workspace.meta_path.read_text().replace("profile: default", "profile: default  # my choice")
    workspace.meta_path.write_text(text)
    workspace, _ = WorkspaceManager().open("demo")
    workspace.update(active_index="papers")
    written = workspace.meta_path.read_text()
    assert "# my choice" in written and "active_index: papers" in written
    assert WorkspaceManager().open("demo")[0].setting("active_index") == "papers"


def test_malformed_workspace_yaml_names_file_and_line(aries_home: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    workspace.meta_path.write_text("name: demo\nsettings: [unclosed\n")
    fresh, _ = WorkspaceManager().open("demo")
    with pytest.raises(ConfigError) as info:
        _ = fresh.profile
    assert str(workspace.meta_path) in info.value.message and ":3" in info.value.message


def test_stale_temp_files_are_removed_on_open(aries_home: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    (workspace.root / ".workspace.yaml.abc.tmp").write_text("half")
    (workspace.artifacts_dir / ".registry.json.x.tmp").write_text("half")
    _, report = WorkspaceManager().open("demo")
    assert report.removed_temp_files == 2


def test_ephemeral_workspace_leaves_nothing(aries_home: Path) -> None:
    workspace = ephemeral_workspace()
    workspace.latest_transcript().append("user", "gone soon")
    root = workspace.root
    assert root.is_dir()
    workspace.close()
    assert not root.exists()
    assert not aries_home.exists()


def test_open_markers_detect_an_unclean_exit(aries_home: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    assert mark_open(workspace) is None
    assert session_marker(workspace) is not None
    assert mark_open(workspace) is None  # this process holds it already: a no-op
    assert mark_closed(workspace)
    assert session_marker(workspace) is None
    # a record left by a process that no longer exists is stale (old marker format too)
    (workspace.root / ".aries-session.json").write_text('{"pid": 999999999, "opened_at": "x"}')
    stale = mark_open(workspace)
    assert stale is not None and stale["pid"] == 999999999
    assert mark_closed(workspace)
    assert session_marker(workspace) is None
