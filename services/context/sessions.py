"""Sessions of the context tree: create/load, append messages, usage counters, commit to memory.

A session lives in ``<context root>/session/<id>/`` (``axiom://session/<id>``):

- ``meta.json`` — id, creation time, the totals of what earlier commits archived, the commit count
  and the next history number (rewritten atomically, only by a commit);
- ``messages.jsonl`` — the active messages, one JSON object a line (:class:`SessionMessage`), each
  appended with one ``write`` and fsynced before ``append`` returns; a line torn by a crash (no
  newline) was never acknowledged: readers skip it and the next writer cuts it off;
- ``history/<n>.jsonl`` — the messages archived by commit ``n`` (byte copies of their lines);
- ``.commit.json`` — the journal of a commit in progress (see :mod:`services.context.session_commit`);
- ``.lock`` — the lock that serialises writers (threads and processes).

Usage (messages, characters, approximate tokens at 4 characters a token, commits) is the archived
totals in ``meta.json`` plus the active messages, so it is always consistent with the files.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.clock import utc_now
from services.context import session_commit as _commit
from services.context.errors import ContextError
from services.context.memory import extract_offline
from services.context.memory_types import Memory, SessionMessage
from services.context.session_commit import (
    ACTIVE,
    META,
    CommitReport,
    Usage,
    approx_tokens,
    read_active,
    read_meta,
    session_lock,
    sweep_temp_files,
    tail_index,
)
from services.errors import InvalidName
from services.files.atomic import atomic_write_text, fsync_dir
from services.text.names import validate_name

ROLES = ("user", "assistant", "tool", "system")
MAX_CONTENT_CHARS = 1_000_000
MAX_JSONL_BYTES = 64 * 1024 * 1024
SESSION_SCOPE = "session"
_ID_CHARS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_IMPORT_FIELDS = {"role", "content", "tool_name", "meta", "timestamp", "index", "session_id"}

Extractor = Callable[[Sequence[SessionMessage]], list[Memory]]
OnWritten = Callable[[list[Path]], None]


class InvalidSessionId(ContextError):
    code = "invalid_session_id"
    exit_code = 2


class SessionNotFound(ContextError):
    code = "session_not_found"


class SessionExists(ContextError):
    code = "session_exists"


class InvalidMessage(ContextError):
    """A message that cannot be appended (unknown role, wrong types); JSONL input names the line."""

    code = "invalid_message"
    exit_code = 2


class MessageTooLarge(InvalidMessage):
    code = "message_too_large"


def validate_session_id(session_id: str) -> str:
    """A session id: a safe single name (``services.text.names`` rules) of ASCII letters, digits, ``._-``."""
    try:
        validate_name(session_id, "session")
    except InvalidName as exc:
        raise InvalidSessionId(exc.message, session_id=str(session_id)[:80]) from None
    if not _ID_CHARS.match(session_id):
        raise InvalidSessionId(
            f"session id {session_id!r} may hold only ASCII letters, digits, '.', '_' and '-'", session_id=session_id
        )
    return session_id


def _check(role: Any, content: Any, tool_name: Any, meta: Any) -> str | None:
    """Why this message cannot be appended, or ``None``."""
    if role not in ROLES:
        return f"role {role!r} is not one of {', '.join(ROLES)}"
    if not isinstance(content, str):
        return f"content must be a string, not {type(content).__name__}"
    if len(content) > MAX_CONTENT_CHARS:
        return f"content is {len(content)} characters long; the limit is {MAX_CONTENT_CHARS}"
    if tool_name is not None and (not isinstance(tool_name, str) or not tool_name.strip()):
        return "tool_name must be a non-empty string"
    if meta is not None:
        if not isinstance(meta, dict):
            return f"meta must be an object, not {type(meta).__name__}"
        try:
            json.dumps(meta, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return f"meta is not JSON: {exc}"
    return None


def _raise_for(reason: str, where: str = "", line: int | None = None) -> None:
    error = MessageTooLarge if "limit is" in reason else InvalidMessage
    raise error(f"{where}{reason}", **({"line": line} if line is not None else {}))


class ContextSession:
    """One session: its active messages, usage, history, and the commit that turns them into memory."""

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self.store = store
        self.root = store.root
        self.session_id = session_id
        self.directory = store.root / SESSION_SCOPE / session_id

    def __repr__(self) -> str:
        return f"ContextSession({self.session_id!r})"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with session_lock(self.directory):
            _commit.recover_locked(self.root, self.session_id, self.store.on_written)
            yield

    def messages(self) -> list[SessionMessage]:
        """The active (not yet committed) messages."""
        archived = read_meta(self.directory).archived_messages
        return [m for m, _ in read_active(self.directory) if m.index >= archived]

    @property
    def usage(self) -> Usage:
        meta = read_meta(self.directory)
        active = self.messages()
        chars = sum(len(m.content) for m in active)
        return Usage(
            messages=meta.archived_messages + len(active),
            characters=meta.archived_characters + chars,
            approx_tokens=meta.archived_tokens + sum(approx_tokens(m.content) for m in active),
            commits=meta.commits,
        )

    def history(self) -> list[Path]:
        """The archives of earlier commits, in commit order."""
        folder = self.directory / "history"
        files = [p for p in folder.glob("*.jsonl") if p.stem.isdigit()] if folder.is_dir() else []
        return sorted(files, key=lambda p: int(p.stem))

    # -- appending -------------------------------------------------------------------------------
    def _next_index(self) -> int:
        """Cut a torn last line, then the index of the next message (under the lock)."""
        path = self.directory / ACTIVE
        good, last = tail_index(path)
        if path.exists() and path.stat().st_size != good:  # a torn line: never acknowledged
            with path.open("rb+") as handle:
                handle.truncate(good)
                os.fsync(handle.fileno())
        archived = read_meta(self.directory).archived_messages
        return archived if last is None else max(archived, last + 1)

    def _write(self, records: list[SessionMessage]) -> None:
        path = self.directory / ACTIVE
        data = b"".join(_commit.encode_line(record) for record in records)
        created = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.directory)

    def append(
        self, role: str, content: str, *, tool_name: str | None = None, meta: dict[str, Any] | None = None
    ) -> SessionMessage:
        """Append one message (on disk when this returns); ``InvalidMessage``/``MessageTooLarge`` if bad."""
        reason = _check(role, content, tool_name, meta)
        if reason is not None:
            _raise_for(reason)
        with self._locked():
            message = SessionMessage(
                self.session_id, self._next_index(), role, content, self.store.clock(), tool_name, meta
            )
            self._write([message])
        return message

    def append_jsonl(self, path: Path) -> list[SessionMessage]:
        """Append every message of a JSONL file (``role``, ``content``, optional ``tool_name``, ``meta``).

        Every line is checked first; the first bad one raises ``InvalidMessage`` naming the file and
        line, and nothing is appended.  Blank lines are skipped.  The valid batch is one write.
        ``index``, ``session_id`` and ``timestamp`` (a line of another session's file) are accepted
        and replaced by this session's.
        """
        path = Path(path)
        try:
            if path.stat().st_size > MAX_JSONL_BYTES:
                raise MessageTooLarge(f"{path}: larger than {MAX_JSONL_BYTES // (1024 * 1024)} MiB")
            data = path.read_bytes()
        except OSError as exc:
            raise InvalidMessage(f"{path}: cannot be read: {exc.strerror or exc}") from None
        rows: list[dict[str, Any]] = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            where = f"{path}:{number}: "
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise InvalidMessage(f"{where}not UTF-8 text", line=number) from None
            except json.JSONDecodeError as exc:
                raise InvalidMessage(f"{where}not JSON ({exc.msg} at column {exc.colno})", line=number) from None
            if not isinstance(row, dict):
                raise InvalidMessage(f"{where}a message must be a JSON object", line=number)
            unknown = sorted(set(row) - _IMPORT_FIELDS)
            if unknown:
                raise InvalidMessage(f"{where}unknown field {unknown[0]!r}", line=number)
            reason = _check(row.get("role"), row.get("content"), row.get("tool_name"), row.get("meta"))
            if reason is not None:
                _raise_for(reason, where, number)
            rows.append(row)
        if not rows:
            return []
        with self._locked():
            first = self._next_index()
            now = self.store.clock()
            records = [
                SessionMessage(
                    self.session_id, first + i, row["role"], row["content"], now, row.get("tool_name"), row.get("meta")
                )
                for i, row in enumerate(rows)
            ]
            self._write(records)
        return records

    # -- commit ----------------------------------------------------------------------------------
    def commit(self, extractor: Extractor = extract_offline, *, on_written: OnWritten | None = None) -> CommitReport:
        """Archive the active messages, extract and write their memories, clear the active list.

        ``extractor`` runs first: if it raises (``MemoryExtractionFailed``), nothing changes.  Then a
        journal makes the rest crash-safe (:func:`recover_commit`).  ``on_written`` (default: the
        store's) gets the memory files once they are in place, before the journal is removed.
        With no active message, nothing happens (``archived == 0``).
        """
        callback = on_written if on_written is not None else self.store.on_written
        with self._locked():
            report = _commit.commit_locked(self.root, self.session_id, extractor, callback)
        return report


@dataclass
class SessionStore:
    """The sessions of one context root.  ``clock`` stamps messages and generated ids."""

    root: Path
    clock: Callable[[], str] = utc_now
    on_written: OnWritten | None = None

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    @property
    def directory(self) -> Path:
        return self.root / SESSION_SCOPE

    def _generated_id(self) -> Iterator[str]:
        stamp = re.sub(r"\D", "", self.clock())[:14]
        stamp = f"{stamp[:8]}-{stamp[8:14]}" if len(stamp) == 14 else stamp or "0"
        number = 1
        while True:
            yield f"s-{stamp}-{number}"
            number += 1

    def create(self, session_id: str | None = None) -> ContextSession:
        """A new session; ``None`` makes ``s-<YYYYMMDD>-<HHMMSS>-<n>`` from the clock (first free n)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        candidates = self._generated_id() if session_id is None else iter([validate_session_id(session_id)])
        for candidate in candidates:
            folder = self.directory / candidate
            try:
                folder.mkdir()
            except FileExistsError:
                if session_id is None:
                    continue  # taken: the next number
                if (folder / META).exists():
                    raise SessionExists(f"session {candidate!r} already exists", session_id=candidate) from None
                # a folder without meta.json: a create that was interrupted; finish it
            fsync_dir(self.directory)
            meta = {"session_id": candidate, "created_at": self.clock(), **_commit.EMPTY_META}
            atomic_write_text(folder / META, json.dumps(meta, sort_keys=True, indent=2) + "\n")
            return ContextSession(self, candidate)
        raise AssertionError("unreachable")  # pragma: no cover

    def load(self, session_id: str) -> ContextSession:
        validate_session_id(session_id)
        if not (self.directory / session_id / META).is_file():
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        return ContextSession(self, session_id)

    def list(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.name for p in self.directory.iterdir() if (p / META).is_file())


def recover_commit(root: Path, session_id: str, *, on_written: OnWritten | None = None) -> CommitReport | None:
    """Finish or roll back a commit interrupted by a crash (for reconcile); ``None`` if none was pending.

    With a journal, the commit is completed (idempotently: no memory twice, no message lost) and
    its report returned.  Without one, the commit never started its writes: leftover temp files are
    removed and the messages stay active.
    """
    directory = Path(root) / SESSION_SCOPE / validate_session_id(session_id)
    if not (directory / META).is_file():
        raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
    with session_lock(directory):
        report = _commit.recover_locked(Path(root), session_id, on_written)
        if report is None:
            sweep_temp_files(Path(root), session_id)
        return report


__all__ = [
    "MAX_CONTENT_CHARS",
    "ROLES",
    "ContextSession",
    "InvalidMessage",
    "InvalidSessionId",
    "MessageTooLarge",
    "SessionExists",
    "SessionNotFound",
    "SessionStore",
    "recover_commit",
    "validate_session_id",
]
