"""The context tree on disk: write rules per scope and actor, containment, staging and its crash safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from services.context.errors import (
    DirectoryNotEmpty,
    NotInTree,
    NotText,
    ResourceExists,
    ResourceNotFound,
    ScopeReadOnly,
    StagingError,
    WrongKind,
)
from services.context.scopes import can_write, check_write
from services.context.tree import ContextTree
from services.context.uri import SCOPES, AxiomUri, parse_uri
from services.errors import NotFound

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path: Path) -> ContextTree:
    return ContextTree(tmp_path / "context")


def u(text: str) -> AxiomUri:
    return parse_uri(text)


# -- write rules ------------------------------------------------------------------------

RULES = [
    ("axiom://resources/a.md", "user", True),
    ("axiom://user/prefs.md", "user", True),
    ("axiom://agent/notes.md", "user", True),
    ("axiom://session/s1/messages.jsonl", "user", False),
    ("axiom://temp/x", "user", False),
    ("axiom://queue/job-1.json", "user", False),
    ("axiom://resources", "user", False),
    ("axiom://user", "user", False),
    ("axiom://resources/a/.abstract.md", "user", False),
    ("axiom://resources/.hidden/a.md", "user", False),
    ("axiom://queue/job-1.json", "system", True),
    ("axiom://temp/x", "system", True),
    ("axiom://session/s1/messages.jsonl", "system", True),
    ("axiom://resources/a/.overview.md", "system", True),
]


@pytest.mark.parametrize(("text", "actor", "allowed"), RULES)
def test_write_rules(text: str, actor: str, allowed: bool) -> None:
    uri = u(text)
    assert can_write(uri, actor) is allowed  # type: ignore[arg-type]
    if not allowed:
        with pytest.raises(ScopeReadOnly):
            check_write(uri, actor)  # type: ignore[arg-type]


def test_unknown_actor_is_refused() -> None:
    with pytest.raises(ScopeReadOnly):
        check_write(u("axiom://resources/a"), "root")  # type: ignore[arg-type]


def test_queue_is_read_only_to_users_through_the_tree(tree: ContextTree) -> None:
    tree.write_text(u("axiom://queue/job.json"), "{}", actor="system")
    with pytest.raises(ScopeReadOnly):
        tree.write_text(u("axiom://queue/job.json"), "{evil}", actor="user")
    with pytest.raises(ScopeReadOnly):
        tree.remove(u("axiom://queue/job.json"), actor="user")
    with pytest.raises(ScopeReadOnly):
        tree.mkdir(u("axiom://temp/x"), actor="user")
    assert tree.read_text(u("axiom://queue/job.json")) == "{}"
    assert [e.name for e in tree.ls(u("axiom://queue"))] == ["job.json"]


# -- reading and writing ------------------------------------------------------------------


def test_scope_folders_exist_and_round_trip(tree: ContextTree) -> None:
    assert sorted(p.name for p in tree.root.iterdir()) == sorted(SCOPES)
    uri = u("axiom://resources/docs/guide.md")
    tree.write_text(uri, "# Guide\n", actor="user")
    assert (tree.root / "resources" / "docs" / "guide.md").read_text() == "# Guide\n"
    assert tree.path_of(uri) == tree.root / "resources" / "docs" / "guide.md"
    assert tree.uri_of(tree.path_of(uri)) == uri
    assert tree.read_text(uri) == "# Guide\n" and tree.read_bytes(uri) == b"# Guide\n"
    entry = tree.stat(uri)
    assert (entry.kind, entry.size, entry.name) == ("file", 8, "guide.md")
    assert tree.stat(uri.parent).kind == "dir"
    tree.write_text(uri, "# Guide v2\n", actor="user")
    assert tree.read_text(uri) == "# Guide v2\n"


def test_ls_sorted_and_hides_dot_names(tree: ContextTree) -> None:
    base = u("axiom://resources/d")
    for name in ("b.md", "a.md", ".abstract.md", "C.md"):
        tree.write_text(base.join(name), name, actor="system")
    tree.mkdir(base.join("sub"), actor="user")
    (tree.path_of(base) / "bad\\name").write_text("made outside Aries")
    assert [e.name for e in tree.ls(base)] == ["C.md", "a.md", "b.md", "sub"]
    assert [e.name for e in tree.ls(base, hidden=True)] == [".abstract.md", "C.md", "a.md", "b.md", "sub"]
    assert tree.ls(base)[-1].kind == "dir"


def test_typed_errors_for_missing_and_wrong_kind(tree: ContextTree) -> None:
    with pytest.raises(ResourceNotFound) as caught:
        tree.read_text(u("axiom://resources/nope.md"))
    assert isinstance(caught.value, NotFound)
    with pytest.raises(ResourceNotFound):
        tree.ls(u("axiom://resources/nope"))
    with pytest.raises(ResourceNotFound):
        tree.stat(u("axiom://resources/nope"))
    tree.write_bytes(u("axiom://resources/bin"), b"\xff\xfe", actor="user")
    with pytest.raises(NotText):
        tree.read_text(u("axiom://resources/bin"))
    with pytest.raises(WrongKind):
        tree.ls(u("axiom://resources/bin"))
    with pytest.raises(WrongKind):
        tree.write_text(u("axiom://resources/bin/x.md"), "x", actor="user")
    with pytest.raises(WrongKind):
        tree.read_bytes(u("axiom://resources"))
    tree.mkdir(u("axiom://resources/dir"), actor="user")
    with pytest.raises(WrongKind):
        tree.write_text(u("axiom://resources/dir"), "x", actor="user")
    with pytest.raises(ResourceExists):
        tree.mkdir(u("axiom://resources/bin"), actor="user")


def test_remove(tree: ContextTree) -> None:
    tree.write_text(u("axiom://resources/d/a.md"), "a", actor="user")
    with pytest.raises(DirectoryNotEmpty):
        tree.remove(u("axiom://resources/d"), actor="user")
    with pytest.raises(WrongKind):
        tree.remove(u("axiom://resources"), actor="system")
    tree.remove(u("axiom://resources/d"), actor="user", recursive=True)
    assert not tree.exists(u("axiom://resources/d"))
    assert [e.name for e in tree.ls(u("axiom://temp"), hidden=True)] == []
    with pytest.raises(ResourceNotFound):
        tree.remove(u("axiom://resources/d"), actor="user")


# -- containment ----------------------------------------------------------------------------


def test_symlink_out_of_the_tree_is_refused(tree: ContextTree, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, tree.root / "resources" / "escape")
    os.symlink(outside / "secret.txt", tree.root / "resources" / "secret.txt")
    with pytest.raises(NotInTree):
        tree.read_text(u("axiom://resources/escape/secret.txt"))
    with pytest.raises(NotInTree):
        tree.read_text(u("axiom://resources/secret.txt"))
    with pytest.raises(NotInTree):
        tree.ls(u("axiom://resources/escape"))
    with pytest.raises(NotInTree):
        tree.write_text(u("axiom://resources/escape/planted.md"), "x", actor="user")
    assert not (outside / "planted.md").exists()
    assert tree.stat(u("axiom://resources/escape")).kind == "link"
    # replacing or removing the link itself stays inside the tree and leaves the target alone
    tree.remove(u("axiom://resources/secret.txt"), actor="user")
    assert (outside / "secret.txt").read_text() == "secret"


def test_symlink_into_a_read_only_scope_is_refused(tree: ContextTree) -> None:
    os.symlink(tree.root / "queue", tree.root / "resources" / "q")
    with pytest.raises(NotInTree):
        tree.write_text(u("axiom://resources/q/job.json"), "{}", actor="user")
    assert list((tree.root / "queue").iterdir()) == []


def test_symlinked_scope_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "context"
    root.mkdir()
    os.symlink(tmp_path, root / "resources")
    with pytest.raises(NotInTree):
        ContextTree(root)


# -- staging ---------------------------------------------------------------------------------


def _outside_temp(tree: ContextTree) -> list[str]:
    found = []
    for scope in SCOPES:
        if scope == "temp":
            continue
        for where, dirs, files in os.walk(tree.root / scope):
            found += [os.path.relpath(os.path.join(where, n), tree.root) for n in dirs + files]
    return sorted(found)


def test_staging_is_invisible_until_finalize(tree: ContextTree) -> None:
    staging = tree.stage("user")
    staging.path.mkdir()
    (staging.path / "a.md").write_text("# A\n")
    (staging.path / "sub").mkdir()
    (staging.path / "sub" / "b.md").write_text("# B\n")
    assert _outside_temp(tree) == []
    assert [e.name for e in tree.ls(u("axiom://temp"))] == [staging.folder.name]
    dest = u("axiom://resources/books/set")
    assert tree.finalize(staging, dest) == dest
    assert _outside_temp(tree) == [
        "resources/books",
        "resources/books/set",
        "resources/books/set/a.md",
        "resources/books/set/sub",
        "resources/books/set/sub/b.md",
    ]
    assert tree.read_text(dest.join("sub/b.md")) == "# B\n"
    assert os.listdir(tree.root / "temp") == []
    with pytest.raises(StagingError):
        tree.finalize(staging, u("axiom://resources/again"))


def test_finalize_checks_rules_and_existing(tree: ContextTree) -> None:
    staging = tree.stage("user")
    staging.path.write_text("one")
    with pytest.raises(ScopeReadOnly):
        tree.finalize(staging, u("axiom://queue/x"))
    tree.write_text(u("axiom://resources/x.md"), "old", actor="user")
    with pytest.raises(ResourceExists):
        tree.finalize(staging, u("axiom://resources/x.md"))
    tree.finalize(staging, u("axiom://resources/x.md"), replace=True)
    assert tree.read_text(u("axiom://resources/x.md")) == "one"
    with tree.staging("user") as empty:
        with pytest.raises(StagingError):
            tree.finalize(empty, u("axiom://resources/y.md"))
    assert os.listdir(tree.root / "temp") == []


def test_finalize_replaces_a_folder_and_refuses_staged_symlinks(tree: ContextTree, tmp_path: Path) -> None:
    tree.write_text(u("axiom://resources/set/old.md"), "old", actor="user")
    with tree.staging("user") as staging:
        staging.path.mkdir()
        (staging.path / "new.md").write_text("new")
        tree.finalize(staging, u("axiom://resources/set"), replace=True)
    assert [e.name for e in tree.ls(u("axiom://resources/set"))] == ["new.md"]
    with tree.staging("user") as staging:
        staging.path.mkdir()
        os.symlink(tmp_path, staging.path / "link")
        with pytest.raises(StagingError):
            tree.finalize(staging, u("axiom://resources/linked"))
    assert not tree.exists(u("axiom://resources/linked"))
    assert os.listdir(tree.root / "temp") == []


@pytest.mark.slow
def test_sigkill_mid_staging_leaves_nothing_outside_temp_and_is_cleaned(tree: ContextTree) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.context.staging_worker", str(tree.root)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("STAGED "), line
        folder = line.split()[1]
        # while the writer is alive its staging folder is kept
        assert tree.clean_stale_staging() == []
        assert (tree.root / "temp" / folder).is_dir()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert (tree.root / "temp" / folder / "payload" / "big.md").stat().st_size >= 4096
    assert _outside_temp(tree) == []
    assert tree.clean_stale_staging() == [folder]
    assert os.listdir(tree.root / "temp") == []
    assert tree.clean_stale_staging() == []


def test_clean_stale_staging_sweeps_killed_atomic_writes_on_request(tree: ContextTree) -> None:
    tree.write_text(u("axiom://resources/a/b.md"), "b", actor="user")
    leftover = tree.root / "resources" / "a" / ".b.md.x1y2.tmp"
    leftover.write_text("half")
    assert tree.clean_stale_staging() == []
    assert leftover.exists()
    assert tree.clean_stale_staging(sweep_temp_files=True) == [leftover.name]
    assert not leftover.exists() and tree.read_text(u("axiom://resources/a/b.md")) == "b"
