"""Faults that heal: a damaged or missing vector store is detected, said, searched around and rebuilt;
a file that stops loading keeps its chunks; the threshold in force is audited.

Real Tantivy, Chroma and SQLite on temp dirs; the deterministic hash embedder.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.errors import IndexCorrupt
from services.retrieval.ingest import Cancelled
from services.retrieval.models import ProgressEvent
from services.retrieval.store_manifest import SCHEMA_VERSION
from services.tools.session_doctor import session_doctor
from services.workspace.manager import Workspace
from tests.retrieval.builders import make_pdf

REPO = Path(__file__).resolve().parents[2]
QUERIES = ["install pip virtual environment", "cats purr", "aspirin stroke", "debian apt libraries"]

pytestmark = pytest.mark.timeout(300)


def _open(workspace: Workspace) -> RetrievalEngine:
    return RetrievalEngine(workspace, RetrievalSettings.from_env())


def _answers(engine: RetrievalEngine) -> list[list[tuple[str, int | None, int | None]]]:
    return [[(h.handle, h.bm25_rank, h.dense_rank) for h in engine.query(q, k=5).hits] for q in QUERIES]


def _chroma_ids(engine: RetrievalEngine, name: str) -> list[str]:
    store = engine.indexes.store(name)
    return sorted(store.vectors.get(include=[])["ids"])


def _build(workspace: Workspace, docs: Path) -> list[list[tuple[str, int | None, int | None]]]:
    with _open(workspace) as engine:
        engine.index_add(docs, "docs")
        return _answers(engine)


def _damage(index_dir: Path, how: str) -> None:
    chroma = index_dir / "chroma"
    if how == "deleted":
        shutil.rmtree(chroma)
    elif how == "empty-files":  # what two disk-full failures left behind
        for path in chroma.rglob("*"):
            if path.is_file():
                path.write_bytes(b"")
    elif how == "garbage":
        (chroma / "chroma.sqlite3").write_bytes(b"\x00not a database\x00" * 512)
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["deleted", "empty-files", "garbage"])
def test_damaged_vector_store_is_detected_searched_around_and_rebuilt(
    workspace: Workspace, docs: Path, how: str
) -> None:
    fresh = _build(workspace, docs)
    index_dir = workspace.indexes_dir / "docs"
    _damage(index_dir, how)
    with _open(workspace) as engine:
        info = engine.index_info("docs")
        assert info.status in ("vectors missing", "vectors damaged") and info.status_detail
        listed = engine.index_list()
        assert listed[0].to_dict()["status"] == info.status
        # keyword-only, with the warning in the result and in the audit row
        result = engine.query("cats purr", k=5)
        assert result.mode == "keyword" and "rag index repair docs" in result.warnings[0]
        assert result.hits and result.hits[0].source_path == "cats.md"
        assert all(hit.dense_rank is None for hit in result.hits)
        record = engine.last()
        assert record is not None and record.params["mode"] == "keyword" and record.params["warnings"]
        # the next index add rebuilds the vectors (unchanged files are not re-read into Chroma otherwise)
        events: list[ProgressEvent] = []
        report = engine.index_add(docs, "docs", progress=events.append)
        _, chunks = engine.indexes.store("docs").manifest.counts()
        assert report.vectors_rebuilt == chunks > 0 and len(report.unchanged) == 3
        assert any(event.stage == "repair" and event.done == chunks for event in events)
        assert engine.index_info("docs").status == "ok"
        assert engine.query("cats purr").mode == "hybrid"
        assert _answers(engine) == fresh
        assert _chroma_ids(engine, "docs") == sorted(engine.indexes.store("docs").manifest.chunk_ids())
    assert not (index_dir / "chroma.rebuild").exists() and not (index_dir / "chroma.old").exists()
    with _open(workspace) as engine:  # and it stays healed after a reopen
        assert engine.index_info("docs").status == "ok" and _answers(engine) == fresh


def test_repair_is_explicit_cancellable_and_checked_by_doctor_and_workspace_check(
    workspace: Workspace, docs: Path
) -> None:
    from services.session.workspace_check import check_workspace

    fresh = _build(workspace, docs)
    _damage(workspace.indexes_dir / "docs", "deleted")
    db = sqlite3.connect(workspace.indexes_dir / "docs" / "manifest.db")  # an interrupted write's journal
    db.execute("INSERT INTO journal(chunk_id) VALUES ('00000000deadbeef')")
    db.commit()
    db.close()
    checks = {c.name: c for c in check_workspace(workspace)}
    assert not checks["index docs"].ok and "rag index repair docs" in checks["index docs"].detail
    with _open(workspace) as engine:
        cancel = threading.Event()
        cancel.set()
        with pytest.raises(Cancelled):
            engine.index_repair("docs", cancel=cancel)
        assert engine.index_info("docs").status == "vectors missing"  # nothing changed
        assert not (workspace.indexes_dir / "docs" / "chroma.rebuild").exists()
        assert engine.indexes.store("docs").manifest.query(
            "SELECT chunk_id FROM journal"
        )  # replayed only once vectors are sound
        assert engine.index_repair("docs") == engine.indexes.store("docs").manifest.counts()[1]
        assert engine.index_info("docs").status == "ok" and _answers(engine) == fresh
        assert engine.indexes.store("docs").manifest.query("SELECT chunk_id FROM journal") == []
    checks = {c.name: c for c in check_workspace(workspace)}
    assert checks["index docs"].ok, checks["index docs"].detail


def test_session_doctor_reports_a_damaged_index(workspace: Workspace, docs: Path) -> None:
    from services.session.session import Session

    _build(workspace, docs)
    _damage(workspace.indexes_dir / "docs", "deleted")
    session = Session(workspace)
    try:
        report = session_doctor(session)
    finally:
        session.close()
    check = next(c for c in report.checks if c.name == "index docs")
    assert not check.ok and "vectors missing" in check.detail and not report.ok


def _cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "app", "-w", "test", *argv], capture_output=True, text=True, env=env, timeout=200
    )


def test_cli_lists_warns_repairs(workspace: Workspace, docs: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    _build(workspace, docs)
    _damage(workspace.indexes_dir / "docs", "empty-files")
    listed = _cli(home, "rag", "index", "list")
    assert listed.returncode == 0 and "vectors missing" in listed.stdout and "rag index repair docs" in listed.stdout
    as_json = json.loads(_cli(home, "rag", "index", "list", "--json").stdout)
    assert as_json[0]["status"] == "vectors missing" and as_json[0]["status_detail"]
    query = _cli(home, "rag", "query", "cats", "purr", "--json")
    assert query.returncode == 0 and "warning" in query.stderr and "Traceback" not in query.stderr
    result = json.loads(query.stdout)
    assert result["mode"] == "keyword" and result["warnings"] and result["hits"][0]["source_path"] == "cats.md"
    repaired = _cli(home, "rag", "index", "repair", "docs")
    assert repaired.returncode == 0, repaired.stderr
    assert "vectors rebuilt" in repaired.stdout and "now: ok" in repaired.stdout
    result = json.loads(_cli(home, "rag", "query", "cats", "purr", "--json").stdout)
    assert result["mode"] == "hybrid" and result["warnings"] == [] and result["hits"][0]["dense_rank"] is not None


# -- a file that stops loading keeps its chunks ------------------------------------------------------


def test_corrupted_file_keeps_its_chunks_and_is_listed_failed(engine: RetrievalEngine, tmp_path: Path) -> None:
    root = tmp_path / "papers"
    root.mkdir()
    pdf = root / "swans.pdf"
    good = make_pdf(["Mute swans nest beside quiet lakes.", "Cygnets hatch after five weeks."])
    pdf.write_bytes(good)
    (root / "notes.md").write_text("# Notes\n\nHerons wade in shallow water.\n", encoding="utf-8")
    engine.index_add(root, "papers")
    before = [h.handle for h in engine.query("swans nest lakes", k=3).hits if h.source_path == "swans.pdf"]
    assert before
    # truncated: the PDF no longer loads
    pdf.write_bytes(good[: len(good) // 3])
    report = engine.index_add(root, "papers")
    assert report.kept == ["swans.pdf"] and "swans.pdf" not in report.removed
    assert [issue.path for issue in report.errors] == ["swans.pdf"]
    after = [h.handle for h in engine.query("swans nest lakes", k=3).hits if h.source_path == "swans.pdf"]
    assert after == before  # the old passages are still found
    failed = engine.index_info("papers").failed
    assert [(f["path"], f["code"]) for f in failed] == [("swans.pdf", report.errors[0].code)]
    assert failed[0]["message"] == report.errors[0].message
    # still failing on the next run: still kept, still listed
    engine.index_add(root, "papers")
    assert [f["path"] for f in engine.index_info("papers").failed] == ["swans.pdf"]
    # fixed: listed ok again
    pdf.write_bytes(good)
    fixed = engine.index_add(root, "papers")
    assert fixed.errors == [] and engine.index_info("papers").failed == []
    # replaced by invalid bytes, then deleted: dropped as before, and no longer listed failed
    pdf.write_bytes(b"%PDF-1.7\n\xff\xfe garbage")
    engine.index_add(root, "papers")
    assert [f["path"] for f in engine.index_info("papers").failed] == ["swans.pdf"]
    pdf.unlink()
    gone = engine.index_add(root, "papers")
    assert gone.removed == ["swans.pdf"] and engine.index_info("papers").failed == []
    assert all(h.source_path != "swans.pdf" for h in engine.query("swans nest lakes", k=5).hits)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_keeps_its_chunks(engine: RetrievalEngine, docs: Path) -> None:
    engine.index_add(docs, "docs")
    target = docs / "cats.md"
    target.chmod(0)
    try:
        report = engine.index_add(docs, "docs")
        assert report.kept == ["cats.md"]
        assert engine.query("cats purr", k=1).hits[0].source_path == "cats.md"
        assert [f["path"] for f in engine.index_info("docs").failed] == ["cats.md"]
    finally:
        target.chmod(0o644)
    engine.index_add(docs, "docs")
    assert engine.index_info("docs").failed == []


def test_cli_index_list_shows_failed_files(workspace: Workspace, docs: Path, tmp_path: Path) -> None:
    _build(workspace, docs)
    (docs / "notes.txt").write_bytes(b"\x00\x01\x02\xff binary now")
    added = _cli(tmp_path / "home", "rag", "index", "add", str(docs), "--name", "docs")
    assert "notes.txt" in added.stdout and "previous chunks are kept" in added.stdout
    listed = _cli(tmp_path / "home", "rag", "index", "list")
    assert "failed   notes.txt" in listed.stdout and "previous chunks are kept" in listed.stdout
    as_json = json.loads(_cli(tmp_path / "home", "rag", "index", "list", "--json").stdout)
    assert [f["path"] for f in as_json[0]["failed"]] == ["notes.txt"]


# -- the manifest schema --------------------------------------------------------------------------


def test_version_1_manifest_is_migrated_and_a_newer_one_refused(workspace: Workspace, docs: Path) -> None:
    fresh = _build(workspace, docs)
    manifest = workspace.indexes_dir / "docs" / "manifest.db"
    db = sqlite3.connect(manifest)
    db.execute("DROP TABLE failures")
    db.execute("DROP TABLE pending")
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with _open(workspace) as engine:
        assert engine.index_info("docs").failed == []  # listed before any open: no failures table yet
        assert _answers(engine) == fresh
        assert engine.indexes.store("docs").manifest.get_meta("schema_version") == SCHEMA_VERSION
    db = sqlite3.connect(manifest)
    assert db.execute("SELECT COUNT(*) FROM failures").fetchone() == (0,)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with _open(workspace) as engine, pytest.raises(IndexCorrupt, match="schema version 99"):
        engine.query("cats")
    with _open(workspace) as engine:
        info = engine.index_info("docs")
        assert info.status == "unreadable" and "schema version 99" in (info.status_detail or "")


# -- the threshold in the audit ---------------------------------------------------------------------


def test_query_records_the_threshold(
    workspace: Workspace, docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _build(workspace, docs)
    result = json.loads(_cli(tmp_path / "home", "rag", "query", "cats", "purr", "--json").stdout)
    threshold = result["threshold"]
    assert threshold["min_score"] == 0.3 and threshold["min_bm25"] == 1.0
    assert result["hits"][0]["handle"] in threshold["kept"]
    last = json.loads(_cli(tmp_path / "home", "rag", "last", "--json").stdout)
    assert last["params"]["threshold"] == threshold
    monkeypatch.setenv("AXIOMME_MIN_SCORE", "0.99")
    with _open(workspace) as engine:
        answer = engine.query("cats purr")
        assert answer.threshold is not None and answer.threshold["min_score"] == 0.99
        record = engine.last()
        assert record is not None and record.params["threshold"]["min_score"] == 0.99
