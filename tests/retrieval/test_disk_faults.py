"""Disk full and read-only file systems, in a small tmpfs of the test's own.

Each failure is one typed line (never a traceback, never "no index named …" for an index that
exists), the previous state stays intact (the manifest, Tantivy and Chroma agree), and once
space returns the index heals and answers hybrid queries like a fresh index of the same files.
On a read-only file system (or a folder the user cannot write) reading still works: queries
(keyword-only, said so, not audited, said once), ``rag index list``, ``rag show``, ``rag last``.
Mounting needs root (or CAP_SYS_ADMIN); the tests skip with the reason when it is refused.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.errors import IndexStorageError
from services.retrieval.store_locks import IndexLocks
from services.workspace.manager import Workspace, WorkspaceManager

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
    store = engine.indexes.store(name)
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
    store = engine.indexes.store(name)
    ids = sorted(store.manifest.chunk_ids())
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
        files_before = sorted(
            r.source_path for r in engine.indexes.store("notes").manifest.files_under(docs.as_posix())
        )
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
        store = engine.indexes.store("notes")
        assert (
            sorted(r.source_path for r in store.manifest.files_under(docs.as_posix()))[: len(files_before)]
            == files_before
        )
        if store.vector_health.ok:
            _stores_agree(engine, "notes")
            assert set(before) <= set(store.manifest.chunk_ids())
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


def _remount(mount: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(mount)], check=True, capture_output=True)


@contextlib.contextmanager
def _read_only(mount: Path) -> Iterator[None]:
    _remount(mount, "ro")
    try:
        yield
    finally:
        _remount(mount, "rw")


def _keyword(engine: RetrievalEngine, name: str) -> list[list[tuple[str, float]]]:
    """The BM25 side alone: every matching chunk with its score (order of ties aside)."""
    store = engine.indexes.store(name)
    return [sorted((chunk_id, round(score, 4)) for chunk_id, score in store.bm25(q, 100)) for q in QUERIES]


def _reads_work(engine: RetrievalEngine, keyword: list[list[tuple[str, float]]], files: int, *, reason: str) -> None:
    """Queries answer from the keyword index (with the vector store's warning, and "not audited"
    said once), and the index can be listed, shown and its last retrieval read."""
    results = [engine.query(q, k=5, index="notes") for q in QUERIES]
    for result, expected in zip(results, keyword, strict=True):
        assert result.hits and result.mode == "keyword" and result.audit_id is None and not result.audited
        scores = dict(expected)
        assert all(round(hit.bm25_score or 0.0, 4) == scores[hit.chunk_id] for hit in result.hits)
        assert [hit.chunk_id for hit in result.hits] and max(scores.values()) == round(
            result.hits[0].bm25_score or 0, 4
        )
        vector = [w for w in result.warnings if "vector store" in w]
        assert len(vector) == 1 and reason in vector[0] and "keyword-only" in vector[0], result.warnings
    assert _keyword(engine, "notes") == keyword
    unaudited = [w for result in results for w in result.warnings if "not audited" in w]
    assert len(unaudited) == 1 and reason in unaudited[0], unaudited  # said once
    [info] = engine.index_list()
    assert info.name == "notes" and info.files == files and info.status == "vectors unavailable", info
    hit = results[0].hits[0]
    assert engine.show(hit.handle).text == hit.text
    last = engine.last()
    assert last is not None and last.query == QUERIES[-1]  # the last one recorded while it was writable


def _cli_reads_work(run: Callable[..., subprocess.CompletedProcess[str]], *, reason: str) -> None:
    query = run("rag", "query", "lighthouse", "keeper", "storms", "--index", "notes")
    assert query.returncode == 0, query.stderr
    assert "result(s) from 'notes'" in query.stdout and "KEYWORD ONLY" in query.stdout and "notes:" in query.stdout
    lines = [line for line in query.stderr.splitlines() if line.strip()]
    assert all(line.startswith("aries: warning: ") for line in lines) and "Traceback" not in query.stderr, query.stderr
    assert len([line for line in lines if "not audited" in line]) == 1 and reason in query.stderr
    as_json = run("rag", "query", "orchard apples", "--index", "notes", "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["hits"] and data["audit_id"] is None and data["audited"] is False and data["mode"] == "keyword"
    listing = run("rag", "index", "list")
    assert listing.returncode == 0 and "notes" in listing.stdout and "6 files" in listing.stdout, listing
    shown = run("rag", "show", data["hits"][0]["handle"])
    assert shown.returncode == 0 and data["hits"][0]["handle"] in shown.stdout, shown
    last = run("rag", "last")
    assert last.returncode == 0 and QUERIES[-1] in last.stdout, last


def test_read_only_file_system(small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    _write_docs(docs, 0, 6)
    workspace = _workspace(small_fs, monkeypatch)
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        engine.index_add(docs, "notes")
        before = _answers(engine, "notes")
        keyword = _keyword(engine, "notes")
    _write_docs(docs, 6, 4)
    with _read_only(small_fs):
        with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
            with pytest.raises(IndexStorageError, match="read-only"):
                engine.index_add(docs, "notes")
            assert [info.name for info in engine.index_list()] == ["notes"]  # never "no index named …"
            _reads_work(engine, keyword, 6, reason="read-only")
            with pytest.raises(IndexStorageError, match="read-only"):  # and writing still says so
                engine.index_add(docs, "notes")
            with pytest.raises(IndexStorageError, match="read-only"):
                engine.index_drop("notes")
        # the store lock: a reader goes on without a lock file that cannot be made, a writer is refused
        locks = IndexLocks(workspace.indexes_dir, "never-made")
        with locks.store(reader=True):
            pass
        with pytest.raises(OSError) as refused, locks.store():
            pass
        assert refused.value.errno == errno.EROFS
        for argv in (("rag", "index", "add", str(docs), "--name", "notes"), ("rag", "index", "drop", "notes")):
            failed = _cli(small_fs, *argv)
            assert failed.returncode != 0
            _one_clear_line(failed.stderr, reason="read-only")
        _cli_reads_work(lambda *argv: _cli(small_fs, *argv), reason="read-only")
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        assert _answers(engine, "notes") == before  # untouched
        report = engine.index_add(docs, "notes")
        assert len(report.added) == 4 and engine.index_info("notes").status == "ok"
        _stores_agree(engine, "notes")


@pytest.mark.slow
def test_read_only_after_a_killed_writer(small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer killed with its last commit still in the manifest's WAL (``-wal`` and ``-shm`` left
    behind): on the read-only file system the manifest is read with the WAL, not beside it."""
    docs = tmp_path / "docs"
    _write_docs(docs, 0, 6)
    workspace = _workspace(small_fs, monkeypatch)
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        engine.index_add(docs, "notes")
        engine.query(QUERIES[-1], index="notes")
        keyword = _keyword(engine, "notes")
    manifest = workspace.indexes_dir / "notes" / "manifest.db"
    script = (
        "import os, signal, sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1])\n"
        "db.execute('PRAGMA wal_autocheckpoint=0')\n"
        "with db:\n"
        "    db.execute(\"INSERT OR REPLACE INTO meta(key, value) VALUES ('probe', '\\\"in the wal\\\"')\")\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", script, str(manifest)], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert Path(f"{manifest}-wal").stat().st_size > 0 and Path(f"{manifest}-shm").exists()
    with _read_only(small_fs):
        with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
            assert engine.indexes.store("notes").manifest.get_meta("probe") == "in the wal"
            _reads_work(engine, keyword, 6, reason="read-only")
        _cli_reads_work(lambda *argv: _cli(small_fs, *argv), reason="read-only")
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        assert engine.indexes.store("notes").manifest.get_meta("probe") == "in the wal"


@pytest.mark.slow
def test_read_only_wal_without_its_index_is_one_clear_line(
    small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WAL whose ``-shm`` is gone cannot be read where it cannot be written: one clear line,
    never the state from before the WAL's commits."""
    docs = tmp_path / "docs"
    _write_docs(docs, 0, 3)
    workspace = _workspace(small_fs, monkeypatch)
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        engine.index_add(docs, "notes")
    manifest = workspace.indexes_dir / "notes" / "manifest.db"
    script = (
        "import os, signal, sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1])\n"
        "db.execute('PRAGMA wal_autocheckpoint=0')\n"
        "with db:\n"
        '    db.execute("DELETE FROM chunks")\n'
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(manifest)], capture_output=True)
    Path(f"{manifest}-shm").unlink()
    with _read_only(small_fs):
        failed = _cli(small_fs, "rag", "query", "lighthouse", "--index", "notes")
        assert failed.returncode != 0
        _one_clear_line(failed.stderr, reason="manifest.db-wal")
        assert "read-only" in failed.stderr and "nothing is lost" in failed.stderr
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:  # writable again: the WAL is read
        assert engine.indexes.store("notes").manifest.counts()[1] == 0


def _as_nobody(path: Path) -> list[str]:
    """The command prefix that runs as user ``nobody`` (root only), after handing ``path`` over."""
    import pwd

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' to run as")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv is not installed: cannot run as another user")
    subprocess.run(["chown", "-R", f"{nobody.pw_uid}:{nobody.pw_gid}", str(path)], check=True)
    return [setpriv, f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]


def test_folder_that_cannot_be_written(tmp_path: Path) -> None:
    """``chmod -R a-w`` on the Aries home, as a user who is not root (as ``nobody`` when the test
    runs as root): queries, list, show and last work; an ingest is one clear line."""
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="aries-ro-"))  # outside pytest's root-only tmp folder
    try:
        home.chmod(0o755)
        docs = home / "docs"
        _write_docs(docs, 0, 6)
        env = {
            **os.environ,
            "ARIES_HOME": str(home / "home"),
            "AXIOMME_EMBEDDER": "hash",
            "PYTHONPATH": str(REPO),
            "HOME": str(home / "user"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        (home / "user").mkdir()

        def run(*argv: str, prefix: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*prefix, sys.executable, "-m", "app", "-w", "full", *argv],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
                cwd=home,
            )

        assert run("workspace", "new", "full").returncode == 0
        assert run("rag", "index", "add", str(docs), "--name", "notes").returncode == 0
        for q in QUERIES:
            assert run("rag", "query", q, "--index", "notes").returncode == 0
        prefix = _as_nobody(home) if os.geteuid() == 0 else []
        subprocess.run(["chmod", "-R", "a-w", str(home / "home")], check=True)
        _write_docs(home / "more", 0, 2)
        failed = run("rag", "index", "add", str(docs), "--name", "notes", prefix=prefix)
        assert failed.returncode != 0
        _one_clear_line(failed.stderr, reason="permission denied")
        _cli_reads_work(lambda *argv: run(*argv, prefix=prefix), reason="cannot be written")
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(home)], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
