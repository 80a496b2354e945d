"""Readers beside writers, one writer at a time, SIGKILL at any moment of an ingest (issue 10, items 0 and 4).

Real processes (the ``aries`` CLI and small scripts), real Tantivy, Chroma and SQLite on temp dirs,
the deterministic hash embedder.  After every scenario the three stores are compared with
:meth:`IndexStore.consistency` and the index is queried.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.store_locks import IndexLocks
from services.workspace.manager import Workspace, WorkspaceManager

pytestmark = [pytest.mark.timeout(420), pytest.mark.slow]  # minutes on a loaded 2-core machine

REPO = Path(__file__).resolve().parents[2]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash", "PYTHONPATH": str(REPO)}, **extra)
    return env


def _aries(*args: str) -> list[str]:
    return [sys.executable, "-X", "faulthandler", "-m", "app.cli", "-w", "rw", *args]


def _write_corpus(root: Path, files: int, version: int, sentences: int = 70, prefix: str = "doc") -> None:
    """``files`` documents whose text depends on ``version`` (so a re-ingest replaces every chunk)."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        text = " ".join(
            f"Sentence {j} of document {i} version {version} about herons, egrets and owls." for j in range(sentences)
        )
        (root / f"{prefix}{i:03}.txt").write_text(text, encoding="utf-8")


def _assert_whole(engine: RetrievalEngine, name: str = "docs") -> int:
    """Consistent stores, no journal left, and a hybrid query that answers from live chunks."""
    result = engine.index_check(name)
    assert result.ok, result.summary()
    hits = engine.query("herons egrets owls", k=5, index=name).hits
    assert hits and all(hit.dense_rank or hit.bm25_rank for hit in hits)
    return result.manifest


def _open(home: Path) -> tuple[Workspace, RetrievalEngine]:
    workspace, _ = WorkspaceManager(home / "workspaces").open("rw")
    return workspace, RetrievalEngine(workspace, RetrievalSettings.from_env())


# -- queries during an ingest ----------------------------------------------------------------

READER = r"""
import sys, time
from services.workspace.manager import WorkspaceManager
from services.retrieval import RetrievalEngine
from services.errors import AriesError
ws, _ = WorkspaceManager().open("rw")
count = errors = 0
with RetrievalEngine(ws) as engine:   # one long-lived reader, like the TUI: its Chroma client goes stale
    while True:
        try:
            engine.query("herons egrets", k=5, index="docs")
            count += 1
        except AriesError as exc:
            if "no index named" not in exc.message:
                errors += 1
                print("error", exc.message, flush=True)
        print("queries", count, errors, flush=True)
        time.sleep(0.05)
"""


def test_cli_queries_during_cli_ingests_never_damage_the_index(tmp_path: Path) -> None:
    """Ten rounds of ``aries rag index add`` (the first one creates the index, each later one replaces
    every chunk) while CLI queries and a long-lived reader process query the same index."""
    home = tmp_path / "home"
    env = _env(home)
    subprocess.run([sys.executable, "-m", "app.cli", "workspace", "new", "rw"], env=env, check=True, cwd=tmp_path)
    root = tmp_path / "docs"
    rng = random.Random(10)
    reader_out = (tmp_path / "reader.out").open("w")
    reader = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", READER], env=env, stdout=reader_out, stderr=subprocess.STDOUT
    )
    failures: list[str] = []
    queries = 0
    try:
        for round_ in range(10):
            _write_corpus(root, 40, round_)
            writer = subprocess.Popen(
                _aries("rag", "index", "add", str(root), "--name", "docs"),
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=tmp_path,
            )
            readers = []
            for _ in range(2):  # CLI queries started while the ingest starts up, embeds and writes
                time.sleep(rng.uniform(0.0, 1.0))
                readers.append(
                    subprocess.Popen(
                        _aries("rag", "query", "herons", "egrets", "--index", "docs", "--json"),
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                        cwd=tmp_path,
                    )
                )
            for query in readers:
                _, query_err = query.communicate(timeout=120)
                queries += 1
                if query.returncode != 0 and "no index named" not in query_err:
                    failures.append(f"round {round_}: query rc={query.returncode}: {query_err.strip()[-300:]}")
            try:
                _, err = writer.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                writer.send_signal(signal.SIGABRT)  # -X faulthandler: the stacks go to stderr
                _, err = writer.communicate()
            assert writer.returncode == 0, f"round {round_}: ingest failed: {err}"
            workspace, engine = _open(home)
            with engine:
                result = engine.index_check("docs")
                assert result.ok, f"round {round_}: {result.summary()}"
    finally:
        reader.kill()
        reader.wait()
        reader_out.close()
    out = (tmp_path / "reader.out").read_text()
    assert not failures, failures
    assert reader.returncode == -signal.SIGKILL, f"the long-lived reader died: {out[-1500:]}"
    lines = [line.split() for line in out.splitlines() if line.startswith("queries")]
    assert lines and int(lines[-1][1]) > 20 and int(lines[-1][2]) == 0, out[-1000:]
    assert queries == 20
    check = subprocess.run(
        _aries("rag", "index", "check", "docs", "--json"), env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert check.returncode == 0 and json.loads(check.stdout)["ok"], check.stdout + check.stderr
    workspace, engine = _open(home)
    with engine:
        assert _assert_whole(engine) > 0
        for round_ in range(10):  # the last round's text is what is indexed, nothing older
            hits = engine.query(f"version {round_}", k=3, index="docs").hits
            assert all("version 9" in hit.text for hit in hits)


def test_a_long_lived_engine_sees_another_process_write_at_its_next_query(tmp_path: Path) -> None:
    """A query does not reload Tantivy itself: the other process's batches move the manifest's
    generation and the engine opens the index again before its next query, so the BM25 side
    finds a word that only the other process indexed (and the dense side, and the chunk rows)."""
    home = tmp_path / "home"
    env = _env(home)
    subprocess.run([sys.executable, "-m", "app.cli", "workspace", "new", "rw"], env=env, check=True, cwd=tmp_path)
    root = tmp_path / "docs"
    _write_corpus(root, 3, 0, sentences=5)

    def add_in_another_process() -> None:
        command = _aries("rag", "index", "add", str(root), "--name", "docs")
        done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, done.stderr

    add_in_another_process()
    os.environ["ARIES_HOME"] = str(home)
    try:
        workspace, engine = _open(home)
        with engine:
            assert not any("zanzibar" in hit.text for hit in engine.query("zanzibar", k=5, index="docs").hits)
            (root / "new.txt").write_text("A note about zanzibar and its herons.", encoding="utf-8")
            add_in_another_process()
            hits = engine.query("zanzibar", k=5, index="docs").hits
            assert hits and "zanzibar" in hits[0].text and hits[0].bm25_rank == 1
        workspace.close()
    finally:
        os.environ.pop("ARIES_HOME", None)


def test_engine_queries_in_threads_while_the_same_engine_ingests(workspace: Workspace, tmp_path: Path) -> None:
    """The TUI's case: query threads beside the ingest worker of the same engine.  Every answer comes
    from one whole state of each file (all chunks of one version), and the stores agree after each round."""
    import services.retrieval.ingest as ingest_module

    root = tmp_path / "docs"
    stop = threading.Event()
    errors: list[BaseException] = []
    answered = 0
    assert ingest_module.FLUSH_FILES > 16

    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        _write_corpus(root, 24, 0, sentences=30)
        engine.index_add(root, "docs")

        def query_loop() -> None:
            nonlocal answered
            while not stop.is_set():
                try:
                    result = engine.query("herons egrets owls", k=10, index="docs")
                    versions = {hit.text.split(" version ")[1].split()[0] for hit in result.hits}
                    assert len(versions) == 1, versions  # one batch = one round: before it or after it
                    answered += 1
                except BaseException as exc:  # reported below
                    errors.append(exc)
                    return

        threads = [threading.Thread(target=query_loop) for _ in range(3)]
        for thread in threads:
            thread.start()
        try:
            for version in range(1, 11):
                _write_corpus(root, 24, version, sentences=30)
                report = engine.index_add(root, "docs")
                assert len(report.updated) == 24
                assert engine.index_check("docs").ok
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
        assert not errors, errors[:3]
        assert answered > 10
        _assert_whole(engine)
        texts = {hit.text.split(" version ")[1].split()[0] for hit in engine.query("herons", k=50).hits}
        assert texts == {"10"}


# -- one writer at a time ----------------------------------------------------------------------


def test_second_cli_writer_waits_with_a_message_or_refuses_after_its_timeout(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = _env(home)
    subprocess.run([sys.executable, "-m", "app.cli", "workspace", "new", "rw"], env=env, check=True, cwd=tmp_path)
    root = tmp_path / "docs"
    _write_corpus(root, 5, 0)
    locks = IndexLocks(home / "workspaces" / "rw" / "indexes", "docs")
    with locks.writer():  # this test process is "another Aries" writing index docs
        refused = subprocess.run(
            _aries("rag", "index", "add", str(root), "--name", "docs", "--wait", "1"),
            env=env,
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        waiting = subprocess.Popen(
            _aries("rag", "index", "add", str(root), "--name", "docs"),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        assert waiting.stderr is not None
        line = waiting.stderr.readline()
        time.sleep(0.5)
        assert waiting.poll() is None  # still waiting
    out, err = waiting.communicate(timeout=60)
    pid = os.getpid()
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert f"index 'docs' is being written by another Aries (pid {pid}); gave up after 1 s" in refused.stderr
    assert f"index 'docs' is being written by another Aries (pid {pid}); waiting… Ctrl+C to stop" in line
    assert waiting.returncode == 0, err
    assert "5 added" in out
    workspace, engine = _open(home)
    with engine:
        assert _assert_whole(engine) == 35


def test_two_cli_writers_creating_the_same_index_at_once(tmp_path: Path) -> None:
    """Two ``aries rag index add`` into a new index at the same moment: creation has no race, the
    second waits for the first, and the index ends whole (each file once)."""
    home = tmp_path / "home"
    env = _env(home)
    subprocess.run([sys.executable, "-m", "app.cli", "workspace", "new", "rw"], env=env, check=True, cwd=tmp_path)
    first, second = tmp_path / "a" / "docs", tmp_path / "b" / "docs"
    _write_corpus(first, 120, 1, prefix="a")
    _write_corpus(second, 120, 2, prefix="b")
    procs = [
        subprocess.Popen(
            _aries("rag", "index", "add", str(root), "--name", "docs"),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        for root in (first, second)
    ]
    outputs = [proc.communicate(timeout=180) for proc in procs]
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    errors = "".join(err for _, err in outputs)
    summaries = "".join(out for out, _ in outputs)
    # whichever came second either waited (and said so) or found the lock free after the first had finished
    assert "120 added" in summaries
    assert "waiting… Ctrl+C to stop" in errors or summaries.count("120 added") == 1
    workspace, engine = _open(home)
    with engine:
        info = engine.index_info("docs")
        assert len(info.roots) == 2 and info.files == 240
        assert _assert_whole(engine) == info.chunks


# -- SIGKILL at random moments ---------------------------------------------------------------

KILL_SCRIPT = r"""
import sys
import services.retrieval.ingest as ingest
from services.workspace.manager import WorkspaceManager
from services.retrieval import RetrievalEngine
ingest.FLUSH_FILES = int(sys.argv[2])   # many small batches: more moments to be killed in
ws, _ = WorkspaceManager().open("rw")
print("start", flush=True)
with RetrievalEngine(ws) as engine:
    engine.index_add(sys.argv[1], name="docs", progress=lambda event: print(event.stage, flush=True))
print("finished", flush=True)
"""


def test_sigkill_at_random_moments_of_an_ingest(tmp_path: Path) -> None:
    """20 kills (seeded) over 4 runs: from index creation to the last batch.  After each: open, check
    the three stores agree, query; after each run, a re-run completes the work with no duplicate."""
    rng = random.Random(4)
    kills = finished = 0
    partial: list[int] = []  # files indexed at each kill that left an index
    for run in range(4):
        home = tmp_path / f"home{run}"
        WorkspaceManager(home / "workspaces").create("rw")
        root = tmp_path / f"docs{run}"
        _write_corpus(root, 30, run, sentences=50)
        for attempt in range(5):
            if attempt == 3:
                _write_corpus(root, 30, run + 100, sentences=50)  # later kills interrupt replacements too
            proc = subprocess.Popen(
                [sys.executable, "-c", KILL_SCRIPT, str(root), str(rng.choice([1, 2, 5]))],
                env=_env(home),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=tmp_path,
            )
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "start"
            for _ in range(rng.randint(0, 45)):  # progress events: scan, file…, embed…, commit…
                if not proc.stdout.readline():
                    break
            time.sleep(rng.uniform(0.0, 0.08))
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=30)
            if proc.returncode == -signal.SIGKILL:
                kills += 1
            else:
                assert proc.returncode == 0, err
                finished += 1
            workspace, engine = _open(home)
            with engine:
                if not engine.indexes.exists("docs"):
                    continue  # killed before the manifest was renamed into place: no index, no debris
                store = engine.indexes.store("docs")  # opening replays the journal
                result = store.consistency()
                assert result.ok, f"run {run} kill {attempt}: {result.summary()}"
                files, chunks = store.manifest.counts()
                partial.append(files)
                for source_path, count in store.manifest.query("SELECT source_path, chunks FROM files"):
                    rows = store.manifest.query("SELECT COUNT(*) FROM chunks WHERE source_path = ?", (source_path,))
                    assert rows[0][0] == count, f"{source_path} half-indexed"
                if chunks:
                    assert engine.query("herons egrets", k=3, index="docs").hits
        workspace, engine = _open(home)
        with engine:
            report = engine.index_add(root, "docs")  # completes the work
            assert not report.errors
            assert engine.index_check("docs").ok
            assert engine.index_info("docs").files == 30
            again = engine.index_add(root, "docs")
            assert len(again.unchanged) == 30 and not again.added and not again.updated
            _assert_whole(engine)
    assert kills >= 20, (kills, finished)
    assert len([files for files in partial if 0 < files < 30]) >= 5, partial  # kills landed mid-ingest
