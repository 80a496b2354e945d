"""Keywords first, vectors behind (issue 32 item 4).

``rag index add`` makes documents searchable by keyword as soon as they are chunked; the vectors
are written after, a batch per step.  A query meanwhile fuses BM25 over every chunk with dense search
over the embedded part and says how much that is; a partly embedded index is a state, not damage;
a kill during the vector phase is continued by the next add (never by a query).  Real Tantivy,
Chroma and the hash embedder; the kill is a real SIGKILL at a crash point.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from services.hashing import sha256_hex
from services.retrieval import RetrievalEngine, RetrievalSettings, backfill
from services.retrieval.chunking import chunk_document, default_counter
from services.retrieval.ingest import FLUSH_CHUNKS, Batch, flush
from services.retrieval.loaders import load_bytes
from services.retrieval.models import ProgressEvent
from services.retrieval.store_manifest import SCHEMA_VERSION, FileRecord
from services.retrieval.store_writer import writing
from services.workspace.manager import Workspace

REPO = Path(__file__).resolve().parents[2]
WORDS = ["lighthouse", "orchard", "river", "granite", "keeper", "apples", "barges", "quartz", "storm", "frost"]

pytestmark = pytest.mark.timeout(300)


def _corpus(root: Path, count: int = 40) -> Path:
    """``count`` documents; document ``i`` alone holds the word ``kestrel<i>``."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        body = " ".join(f"{WORDS[(i + j) % 10]} {WORDS[(i * 3 + j) % 10]}" for j in range(12))
        (root / f"doc{i:03}.md").write_text(f"# Document {i}\n\nkestrel{i} {body}\n", encoding="utf-8")
    return root


def _engine(workspace: Workspace) -> RetrievalEngine:
    return RetrievalEngine(workspace, RetrievalSettings.from_env())


def _cli(home: Path, *argv: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash", "PYTHONPATH": str(REPO), **(extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "app", "-w", "test", *argv], capture_output=True, text=True, env=env, timeout=200
    )


def test_keyword_searchable_before_the_vectors_and_a_query_fuses_what_is_there(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two steps of the vector phase (driven by the progress events), a query answers from
    BM25 over every chunk plus dense over the embedded part, says the share, and the audit row
    records it; the index lists and checks as sound with ``vectors: N %``."""
    monkeypatch.setattr(backfill, "FILL_BATCH", 10)
    root = _corpus(tmp_path / "docs")
    seen: dict[int, tuple[float, str | None, str | None, str]] = {}  # embedded → what was said then
    with _engine(workspace) as engine:

        def progress(event: ProgressEvent) -> None:
            if event.stage != "vectors":
                return
            pending = engine.indexes.store("docs").manifest.pending_count()
            if pending in (0, 40) or 40 - pending in seen:  # the midway states, once each
                return
            result = engine.query("kestrel37", k=3, index="docs")
            top = result.hits[0]
            # doc037 is among the last to get its vector: BM25 finds it, dense cannot yet
            assert top.source_path == "doc037.md" and top.bm25_rank == 1 and top.dense_rank is None
            assert result.mode == "hybrid" and not result.warnings
            assert result.dense_share == (40 - pending) / 40
            assert any(h.dense_rank is not None for h in result.hits)  # the embedded part answers
            record = engine.last()
            assert record is not None and record.params["dense_share"] == result.dense_share
            info = engine.index_info("docs")
            assert info.status == "ok"
            check = engine.index_check("docs")
            assert check.ok and check.pending == pending
            seen[40 - pending] = (result.dense_share, result.dense_note, info.vectors_note, check.summary())

        report = engine.index_add(root, "docs", progress=progress)
        assert report.status == "ok" and report.vectors_written == 40 and report.vectors_pending == 0
        assert report.keywords_s is not None and report.keywords_s <= report.elapsed_s
        assert sorted(seen) == [10, 20, 30]
        for embedded, (share, note, listed, summary) in seen.items():
            percent = embedded * 100 // 40
            assert share == embedded / 40 and note == f"dense: {percent} % of this index"
            assert listed == f"vectors: {percent} %" and f"vectors: {percent} %" in summary
        assert engine.indexes.store("docs").vector_health.ok  # never marked damaged meanwhile
        done = engine.query("kestrel37", k=3, index="docs")
        assert done.dense_share == 1.0 and done.dense_note is None and done.hits[0].dense_rank is not None
        check = engine.index_check("docs")
        assert check.ok and check.pending == 0 and check.chroma == check.manifest == 40


def test_a_writer_is_not_blocked_for_the_whole_vector_phase(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer lock is taken per step: while the first add fills in its vectors, an update of a
    file (a watcher's or a viewer's batch) goes through at once and is searchable by keyword."""
    monkeypatch.setattr(backfill, "FILL_BATCH", 10)
    root = _corpus(tmp_path / "docs")
    with _engine(workspace) as engine:
        updated: list[float] = []

        def progress(event: ProgressEvent) -> None:
            if event.stage != "vectors" or updated or event.done < 10:
                return
            (root / "doc000.md").write_text("# Changed\n\nzephyrine appears now\n", encoding="utf-8")
            worker = threading.Thread(
                target=lambda: updated.append(
                    engine.index_update("docs", root, ["doc000.md"], wait_s=5).elapsed_s  # IndexBusy after 5 s
                )
            )
            worker.start()
            worker.join(60)
            assert updated, "the update did not get the writer lock between two steps"
            hit = engine.query("zephyrine", k=1, index="docs").hits[0]
            assert hit.source_path == "doc000.md" and hit.bm25_rank == 1

        report = engine.index_add(root, "docs", progress=progress)
        assert updated and report.vectors_pending == 0
        assert engine.index_check("docs").ok and engine.index_check("docs").chroma == 40


def test_a_cancelled_vector_phase_leaves_a_sound_index_that_the_next_add_completes(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backfill, "FILL_BATCH", 10)
    root = _corpus(tmp_path / "docs")
    cancel = threading.Event()
    with _engine(workspace) as engine:

        def progress(event: ProgressEvent) -> None:
            if event.stage == "vectors" and engine.indexes.store("docs").manifest.pending_count() <= 20:
                cancel.set()  # after the second step is written

        report = engine.index_add(root, "docs", progress=progress, cancel=cancel)
        assert report.cancelled and report.exit_code == 130
        assert report.vectors_pending == 20 and "keyword only" in report.summary()
        assert engine.indexes_pending() == ["docs"]
        query = engine.query("kestrel39", k=1, index="docs")
        assert query.hits[0].source_path == "doc039.md" and query.dense_share == 0.5
        assert engine.indexes.store("docs").manifest.pending_count() == 20  # a query never fills
        again = engine.index_add(root, "docs")
        assert again.status == "ok" and len(again.unchanged) == 40 and again.vectors_written == 20
        assert engine.indexes_pending() == [] and engine.index_check("docs").chroma == 40


KILLED = """
import sys
from services.hashing import sha256_hex
from services.retrieval import RetrievalEngine, RetrievalSettings, backfill
from services.workspace.manager import WorkspaceManager
backfill.FILL_BATCH = 10
workspace, _ = WorkspaceManager().open("test")
with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
    engine.index_add(sys.argv[1], "docs")
print("finished", flush=True)
"""


def test_kill_during_the_vector_phase_then_check_list_query_and_resume(workspace: Workspace, tmp_path: Path) -> None:
    """SIGKILL once the first step of vectors is written: ``rag index check`` passes and says
    ``vectors: 25 %``, ``rag index list`` says it, ``rag query`` answers and says the dense share
    (and leaves the vectors alone), and the next ``rag index add`` writes the rest."""
    home = tmp_path / "home"
    root = _corpus(tmp_path / "docs")
    env = {**os.environ, "ARIES_HOME": str(home), "PYTHONPATH": str(REPO), backfill.CRASH_VARIABLE: "step"}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, str(root)], env=env, capture_output=True, text=True, timeout=200, cwd=tmp_path
    )
    assert killed.returncode == -signal.SIGKILL and "finished" not in killed.stdout
    check = _cli(home, "rag", "index", "check", "docs")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "consistent" in check.stdout and "vectors: 25 %" in check.stdout
    listed = _cli(home, "rag", "index", "list")
    assert "vectors: 25 %" in listed.stdout and " ok " in listed.stdout and "repair" not in listed.stdout
    as_json = json.loads(_cli(home, "rag", "index", "list", "--json").stdout)
    assert as_json[0]["status"] == "ok" and as_json[0]["vectors_pending"] == 30
    query = _cli(home, "rag", "query", "kestrel39")
    assert query.returncode == 0 and "dense: 25 % of this index" in query.stdout and "doc039.md" in query.stdout
    assert json.loads(_cli(home, "rag", "index", "list", "--json").stdout)[0]["vectors_pending"] == 30
    added = _cli(home, "rag", "index", "add", str(root), "--name", "docs", "--json")
    report = json.loads(added.stdout)
    assert added.returncode == 0 and report["vectors_written"] == 30 and report["vectors_pending"] == 0
    assert len(report["unchanged"]) == 40
    final = _cli(home, "rag", "index", "check", "docs", "--json")
    assert json.loads(final.stdout)["chroma"] == 40 and final.returncode == 0


def test_an_index_of_manifest_version_2_opens_answers_and_takes_keywords_first(
    workspace: Workspace, tmp_path: Path
) -> None:
    """An index as the previous Aries wrote it (every batch embedded as it was written, manifest
    schema 2 without the ``pending`` table) is migrated on open, answers hybrid with the full dense
    share, and takes new documents keywords first."""
    root = _corpus(tmp_path / "docs", 12)
    with _engine(workspace) as engine:
        store = engine.indexes.store("docs", create=True)
        embedder = engine.indexes.check_model(store, record=True)

        key = engine.chunk_config.key(default_counter())
        root_key = root.resolve().as_posix()
        store.manifest.add_root(root_key)
        batch = Batch()
        for path in sorted(root.iterdir()):
            data = path.read_bytes()
            chunks = chunk_document(
                load_bytes("text/markdown", data),
                path.name,
                embedding_model=embedder.model_id,
                config=engine.chunk_config,
            )
            record = FileRecord(path.name, root_key, sha256_hex(data), len(data), "text/markdown", None, None, key)
            batch.files.append((record, chunks))
        assert batch.chunk_count < FLUSH_CHUNKS
        with writing(store) as writer:
            flush(writer, embedder, batch)  # the eager path: vectors with the rows
        engine.indexes.set_active("docs")
    manifest = workspace.indexes_dir / "docs" / "manifest.db"
    db = sqlite3.connect(manifest)
    db.execute("DROP TABLE pending")
    db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with _engine(workspace) as engine:
        info = engine.index_info("docs")
        assert info.status == "ok" and info.vectors_pending == 0 and info.files == 12
        result = engine.query("kestrel7", k=3)
        assert result.hits[0].source_path == "doc007.md" and result.dense_share == 1.0 and result.mode == "hybrid"
        assert engine.indexes.store("docs").manifest.get_meta("schema_version") == SCHEMA_VERSION
        assert engine.index_check("docs").ok
        (root / "new.md").write_text("# New\n\nxylophone arrives keywords first\n", encoding="utf-8")
        report = engine.index_add(root, "docs")
        assert report.added == ["new.md"] and len(report.unchanged) == 12 and report.vectors_written == 1
        assert engine.query("xylophone", k=1).hits[0].dense_rank is not None


def test_an_add_leaves_its_vectors_to_the_aries_filling_them_and_says_so(workspace: Workspace, tmp_path: Path) -> None:
    """Another Aries (here a thread) holds ``docs.vectors.lock``: the add makes its files searchable by
    keyword and leaves their vectors to it; ``index_fill`` (the resume entry point) writes them later."""
    from services.retrieval.store_locks import IndexLocks

    root = _corpus(tmp_path / "docs", 8)
    holding, release = threading.Event(), threading.Event()

    def other_filler() -> None:
        with IndexLocks(workspace.indexes_dir, "docs").filler() as taken:
            assert taken
            holding.set()
            release.wait(60)

    other = threading.Thread(target=other_filler)
    other.start()
    try:
        assert holding.wait(10)
        with _engine(workspace) as engine:
            report = engine.index_add(root, "docs")
            assert report.status == "ok" and report.vectors_elsewhere and report.vectors_pending == 8
            assert "another Aries is writing them now" in report.summary()
            assert engine.query("kestrel3", k=1).hits[0].source_path == "doc003.md"
            busy = engine.index_fill("docs")
            assert busy.busy and busy.written == 0
            release.set()
            other.join(10)
            filled = engine.index_fill("docs")
            assert filled.written == 8 and filled.pending == 0 and filled.note() == "vectors: 100 %"
    finally:
        release.set()
        other.join(10)
