"""NDJSON transcripts: one file per conversation, appended in order, flushed and fsynced.

Each line is one JSON object (see ``ENTRY_FIELDS``); its format version is
``services.workspace.transcript_format`` (entries of a newer Aries are set aside in
``ReadResult.newer``).  A line is *acknowledged* once
``Transcript.append`` returns: by then it is on disk.  A crash during an append can leave
a torn last line; readers report it (file and line) and keep every line before it, and
the next writer terminates it with a newline so that later appends stay parseable.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.clock import utc_now
from services.errors import InvalidInput, NotFound
from services.workspace.transcript_format import is_newer

ROLES = ("user", "assistant", "tool", "system", "notice")
TOOL_STATUSES = ("success", "fail")
ENTRY_FIELDS = ("timestamp", "role", "content", "conversation_id", "message_id")
TOOL_FIELDS = ("tool_name", "input", "output", "status", "duration_ms")
SUFFIX = ".ndjson"
MAX_LINE_BYTES = 8 * 1024 * 1024


def new_conversation_id(now: datetime | None = None) -> str:
    """``c-YYYYMMDD-HHMMSS-<8 hex>``: sorts by creation time, unique in practice."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"c-{moment.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"


def _valid_conversation_id(conversation_id: str) -> str:
    if (
        not conversation_id
        or len(conversation_id) > 80
        or not all(c.isascii() and (c.isalnum() or c in "-_") for c in conversation_id)
    ):
        raise InvalidInput(f"invalid conversation id {conversation_id!r}")
    return conversation_id


@dataclass(frozen=True)
class Problem:
    """A line that could not be read: where, and why."""

    path: Path
    line: int
    reason: str
    torn: bool  # the last line, without its newline: a crash mid-append

    def __str__(self) -> str:
        kind = "torn last line" if self.torn else "unreadable line"
        return f"{self.path}:{self.line}: {kind}: {self.reason}"


@dataclass
class ReadResult:
    entries: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    newer: list[dict[str, Any]] = field(default_factory=list)  # entries of a newer format: not read
    path: Path | None = None

    @property
    def newer_notice(self) -> str | None:
        """One line on what of a newer Aries's transcript was skipped (None: nothing)."""
        from services.workspace.transcript_format import newer_notice

        return newer_notice(self.newer, f"transcript {self.path.name if self.path else ''}".strip())


def read_transcript(path: Path) -> ReadResult:
    """Read every entry of a transcript file; unreadable lines become ``problems``.

    Needs nothing but the file: each entry is self-describing, so a transcript replays
    without any other context.
    """
    path = Path(path)
    if not path.is_file():
        raise NotFound(f"transcript {path} does not exist", path=str(path))
    result = ReadResult(path=path)
    with path.open("rb") as handle:
        data = handle.read()
    if not data:
        return result
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        lines = lines[:-1]
    for number, raw in enumerate(lines, start=1):
        is_last = number == len(lines)
        unterminated = is_last and not ends_with_newline
        if not raw.strip():
            if unterminated:
                continue
            result.problems.append(Problem(path, number, "empty line", torn=False))
            continue
        try:
            entry = json.loads(raw.decode("utf-8"))
            if not isinstance(entry, dict):
                raise ValueError("not a JSON object")
            missing = [name for name in ENTRY_FIELDS if name not in entry]
            if missing:
                raise ValueError(f"missing fields: {', '.join(missing)}")
        except (ValueError, UnicodeDecodeError) as exc:
            result.problems.append(Problem(path, number, str(exc)[:200], torn=unterminated))
            continue
        (result.newer if is_newer(entry) else result.entries).append(entry)
    return result


class Transcript:
    """Appender for one conversation's NDJSON file.

    Appends are serialised by a lock, written with a single ``write`` call, flushed and
    fsynced before ``append`` returns.  ``message_id`` is ``<conversation_id>-<seq>``:
    stable, unique in the workspace and in append order.
    """

    def __init__(self, directory: Path, conversation_id: str | None = None) -> None:
        self.directory = Path(directory)
        self.conversation_id = _valid_conversation_id(
            new_conversation_id() if conversation_id is None else conversation_id
        )
        self.path = self.directory / f"{self.conversation_id}{SUFFIX}"
        self._lock = threading.Lock()
        self._seq = 0
        self.recovered: list[Problem] = []
        if self.path.exists():
            self._resume()

    def _resume(self) -> None:
        problem = repair_torn_tail(self.path)
        result = read_transcript(self.path)
        self.recovered = ([problem] if problem else []) + result.problems
        seqs = [int(str(e["message_id"]).rsplit("-", 1)[-1]) for e in result.entries if _has_seq(e)]
        self._seq = max(seqs, default=0)

    def append(
        self,
        role: str,
        content: str,
        *,
        timestamp: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        if role not in ROLES:
            raise InvalidInput(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        if not isinstance(content, str):
            raise InvalidInput("content must be a string")
        if role == "tool":
            missing = [name for name in TOOL_FIELDS if name not in extra]
            if missing:
                raise InvalidInput(f"tool entries need {', '.join(missing)}")
            if extra["status"] not in TOOL_STATUSES:
                raise InvalidInput(f"tool status must be success or fail, not {extra['status']!r}")
        with self._lock:
            seq = self._seq + 1
            entry: dict[str, Any] = {
                "timestamp": timestamp or utc_now(),
                "role": role,
                "content": content,
                "conversation_id": self.conversation_id,
                "message_id": f"{self.conversation_id}-{seq:06d}",
            }
            for key, value in extra.items():
                if key in entry:
                    raise InvalidInput(f"{key} is set by the transcript itself")
                entry[key] = value
            line = (json.dumps(entry, ensure_ascii=False, sort_keys=False) + "\n").encode("utf-8")
            if len(line) > MAX_LINE_BYTES:
                raise InvalidInput(f"entry is {len(line)} bytes; the limit is {MAX_LINE_BYTES}")
            self.directory.mkdir(parents=True, exist_ok=True)
            created = not self.path.exists()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(line)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                from services.files.atomic import fsync_dir

                fsync_dir(self.directory)
            self._seq = seq
            return entry

    def read(self) -> ReadResult:
        if not self.path.exists():
            return ReadResult()
        return read_transcript(self.path)


def _has_seq(entry: dict[str, Any]) -> bool:
    tail = str(entry.get("message_id", "")).rsplit("-", 1)[-1]
    return tail.isdigit()


def repair_torn_tail(path: Path) -> Problem | None:
    """Make ``path`` end on a complete line again after a crash mid-append.

    A complete entry that only lacks its newline gets the newline.  A torn fragment is
    appended to the sidecar ``<file>.torn`` (as a JSON record with its line number) and
    then cut from the transcript: it is reported and kept, never silently dropped, and the
    transcript parses in full afterwards.  Returns the problem found, if any.
    """
    path = Path(path)
    if not path.is_file():
        return None
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return None
    cut = data.rfind(b"\n") + 1
    tail = data[cut:]
    line = data.count(b"\n") + 1
    try:
        entry = json.loads(tail.decode("utf-8"))
        complete = isinstance(entry, dict) and all(name in entry for name in ENTRY_FIELDS)
    except (ValueError, UnicodeDecodeError):
        complete = False
    if complete:
        with path.open("ab") as handle:
            handle.write(b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        return None
    sidecar = path.with_name(path.name + ".torn")
    record = {"line": line, "recovered_at": utc_now(), "bytes": len(tail), "text": tail.decode("utf-8", "replace")}
    with sidecar.open("ab") as handle:
        handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    with path.open("r+b") as handle:
        handle.truncate(cut)
        handle.flush()
        os.fsync(handle.fileno())
    return Problem(path, line, f"torn fragment of {len(tail)} bytes moved to {sidecar.name}", torn=True)


def list_conversations(directory: Path) -> list[Path]:
    """Transcript files, oldest first (ids sort by creation time)."""
    if not Path(directory).is_dir():
        return []
    return sorted(p for p in Path(directory).iterdir() if p.suffix == SUFFIX and p.is_file())


def newer_notices(directory: Path) -> list[str]:
    """One line per transcript in ``directory`` written by a newer Aries: what this one cannot read."""
    return [notice for path in list_conversations(directory) if (notice := read_transcript(path).newer_notice)]


def by_recency(directory: Path) -> list[Path]:
    """Transcript files, least recently written first (modification time; the id breaks ties)."""

    def key(path: Path) -> tuple[int, str]:
        try:
            return path.stat().st_mtime_ns, path.name
        except OSError:
            return 0, path.name

    return sorted(list_conversations(directory), key=key)


def iter_problems(directory: Path, *, repair: bool = False) -> Iterator[Problem]:
    """Problems in every transcript; with ``repair``, torn tails are quarantined first."""
    for path in list_conversations(directory):
        if repair:
            problem = repair_torn_tail(path)
            if problem is not None:
                yield problem
        yield from read_transcript(path).problems


def summarize(path: Path) -> dict[str, Any]:
    """One conversation in a line: id, first and last times, entries, tool calls, the first message."""
    result = read_transcript(path)
    entries = result.entries
    first_user = next((str(e.get("content", "")) for e in entries if e.get("role") == "user"), "")
    return {
        "conversation_id": Path(path).stem,
        "path": str(path),
        "started_at": entries[0].get("timestamp") if entries else None,
        "ended_at": entries[-1].get("timestamp") if entries else None,
        "entries": len(entries),
        "tool_calls": sum(1 for e in entries if e.get("role") == "tool"),
        "first_message": first_user[:200],
        "problems": len(result.problems),
    }
