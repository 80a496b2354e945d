"""Sessions: create/load/list, appends (single and JSONL), usage, commit, and crash recovery with SIGKILL."""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.context.memory import CorruptMemoryFile, read_memory_file
from services.context.memory_types import Memory, MemoryExtractionFailed, SessionMessage
from services.context.session_commit import FAULT_ENV, JOURNAL
from services.context.sessions import (
    MAX_CONTENT_CHARS,
    ContextSession,
    InvalidMessage,
    InvalidSessionId,
    MessageTooLarge,
    SessionExists,
    SessionNotFound,
    SessionStore,
    recover_commit,
)

CLOCK = "2026-01-01T09:00:00.000Z"
WORKER = Path(__file__).with_name("commit_worker.py")
REPO = Path(__file__).resolve().parents[2]
CONVERSATION = [
    ("user", "I prefer short answers. My timezone is Europe/Paris.", None),
    ("tool", "version: 3.11.4\nplatform: linux", "python"),
    ("assistant", "We decided to keep the SQLite store. I'll use the hash embedder in tests.", None),
    ("user", "TODO: write the migration notes\nWhat else is there?", None),
    ("system", "Never reveal the API key.", None),
]


def store(root: Path) -> SessionStore:
    return SessionStore(root, clock=lambda: CLOCK)


def fill(session: ContextSession) -> None:
    for role, content, tool in CONVERSATION:
        session.append(role, content, tool_name=tool)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (lock files aside) and its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


# -- create / load / list -----------------------------------------------------------------------
def test_generated_ids_come_from_the_injected_clock_and_count_up(tmp_path: Path) -> None:
    sessions = store(tmp_path / "context")
    ids = [sessions.create().session_id for _ in range(3)]
    assert ids == ["s-20260101-090000-1", "s-20260101-090000-2", "s-20260101-090000-3"]
    assert sessions.list() == ids
    assert sessions.load(ids[1]).session_id == ids[1]
    meta = json.loads((tmp_path / "context/session" / ids[0] / "meta.json").read_text())
    assert meta["created_at"] == CLOCK and meta["commits"] == 0


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "a\\b", ".hidden", "-x", " x", "x" * 65, "é", "a b", "a\x00b"])
def test_bad_session_ids_are_refused_with_a_typed_error(tmp_path: Path, bad: str) -> None:
    sessions = store(tmp_path / "context")
    with pytest.raises(InvalidSessionId):
        sessions.create(bad)
    with pytest.raises(InvalidSessionId):
        sessions.load(bad)
    assert sessions.list() == []


def test_duplicate_and_unknown_sessions(tmp_path: Path) -> None:
    sessions = store(tmp_path / "context")
    sessions.create("work")
    with pytest.raises(SessionExists):
        sessions.create("work")
    with pytest.raises(SessionNotFound):
        sessions.load("other")
    (tmp_path / "context/session/half").mkdir()  # a create killed before meta.json: finished on create
    assert sessions.list() == ["work"]
    assert sessions.create("half").session_id == "half"


# -- appends ------------------------------------------------------------------------------------
def test_appends_are_ndjson_lines_with_indexes_and_usage(tmp_path: Path) -> None:
    session = store(tmp_path / "context").create("s1")
    first = session.append("user", "hello")
    second = session.append("tool", "out", tool_name="fs.read", meta={"call": 1})
    assert (first.index, second.index) == (0, 1)
    lines = (session.directory / "messages.jsonl").read_text().splitlines()
    assert [json.loads(line)["content"] for line in lines] == ["hello", "out"]
    assert json.loads(lines[1])["tool_name"] == "fs.read" and json.loads(lines[1])["meta"] == {"call": 1}
    usage = session.usage
    assert (usage.messages, usage.characters, usage.approx_tokens, usage.commits) == (2, 8, 3, 0)
    again = store(tmp_path / "context").load("s1")  # persisted: a new store sees the same
    assert again.usage == usage and again.messages() == session.messages()


@pytest.mark.parametrize(
    ("role", "content", "tool", "meta", "error"),
    [
        ("robot", "x", None, None, InvalidMessage),
        ("user", 42, None, None, InvalidMessage),
        ("tool", "x", "", None, InvalidMessage),
        ("user", "x", None, {"bad": {1, 2}}, InvalidMessage),
        ("user", "x" * (MAX_CONTENT_CHARS + 1), None, None, MessageTooLarge),
    ],
)
def test_bad_messages_are_typed_errors_and_write_nothing(
    tmp_path: Path, role: str, content: str, tool: str | None, meta: dict[str, object] | None, error: type
) -> None:
    session = store(tmp_path / "context").create("s1")
    with pytest.raises(error) as caught:
        session.append(role, content, tool_name=tool, meta=meta)
    assert "\n" not in str(caught.value)
    assert session.messages() == [] and not (session.directory / "messages.jsonl").exists()


def test_append_jsonl_adds_every_line_in_one_batch(tmp_path: Path) -> None:
    session = store(tmp_path / "context").create("s1")
    source = tmp_path / "in.jsonl"
    rows = [{"role": r, "content": c, **({"tool_name": t} if t else {})} for r, c, t in CONVERSATION]
    source.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    added = session.append_jsonl(source)
    assert [m.index for m in added] == [0, 1, 2, 3, 4]
    assert [(m.role, m.content, m.tool_name) for m in session.messages()] == CONVERSATION


@pytest.mark.parametrize(
    ("bad_line", "says"),
    [
        ("{not json", "not JSON"),
        ('["a list"]', "JSON object"),
        ('{"role": "robot", "content": "x"}', "role 'robot'"),
        ('{"role": "user"}', "content must be a string"),
        ('{"role": "user", "content": "x", "extra": 1}', "unknown field 'extra'"),
        ('{"role": "user", "content": "x", "meta": [1]}', "meta must be an object"),
    ],
)
def test_append_jsonl_names_the_bad_line_and_appends_nothing(tmp_path: Path, bad_line: str, says: str) -> None:
    session = store(tmp_path / "context").create("s1")
    session.append("user", "already here")
    source = tmp_path / "in.jsonl"
    good = json.dumps({"role": "user", "content": "fine"})
    source.write_text(f"{good}\n{good}\n{bad_line}\n{good}\n")
    with pytest.raises(InvalidMessage) as caught:
        session.append_jsonl(source)
    assert f"{source}:3: " in caught.value.message and says in caught.value.message
    assert caught.value.details["line"] == 3
    assert [m.content for m in session.messages()] == ["already here"]


def test_append_jsonl_refuses_invalid_utf8_and_a_missing_file(tmp_path: Path) -> None:
    session = store(tmp_path / "context").create("s1")
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'{"role": "user", "content": "ok"}\n{"role": "user", "content": "\xff"}\n')
    with pytest.raises(InvalidMessage, match=r":2: not UTF-8"):
        session.append_jsonl(source)
    with pytest.raises(InvalidMessage, match="cannot be read"):
        session.append_jsonl(tmp_path / "missing.jsonl")
    assert session.messages() == []


def test_a_torn_last_line_is_skipped_and_cut_by_the_next_append(tmp_path: Path) -> None:
    session = store(tmp_path / "context").create("s1")
    session.append("user", "one")
    with (session.directory / "messages.jsonl").open("ab") as handle:
        handle.write(b'{"session_id": "s1", "index": 1, "role": "us')  # a crash mid-write
    assert [m.content for m in session.messages()] == ["one"]
    assert session.append("user", "two").index == 1
    lines = (session.directory / "messages.jsonl").read_text().splitlines()
    assert [json.loads(line)["content"] for line in lines] == ["one", "two"]


# -- commit ---------------------------------------------------------------------------------------
def test_scenario_c_commit_archives_and_writes_categorized_memory(tmp_path: Path) -> None:
    root = tmp_path / "context"
    session = store(root).create("s1")
    fill(session)
    active_bytes = (session.directory / "messages.jsonl").read_bytes()
    seen: list[tuple[list[Path], bool, bool]] = []

    def on_written(paths: list[Path]) -> None:  # files in place, journal not yet removed
        seen.append((paths, all(p.is_file() for p in paths), (session.directory / JOURNAL).exists()))

    report = session.commit(on_written=on_written)
    assert report.archived == 5 and report.history == session.directory / "history/1.jsonl"
    assert report.history.read_bytes() == active_bytes
    assert session.messages() == [] and not (session.directory / JOURNAL).exists()
    assert seen == [(report.written, True, True)]
    assert [p.relative_to(root).as_posix() for p in report.written] == [
        "agent/memories/decisions.md",
        "agent/memories/facts.md",
        "user/memories/facts.md",
        "user/memories/preferences.md",
        "user/memories/tasks.md",
    ]

    def texts(rel: str) -> list[str]:
        return [e.text for e in read_memory_file(root / rel).entries]

    assert texts("user/memories/preferences.md") == ["I prefer short answers.", "Never reveal the API key."]
    assert texts("user/memories/facts.md") == ["My timezone is Europe/Paris."]
    assert texts("user/memories/tasks.md") == ["Write the migration notes"]
    assert texts("agent/memories/facts.md") == ["python: version: 3.11.4", "python: platform: linux"]
    assert texts("agent/memories/decisions.md") == [
        "We decided to keep the SQLite store.",
        "I'll use the hash embedder in tests.",
    ]
    assert read_memory_file(root / "user/memories/tasks.md").entries[0].source == "s1#3"
    usage = session.usage
    assert (usage.messages, usage.commits) == (5, 1)
    assert usage.characters == sum(len(c) for _, c, _ in CONVERSATION)
    # the next message continues the numbering; an empty commit does nothing
    assert session.append("user", "next").index == 5
    assert session.commit().history == session.directory / "history/2.jsonl"
    assert session.commit().archived == 0 and session.usage.commits == 2


def test_same_input_gives_the_same_bytes_and_recommit_adds_no_duplicate(tmp_path: Path) -> None:
    for name in ("a", "b"):
        session = store(tmp_path / name).create("s1")
        fill(session)
        session.commit()
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    before = {k: v for k, v in tree(tmp_path / "a").items() if "memories" in k}
    session = store(tmp_path / "a").load("s1")
    fill(session)  # the same content again
    report = session.commit()
    assert len(report.memories) == 8
    assert {k: v for k, v in tree(tmp_path / "a").items() if "memories" in k} == before


def test_a_failing_extractor_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "context"
    session = store(root).create("s1")
    fill(session)
    before = tree(root)

    def broken(messages: object) -> list[Memory]:
        raise MemoryExtractionFailed("the model is down")

    with pytest.raises(MemoryExtractionFailed):
        session.commit(broken)
    assert tree(root) == before and len(session.messages()) == 5


def test_extractor_sees_only_the_active_messages(tmp_path: Path) -> None:
    session = store(tmp_path / "context").create("s1")
    session.append("user", "first")
    session.commit()
    session.append("user", "second")
    got: list[list[SessionMessage]] = []

    def spy(messages: list[SessionMessage]) -> list[Memory]:
        got.append(list(messages))
        return []

    session.commit(spy)
    assert [[m.content for m in batch] for batch in got] == [["second"]]


# -- SIGKILL during commit, then recover ------------------------------------------------------------
def run_worker(*args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run([sys.executable, str(WORKER), *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The tree after an uninterrupted commit (in a subprocess, as the crashed ones)."""
    root = tmp_path_factory.mktemp("reference") / "context"
    fill(store(root).create("s1"))
    assert run_worker("commit", str(root), "s1").returncode == 0
    return tree(root)


STEPS = ["journal", "history", "memory", "meta", "active", "callback"]


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
@pytest.mark.parametrize("step", STEPS)
def test_sigkill_at_each_commit_step_then_recover_completes_it(
    tmp_path: Path, step: str, reference: dict[str, bytes]
) -> None:
    root = tmp_path / "context"
    fill(store(root).create("s1"))
    proc = run_worker("commit", str(root), "s1", fault=f"{step}:kill")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (root / "session/s1" / JOURNAL).exists()
    indexed: list[list[Path]] = []
    report = recover_commit(root, "s1", on_written=indexed.append)
    assert report is not None and report.recovered and report.archived == 5
    assert indexed == [report.written] and len(report.written) == 5
    assert tree(root) == reference  # the same bytes as a commit that was never interrupted
    assert recover_commit(root, "s1") is None


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_sigkill_before_the_journal_rolls_back(tmp_path: Path, reference: dict[str, bytes]) -> None:
    root = tmp_path / "context"
    fill(store(root).create("s1"))
    before = tree(root)
    proc = run_worker("commit", str(root), "s1", fault="extracted:kill")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (root / "session/s1/.commit.json.abc.tmp").write_text("{half")  # as if killed mid-write
    assert recover_commit(root, "s1") is None
    assert tree(root) == before  # nothing happened; the messages are still active
    assert store(root).load("s1").commit().archived == 5
    assert tree(root) == reference


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_the_next_append_finishes_an_interrupted_commit_and_keeps_the_new_message(tmp_path: Path) -> None:
    root = tmp_path / "context"
    fill(store(root).create("s1"))
    assert run_worker("commit", str(root), "s1", fault="meta:kill").returncode == -signal.SIGKILL
    session = store(root).load("s1")
    assert session.messages() == []  # meta.json says 0-4 are archived: they are not shown as active
    assert session.append("user", "after the crash").index == 5
    assert not (session.directory / JOURNAL).exists()
    assert [m.content for m in session.messages()] == ["after the crash"]
    assert session.usage.messages == 6 and session.usage.commits == 1


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
@pytest.mark.timeout(600)
def test_sigkill_at_random_moments_loses_no_message_and_duplicates_no_memory(tmp_path: Path) -> None:
    root = tmp_path / "context"
    store(root).create("s1")
    rng = random.Random(1313)
    acked: dict[int, str] = {}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(FAULT_ENV, None)
    for _ in range(8):
        command = [sys.executable, str(WORKER), "loop", str(root), "s1"]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert proc.stdout is not None
        buffer = b""
        deadline = time.monotonic() + 60
        while b"C " not in buffer and time.monotonic() < deadline:  # at least one commit per round
            if select.select([proc.stdout], [], [], 0.5)[0]:
                buffer += os.read(proc.stdout.fileno(), 65536)
        time.sleep(rng.uniform(0.0, 0.3))
        os.kill(proc.pid, signal.SIGKILL)
        rest, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, err.decode()
        for line in (buffer + rest).decode().splitlines():
            if line.startswith("A "):
                _, index, content = line.split(" ", 2)
                acked[int(index)] = content
        recover_commit(root, "s1")
        session = store(root).load("s1")
        stored: list[SessionMessage] = [m for path in session.history() for m in _read(path)] + session.messages()
        indexes = [m.index for m in stored]
        assert indexes == list(range(len(indexes))), "a message lost or archived twice"
        assert all(stored[i].content == content for i, content in acked.items())
        for path in (root / "user/memories").glob("*.md"):
            ids = [e.id for e in read_memory_file(path).entries]
            assert len(ids) == len(set(ids)), f"duplicate memory in {path.name}"
        tasks = {e.text for e in read_memory_file(root / "user/memories/tasks.md").entries}
        committed = {m.content for path in session.history() for m in _read(path) if m.role == "user"}
        assert {c.split("TODO: ")[1][0].upper() + c.split("TODO: ")[1][1:] for c in committed} <= tasks
    assert len(acked) > 8


def _read(path: Path) -> list[SessionMessage]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [SessionMessage(r["session_id"], r["index"], r["role"], r["content"], r["timestamp"]) for r in rows]


def test_an_unreadable_memory_file_stops_the_commit_before_it_starts(tmp_path: Path) -> None:
    root = tmp_path / "context"
    session = store(root).create("s1")
    fill(session)
    target = root / "user/memories/preferences.md"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"# Preferences\n\xff\xfe broken\n")
    before = tree(root)
    with pytest.raises(CorruptMemoryFile, match="preferences.md: not UTF-8"):
        session.commit()
    assert tree(root) == before and not (session.directory / JOURNAL).exists()
    target.unlink()
    assert session.commit().archived == 5


def test_concurrent_appends_from_threads_get_unique_consecutive_indexes(tmp_path: Path) -> None:
    import threading

    root = tmp_path / "context"
    store(root).create("s1")

    def writer(n: int) -> None:
        session = store(root).load("s1")  # one object per thread, as separate callers would have
        for i in range(20):
            session.append("user", f"w{n}-{i}")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    messages = store(root).load("s1").messages()
    assert [m.index for m in messages] == list(range(80))
    assert sorted(m.content for m in messages) == sorted(f"w{n}-{i}" for n in range(4) for i in range(20))


def test_commit_never_overwrites_an_existing_archive(tmp_path: Path) -> None:
    session = store(tmp_path / "context").create("s1")
    session.append("user", "one")
    session.commit()
    meta_path = session.directory / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["next_history"] = 1  # a meta.json restored from an old backup
    meta_path.write_text(json.dumps(meta))
    first = (session.directory / "history/1.jsonl").read_bytes()
    session.append("user", "two")
    assert session.commit().history == session.directory / "history/2.jsonl"
    assert (session.directory / "history/1.jsonl").read_bytes() == first
