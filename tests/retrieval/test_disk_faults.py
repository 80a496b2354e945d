"""Disk full and read-only file systems during ingest, in a small tmpfs of the test's own.

Each failure is one typed line (never a traceback, never "no index named …" for an index that
exists), the previous state stays intact (the manifest, Tantivy and Chroma agree), and once
space returns the index heals and answers hybrid queries like a fresh index of the same files.
Mounting needs root (or CAP_SYS_ADMIN); the tests skip with the reason when it is refused.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.errors import IndexStorageError
from services.workspaces import Workspace, WorkspaceManager

REPO = Path(__file__).resolve().parents[2]
QUERIES = ["lighthouse keeper storms", "orchard apples frost", "word7 topic3", "river barges cargo"]
TOPICS = ["lighthouse keeper storms", "orchard apples frost", "river barges cargo", "mountain goats cliffs"]

pytestmark = pytest.mark.timeout(600)


def _mount(target: Path, size: str) -> None:
    if os.name != "posix" or not hasattr(os, "geteuid"):
        pytest.skip("tmpfs mounts are a Linux test")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {proc.stderr.strip()}")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs of this test's own."""
    mount = tmp_path / "small"
    mount.mkdir()
    _mount(mount, "8m")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _write_docs(root: Path, first: int, count: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for n in range(first, first + count):
        topic = TOPICS[n % len(TOPICS)]
        body = "\n\n".join(
            f"Paragraph {p} of note {n} about {topic}. "
            + " ".join(f"word{(n + p + i) % 50} topic{n % 7}" for i in range(60))
            for p in range(6)
        )
        (root / f"note{n:03d}.md").write_text(f"# Note {n}: {topic}\n\n{body}\n", encoding="utf-8")


def _fill(mount: Path, leave: int) -> Path:
    """Take all free space of ``mount`` but ``leave`` bytes."""
    filler = mount / "filler"
    free = os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize
    with open(filler, "ab") as handle:
        with contextlib.suppress(OSError):
            handle.write(b"\0" * max(0, free - leave))
    return filler


def _answers(engine: RetrievalEngine, name: str) -> list[list[tuple[str, int | None, int | None]]]:
    return [[(h.handle, h.bm25_rank, h.dense_rank) for h in engine.query(q, k=5, index=name).hits] for q in QUERIES]


def _dense(engine: RetrievalEngine, name: str) -> list[list[float]]:
    """The vector side alone: the similarities of the 10 nearest chunks of each query (ties may swap ids)."""
    store = engine._store(name)
    return [[round(score, 5) for _, score in store.dense(engine.embedder.embed_query(q), 10)] for q in QUERIES]


def _same_results(
    engine: RetrievalEngine, name: str, reference: list[list[tuple[str, int | None, int | None]]]
) -> None:
    """Same vectors; BM25 statistics of an index written in several runs count deleted documents
    until Tantivy merges segments, so fused ranks may shift a little: the best hit stays near the top."""
    for answer, expected in zip(_answers(engine, name), reference, strict=True):
        assert answer[0][0] in [handle for handle, _, _ in expected[:3]]


def _stores_agree(engine: RetrievalEngine, name: str) -> list[str]:
    """The manifest's chunk ids, after checking that Chroma holds exactly those."""
    store = engine._store(name)
    ids = sorted(store.chunk_ids())
    assert sorted(store.vectors.get(include=[])["ids"]) == ids
    return ids


Reference = tuple[list[str], list[list[float]], list[list[tuple[str, int | None, int | None]]]]


def _reference(tmp_path: Path, docs: Path) -> Reference:
    """Chunk ids, dense neighbours and answers of a fresh index of ``docs`` on an ordinary disk."""
    manager = WorkspaceManager(tmp_path / "reference-home" / "workspaces")
    workspace, _ = manager.create("reference")
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        engine.index_add(docs, "notes")
        return _stores_agree(engine, "notes"), _dense(engine, "notes"), _answers(engine, "notes")


def _workspace(mount: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv("ARIES_HOME", str(mount / "home"))
    workspace, _ = WorkspaceManager(mount / "home" / "workspaces").create("full")
    return workspace


def _cli(mount: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARIES_HOME": str(mount / "home"), "AXIOMME_EMBEDDER": "hash", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "app", "-w", "full", *argv], capture_output=True, text=True, env=env, timeout=300
    )


def _one_clear_line(err: str, *, reason: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("aries: ") and reason in lines[-1], err
    assert "Traceback" not in err and "no index named" not in err, err


@pytest.mark.parametrize("leave", [0, 96 * 1024, 1024 * 1024])
def test_disk_full_twice_then_the_index_heals(
    small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leave: int
) -> None:
    docs = tmp_path / "docs"
    _write_docs(docs, 0, 8)
    workspace = _workspace(small_fs, monkeypatch)
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        engine.index_add(docs, "notes")
        before = _stores_agree(engine, "notes")
        files_before = sorted(r.source_path for r in engine._store("notes").files_under(docs.as_posix()))
    _write_docs(docs, 8, 120)  # far more than the space left
    filler = _fill(small_fs, leave)
    for attempt in (1, 2):  # two failures in a row, each in a process of its own (as an operator would)
        if attempt == 1:
            with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
                with pytest.raises(IndexStorageError) as caught:
                    engine.index_add(docs, "notes")
                assert "'notes'" in caught.value.message and "disk is full" in caught.value.message
                assert "\n" not in caught.value.message
        else:
            failed = _cli(small_fs, "rag", "index", "add", str(docs), "--name", "notes")
            assert failed.returncode != 0
            _one_clear_line(failed.stderr, reason="disk is full")
    filler.unlink()
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        # the previous state is intact: the same files, and the stores agree (nothing half-written)
        names = [info.name for info in engine.index_list()]
        assert names == ["notes"]
        store = engine._store("notes")
        assert sorted(r.source_path for r in store.files_under(docs.as_posix()))[: len(files_before)] == files_before
        if store.vector_health.ok:
            _stores_agree(engine, "notes")
            assert set(before) <= set(store.chunk_ids())
        # and it heals: the next add completes the work and queries are hybrid again
        report = engine.index_add(docs, "notes")
        assert not report.errors and engine.index_info("notes").status == "ok"
        assert all(engine.query(q, index="notes").mode == "hybrid" for q in QUERIES)
        reference_ids, reference_dense, reference_answers = _reference(tmp_path, docs)
        assert _stores_agree(engine, "notes") == reference_ids
        assert _dense(engine, "notes") == reference_dense
        _same_results(engine, "notes", reference_answers)


def test_new_index_on_a_full_disk(small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    _write_docs(docs, 0, 60)
    workspace = _workspace(small_fs, monkeypatch)
    filler = _fill(small_fs, 32 * 1024)
    for _ in (1, 2):
        failed = _cli(small_fs, "rag", "index", "add", str(docs), "--name", "fresh")
        assert failed.returncode != 0
        _one_clear_line(failed.stderr, reason="disk is full")
    filler.unlink()
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        assert all(info.status == "ok" for info in engine.index_list())  # nothing half-created is hidden or broken
        engine.index_add(docs, "fresh")
        assert engine.query("orchard apples", index="fresh").mode == "hybrid"
        reference_ids, reference_dense, reference_answers = _reference(tmp_path, docs)
        assert _stores_agree(engine, "fresh") == reference_ids
        assert _dense(engine, "fresh") == reference_dense
        assert _answers(engine, "fresh") == [
            [(h.replace("notes:", "fresh:"), b, d) for h, b, d in answer] for answer in reference_answers
        ]


def test_read_only_file_system(small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    _write_docs(docs, 0, 6)
    workspace = _workspace(small_fs, monkeypatch)
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        engine.index_add(docs, "notes")
        before = _answers(engine, "notes")
    _write_docs(docs, 6, 4)
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    try:
        with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
            with pytest.raises(IndexStorageError, match="read-only"):
                engine.index_add(docs, "notes")
            assert [info.name for info in engine.index_list()] == ["notes"]  # never "no index named …"
        failed = _cli(small_fs, "rag", "index", "add", str(docs), "--name", "notes")
        assert failed.returncode != 0
        _one_clear_line(failed.stderr, reason="read-only")
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=True)
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        assert _answers(engine, "notes") == before  # untouched
        report = engine.index_add(docs, "notes")
        assert len(report.added) == 4 and engine.index_info("notes").status == "ok"
        _stores_agree(engine, "notes")
