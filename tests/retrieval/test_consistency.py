"""Determinism across processes, crash safety of ingest, and import hygiene."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.retrieval import RetrievalEngine
from services.retrieval.store import IndexStore
from services.retrieval.store_writer import writing
from services.workspace.manager import Workspace

from .builders import make_pdf

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

INGEST_SCRIPT = r"""
import json, sys
from services.workspace.manager import WorkspaceManager
from services.retrieval import RetrievalEngine
ws, _ = WorkspaceManager().create("det")
with RetrievalEngine(ws) as engine:
    report = engine.index_add(sys.argv[1], name="corpus")
    store = engine.indexes.store("corpus")
    chunks = store.manifest.get_chunks(store.manifest.chunk_ids())
    out = {
        "added": report.added,
        "chunks": sorted(
            [c.chunk.chunk_id, c.chunk.hash, c.chunk.source_path, c.chunk.start_offset, c.chunk.end_offset,
             c.chunk.page, c.chunk.section, c.chunk.context, c.chunk.embedding_model]
            for c in chunks.values()
        ),
        "query": [
            [h.handle, round(h.score, 9), h.bm25_rank, h.dense_rank] for h in engine.query("owls at night", k=8).hits
        ],
    }
print(json.dumps(out))
"""


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash", "PYTHONPATH": str(REPO)}, **extra)
    return env


def _corpus(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    for i in range(6):
        (root / "sub" / f"note{i}.md").write_text(
            f"# Note {i}\n\n"
            + " ".join(f"Owls hunt at night in forest {j} and sleep by day." for j in range(i * 15))
            + "\n",
            encoding="utf-8",
        )
    (root / "paper.pdf").write_bytes(make_pdf(["Owls and night vision.", "Page two on rods and cones."]))
    (root / "page.html").write_text("<h1>Barn owls</h1><p>Barn owls screech at night.</p>", encoding="utf-8")
    return root


def test_ingest_is_identical_in_two_processes(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "corpus")
    outputs = []
    for run, seed in enumerate(("1", "987")):
        proc = subprocess.run(
            [sys.executable, "-c", INGEST_SCRIPT, str(root)],
            env=_env(tmp_path / f"home{run}", PYTHONHASHSEED=seed),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    first, second = outputs
    assert len(first["chunks"]) > 10 and len(first["added"]) == 8
    assert first == second


KILL_SCRIPT = r"""
import sys
import services.retrieval.ingest as ingest
from services.workspace.manager import WorkspaceManager
from services.retrieval import RetrievalEngine
ingest.FLUSH_FILES = 1
ws, _ = WorkspaceManager().create("crash")
with RetrievalEngine(ws) as engine:
    def progress(event):
        if event.stage == "commit":
            print("commit", event.done, flush=True)
    engine.index_add(sys.argv[1], name="big", progress=progress)
print("finished", flush=True)
"""


def _check_consistent(store: IndexStore) -> int:
    files = store.manifest.query("SELECT source_path, chunks FROM files")
    for source_path, count in files:
        rows = store.manifest.query("SELECT COUNT(*) FROM chunks WHERE source_path = ?", (source_path,))[0][0]
        assert rows == count, f"{source_path} is half-indexed: {rows} of {count} chunks"
    orphans = store.manifest.query(
        "SELECT COUNT(*) FROM chunks WHERE source_path NOT IN (SELECT source_path FROM files)"
    )
    assert orphans[0][0] == 0
    assert store.manifest.query("SELECT COUNT(*) FROM journal")[0][0] == 0
    _, chunks = store.manifest.counts()
    pending = store.manifest.pending_count()  # keywords first: a kill may leave vectors to fill in
    assert chunks - pending <= store.vectors.count() <= chunks
    assert store.lexical.searcher().num_docs == chunks
    assert store.consistency().ok
    return len(files)


@pytest.mark.parametrize("delay", [0.15, 0.6])
def test_killed_ingest_leaves_no_half_indexed_file(tmp_path: Path, workspace: Workspace, delay: float) -> None:
    root = tmp_path / "big"
    root.mkdir()
    for i in range(40):
        (root / f"doc{i:03}.txt").write_text(
            " ".join(f"Sentence {j} of document {i} about herons and egrets." for j in range(60)), encoding="utf-8"
        )
    home = tmp_path / "home"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(root)],
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    commits = 0
    for line in proc.stdout:
        if line.startswith("commit"):
            commits += 1
            if commits == 3:
                break
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, "the ingest finished before it could be killed"

    from services.workspace.manager import WorkspaceManager

    crashed, _ = WorkspaceManager(home / "workspaces").open("crash")
    with RetrievalEngine(crashed) as engine:
        store = engine.indexes.store("big")  # opening replays the journal
        indexed = _check_consistent(store)
        # Keywords first: the later kill may fall in the vector phase, every file's keywords written.
        assert 3 <= indexed <= 40
        report = engine.index_add(root, name="big")
        assert len(report.unchanged) == indexed and len(report.added) == 40 - indexed
        assert _check_consistent(store) == 40


def test_journal_replay_removes_unfinished_writes(workspace: Workspace, docs: Path) -> None:
    import tantivy

    with RetrievalEngine(workspace) as engine:
        engine.index_add(docs)
        store = engine.indexes.store("docs")
        _, before = store.manifest.counts()
        # What a crash between "written to the stores" and "manifest swapped" leaves behind:
        ghost = "feedfacecafebeef"
        with writing(store) as writer, writer.batch():  # (a writer replays old journals when it starts)
            with store.manifest.transaction() as db:
                db.execute("INSERT INTO journal(chunk_id) VALUES (?)", (ghost,))
            store.vectors.upsert(ids=[ghost], embeddings=[[1.0] + [0.0] * 383], metadatas=[{"source_path": "x"}])
            document = tantivy.Document()
            document.add_text("chunk_id", ghost)
            document.add_text("text", "zebra zebra zebra")
            writer.writer.add_document(document)
            writer.commit()
        assert all(h.chunk_id != ghost for h in engine.query("zebra", k=10).hits)  # never visible
        assert store.vectors.count() == before + 1
    with RetrievalEngine(workspace) as reopened:
        store = reopened.indexes.store("docs")
        assert _check_consistent(store) == 3
        assert store.manifest.counts()[1] == before
