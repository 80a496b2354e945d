"""The crash-safe commit of a session, its journal and recovery, and the session's on-disk records.

A commit (under the session lock):

1. runs the extractor on the active messages — if it fails, nothing has changed;
2. writes the journal ``.commit.json`` atomically: the history number, the first and last message
   index archived with the SHA-256 of their lines, the extracted memories and the ``meta.json`` to
   be.  From here on the commit is decided and every step is idempotent:
3. ``history/<n>.jsonl`` (byte copies of the archived lines; skipped when already there and
   matching the hash);
4. the memory files (an entry whose id is in its file is skipped), under the memory lock;
5. ``meta.json`` (absolute values from the journal, so writing it twice is harmless);
6. the active list rewritten without the archived messages (messages appended later are kept);
7. ``on_written(memory files)``; 8. the journal is removed.

:func:`recover_locked` runs 3–8 again from the journal after a crash (SIGKILL at any point): no
memory twice, no message lost.  Without a journal there is nothing to finish — the crash came
before step 2 — and only temp files are swept.

``ARIES_CONTEXT_COMMIT_FAULT=<step>[:kill|:sleep=<s>]`` stops the process at a named step
(``extracted``, ``journal``, ``history``, ``memory``, ``meta``, ``active``, ``callback``) to test
this with a real SIGKILL; it does nothing unless set.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.context.errors import ContextError
from services.context.memory import check_memory_files, write_memories
from services.context.memory_types import CATEGORIES, MEMORY_DIR, SCOPES, Memory, SessionMessage
from services.files.atomic import atomic_write_bytes, atomic_write_text, fsync_dir, remove_stale_temp_files
from services.files.crashpoints import crash_point
from services.hashing import sha256_hex

META = "meta.json"
ACTIVE = "messages.jsonl"
JOURNAL = ".commit.json"
LOCK = ".lock"
LOCK_TIMEOUT = 30.0
FAULT_ENV = "ARIES_CONTEXT_COMMIT_FAULT"
EMPTY_META: dict[str, Any] = {
    "archived": {"messages": 0, "characters": 0, "tokens": 0},
    "commits": 0,
    "next_history": 1,
}


class CorruptSession(ContextError):
    """A session file that does not parse (the message names the file and line)."""

    code = "corrupt_session"


class CommitRecoveryFailed(ContextError):
    """An interrupted commit cannot be finished: its journal or archived messages do not match."""

    code = "commit_recovery_failed"


class SessionBusy(ContextError):
    code = "session_busy"


def approx_tokens(text: str) -> int:
    """Approximate tokens: 4 characters a token, rounded up."""
    return (len(text) + 3) // 4


@dataclass(frozen=True)
class Usage:
    messages: int
    characters: int
    approx_tokens: int
    commits: int


@dataclass
class CommitReport:
    """What a commit did: the archive, the memories extracted, the memory files they belong to."""

    session_id: str
    history: Path | None
    archived: int
    memories: list[Memory] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    recovered: bool = False


@dataclass(frozen=True)
class Meta:
    raw: dict[str, Any]

    @property
    def archived_messages(self) -> int:
        return int(self.raw["archived"]["messages"])

    @property
    def archived_characters(self) -> int:
        return int(self.raw["archived"]["characters"])

    @property
    def archived_tokens(self) -> int:
        return int(self.raw["archived"]["tokens"])

    @property
    def commits(self) -> int:
        return int(self.raw["commits"])

    @property
    def next_history(self) -> int:
        return int(self.raw["next_history"])


def read_meta(directory: Path) -> Meta:
    path = directory / META
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        meta = Meta(raw)
        _ = (meta.archived_messages, meta.archived_characters, meta.archived_tokens, meta.commits, meta.next_history)
    except FileNotFoundError:
        raise CorruptSession(f"{path}: missing") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptSession(f"{path}: not a session record ({exc})") from None
    return meta


def encode_line(message: SessionMessage) -> bytes:
    return (json.dumps(message.to_json(), ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def _decode(raw: bytes, where: str) -> SessionMessage:
    try:
        data = json.loads(raw.decode("utf-8"))
        return SessionMessage(
            str(data["session_id"]),
            int(data["index"]),
            str(data["role"]),
            str(data["content"]),
            str(data["timestamp"]),
            data.get("tool_name"),
            data.get("meta"),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptSession(f"{where}: not a session message ({exc})") from None


def read_active(directory: Path) -> list[tuple[SessionMessage, bytes]]:
    """Every complete line of ``messages.jsonl`` with its bytes; a torn last line is skipped."""
    path = directory / ACTIVE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")[:-1]  # the part after the last newline is empty or torn
    return [(_decode(raw, f"{path}:{n}"), raw + b"\n") for n, raw in enumerate(lines, start=1)]


def tail_index(path: Path) -> tuple[int, int | None]:
    """``(length of the complete lines, index of the last complete message or None)``, reading the end only."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return 0, None
    with handle:
        size = handle.seek(0, os.SEEK_END)
        start, buffer = size, b""
        while start > 0 and buffer.count(b"\n") < 2:
            step = min(start, 65536)
            start -= step
            handle.seek(start)
            buffer = handle.read(step) + buffer
        complete = buffer[: buffer.rfind(b"\n") + 1]
        good = start + len(complete)
        if not complete:
            return good, None
        last = complete[:-1].rsplit(b"\n", 1)[-1]
        return good, _decode(last, str(path)).index


@contextmanager
def _file_lock(path: Path, what: str) -> Iterator[None]:
    from filelock import FileLock, Timeout

    lock = FileLock(str(path), timeout=LOCK_TIMEOUT)
    try:
        lock.acquire()
    except Timeout:
        raise SessionBusy(f"{what} is busy: another writer held it for {LOCK_TIMEOUT:.0f} s") from None
    try:
        yield
    finally:
        lock.release()


def session_lock(directory: Path) -> contextlib.AbstractContextManager[None]:
    return _file_lock(directory / LOCK, f"session {directory.name}")


@contextmanager
def memory_lock(root: Path, scopes: Iterable[str] = SCOPES) -> Iterator[None]:
    """Serialise writers of the memory files: ``<scope>/memories/.lock`` of each scope, in a fixed order."""
    with contextlib.ExitStack() as stack:
        for scope in (s for s in SCOPES if s in set(scopes)):
            folder = root / scope / MEMORY_DIR
            folder.mkdir(parents=True, exist_ok=True)
            stack.enter_context(_file_lock(folder / LOCK, f"the {scope} memory files"))
        yield


def fault(step: str) -> None:
    """Crash-test hook: stop here when ``ARIES_CONTEXT_COMMIT_FAULT`` names this step."""
    crash_point(FAULT_ENV, step)


def commit_locked(
    root: Path,
    session_id: str,
    extractor: Callable[[Sequence[SessionMessage]], list[Memory]],
    on_written: Callable[[list[Path]], None] | None,
) -> CommitReport:
    """Steps 1–8 (the caller holds the session lock and has recovered any earlier commit)."""
    directory = root / "session" / session_id
    meta = read_meta(directory)
    pairs = [(m, raw) for m, raw in read_active(directory) if m.index >= meta.archived_messages]
    if not pairs:
        return CommitReport(session_id, None, 0)
    messages = [m for m, _ in pairs]
    memories = list(extractor(messages))
    check_memory_files(root, memories)
    archive = b"".join(raw for _, raw in pairs)
    after = json.loads(json.dumps(meta.raw))
    after["archived"] = {
        "messages": messages[-1].index + 1,
        "characters": meta.archived_characters + sum(len(m.content) for m in messages),
        "tokens": meta.archived_tokens + sum(approx_tokens(m.content) for m in messages),
    }
    after["commits"] = meta.commits + 1
    folder = directory / "history"
    taken = [int(p.stem) for p in folder.glob("*.jsonl") if p.stem.isdigit()] if folder.is_dir() else []
    number = max([meta.next_history, *(n + 1 for n in taken)])  # never overwrite an archive
    after["next_history"] = number + 1
    journal = {
        "version": 1,
        "session_id": session_id,
        "history": number,
        "first": messages[0].index,
        "last": messages[-1].index,
        "sha256": sha256_hex(archive),
        "memories": [m.to_json() for m in memories],
        "meta": after,
    }
    fault("extracted")
    atomic_write_text(directory / JOURNAL, json.dumps(journal, ensure_ascii=False, sort_keys=True) + "\n")
    fault("journal")
    return _apply(root, directory, journal, on_written, recovered=False)


def _apply(
    root: Path,
    directory: Path,
    journal: dict[str, Any],
    on_written: Callable[[list[Path]], None] | None,
    *,
    recovered: bool,
) -> CommitReport:
    first, last, digest = int(journal["first"]), int(journal["last"]), str(journal["sha256"])
    history = directory / "history" / f"{int(journal['history'])}.jsonl"
    if not (history.is_file() and sha256_hex(history.read_bytes()) == digest):
        data = b"".join(raw for m, raw in read_active(directory) if first <= m.index <= last)
        if sha256_hex(data) != digest:
            raise CommitRecoveryFailed(
                f"{directory / JOURNAL}: messages {first}-{last} are neither archived nor active as journalled"
            )
        history.parent.mkdir(exist_ok=True)
        atomic_write_bytes(history, data)
    fault("history")
    memories = [Memory.from_json(item) for item in journal["memories"]]
    written: set[Path] = set()
    with memory_lock(root, {m.scope for m in memories}):
        for scope in SCOPES:
            for category in CATEGORIES:
                group = [m for m in memories if m.scope == scope and m.category == category]
                if group:
                    written.update(write_memories(root, group))
                    fault("memory")
    atomic_write_text(directory / META, json.dumps(journal["meta"], sort_keys=True, indent=2) + "\n")
    fault("meta")
    active = read_active(directory)
    if any(m.index <= last for m, _ in active):
        atomic_write_bytes(directory / ACTIVE, b"".join(raw for m, raw in active if m.index > last))
    fault("active")
    paths = sorted(written)
    if on_written is not None:
        on_written(paths)
    fault("callback")
    (directory / JOURNAL).unlink()
    fsync_dir(directory)
    return CommitReport(str(journal["session_id"]), history, last - first + 1, memories, paths, recovered)


def recover_locked(root: Path, session_id: str, on_written: Callable[[list[Path]], None] | None) -> CommitReport | None:
    """Finish the journalled commit of a session, if any (the caller holds the session lock)."""
    directory = root / "session" / session_id
    path = directory / JOURNAL
    if not path.exists():
        return None
    try:
        journal = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(journal, dict) or journal.get("session_id") != session_id:
            raise ValueError("not this session's journal")
    except ValueError as exc:
        raise CommitRecoveryFailed(f"{path}: unreadable commit journal ({exc})") from None
    sweep_temp_files(root, session_id)
    return _apply(root, directory, journal, on_written, recovered=True)


def sweep_temp_files(root: Path, session_id: str) -> list[Path]:
    """Remove temp files left by a write killed before its rename (no journal: nothing else to do)."""
    directory = root / "session" / session_id
    removed = remove_stale_temp_files(directory) + remove_stale_temp_files(directory / "history")
    scopes = [scope for scope in SCOPES if (root / scope / MEMORY_DIR).is_dir()]
    with memory_lock(root, scopes):
        for scope in scopes:
            removed += remove_stale_temp_files(root / scope / MEMORY_DIR)
    return removed
