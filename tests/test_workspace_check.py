"""check_workspace and `aries workspace open NAME --check`: every store checked, problems named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.session.workspace_check import check_workspace
from services.workspace.manager import Workspace, WorkspaceManager

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(180)


def _cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARIES_HOME": str(home), "PYTHONPATH": str(REPO), "AXIOMME_EMBEDDER": "hash"}
    return subprocess.run([sys.executable, "-m", "app", *argv], capture_output=True, text=True, env=env, timeout=120)


def _by_name(workspace: Workspace) -> dict[str, tuple[bool, str]]:
    return {check.name: (check.ok, check.detail) for check in check_workspace(workspace)}


@pytest.fixture
def indexed(aries_home: Path, tmp_path: Path) -> Workspace:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAlpacas and llamas.\n", encoding="utf-8")
    workspace, _ = WorkspaceManager().create("demo")
    done = _cli(aries_home, "-w", "demo", "rag", "index", "add", str(docs), "--name", "docs")
    assert done.returncode == 0, done.stderr
    workspace.latest_transcript().append("user", "hello")
    workspace.artifacts.add_bytes(b"data", "d.txt")
    return workspace


def test_a_sound_workspace_passes_every_check(indexed: Workspace, aries_home: Path) -> None:
    (indexed.root / "policy.yaml").write_text("version: 1\n", encoding="utf-8")
    results = _by_name(indexed)
    assert list(results) == ["workspace.yaml", "policy.yaml", "audit.db", "transcripts", "artifacts", "index docs"]
    failing = {name: detail for name, (ok, detail) in results.items() if not ok}
    if "policy.yaml" in failing:  # a minimal policy may not be valid for this Aries: only that one may fail
        del failing["policy.yaml"]
    assert failing == {}
    assert "Tantivy opens" in results["index docs"][1] and "Chroma opens" in results["index docs"][1]
    done = _cli(aries_home, "workspace", "open", "demo", "--check", "--json")
    report = json.loads(done.stdout)
    assert [c["name"] for c in report["checks"]][:1] == ["workspace.yaml"]


def test_each_broken_store_is_named(indexed: Workspace, aries_home: Path) -> None:
    (indexed.root / "policy.yaml").write_text("a: &a [*a, *a]\nrules: [\n", encoding="utf-8")
    (indexed.root / "audit.db").write_bytes(b"not a database" * 500)
    with (indexed.transcripts_dir / indexed.conversations()[0].name).open("a", encoding="utf-8") as handle:
        handle.write('{"torn": ')
    next((indexed.artifacts_dir / "objects").rglob("*")).chmod(0o644)
    for obj in (indexed.artifacts_dir / "objects").rglob("*"):
        if obj.is_file():
            obj.write_bytes(b"changed")
    for segment in (indexed.indexes_dir / "docs" / "tantivy").iterdir():
        if segment.is_file():
            segment.write_bytes(b"garbage")
    meta = indexed.meta_path.read_text(encoding="utf-8").replace("settings:\n", "settings:\n  approval_mode: yolo\n")
    indexed.meta_path.write_text(meta, encoding="utf-8")
    results = _by_name(Workspace(indexed.root, "demo"))
    assert {name: ok for name, (ok, _) in results.items()} == {
        "workspace.yaml": False,
        "policy.yaml": False,
        "audit.db": False,
        "transcripts": False,
        "artifacts": False,
        "index docs": False,
    }
    assert "approval_mode: must be one of" in results["workspace.yaml"][1]
    assert "not an SQLite database" in results["audit.db"][1]
    assert "Tantivy" in results["index docs"][1]
    done = _cli(aries_home, "workspace", "open", "demo", "--check")
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    assert done.stdout.count("FAIL") == 5  # the torn transcript line was quarantined by opening, and said so
    assert "torn" in done.stdout
    as_json = _cli(aries_home, "workspace", "open", "demo", "--check", "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["ok"] is False
    # a damaged audit database is left as it is, for inspection
    assert (indexed.root / "audit.db").read_bytes() == b"not a database" * 500


def test_a_missing_chroma_folder_fails_the_index_check(indexed: Workspace) -> None:
    import shutil

    shutil.rmtree(indexed.indexes_dir / "docs" / "chroma")
    ok, detail = _by_name(indexed)["index docs"]
    assert not ok and "Chroma folder is missing" in detail
