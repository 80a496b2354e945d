"""The ``retrievals`` table of ``<workspace>/audit.db``: one row per query.

The row is written off the query's path.  :meth:`RetrievalAudit.record` gives the row its id,
appends it as one JSON line to this process's *pending file* (``audit.db.retrievals-<pid>.pending``
beside the database: one ``write``, no fsync, so it survives the process being killed) and queues
it; a writer thread commits the queue in one transaction within :data:`FLUSH_INTERVAL_S` (or at
:data:`FLUSH_ROWS` rows), and on :meth:`~RetrievalAudit.close`, then empties the file.  Reads in
the same process (:meth:`~RetrievalAudit.recent`, :meth:`~RetrievalAudit.last`) commit the queue
first; another process sees a row within the interval.  A process that dies leaves its pending
file: the next :class:`RetrievalAudit` to open the database (any process) commits its rows
(``INSERT OR IGNORE``: a row committed already is not doubled) and deletes it; a torn last line —
the kill fell inside that one ``write`` — is the one row lost, and is counted.  While a file waits,
``aries workspace open --check`` says how many rows it holds and whether its process still runs
(:func:`pending_report`).  A live writer holds an exclusive ``flock`` on its own file, which is
how a reader tells a stopped process's file from a running one's.

Ids are given by the writer, not by SQLite, so that a query can return its row's id at once:
``(milliseconds since the epoch) × 4096 + pid mod 4096``, rising by 4096 within a process — ordered
by time like the AUTOINCREMENT ids before them, and distinct between processes.

The database file is shared with other services (tool calls, plan runs), so this module
only ever creates and touches its own table.  WAL mode lets readers (``/rag last`` in the
TUI, the CLI) run while another process writes.  Opening runs the checks of
:mod:`services.audit.db` (integrity, schema version); every SQLite failure is one
:class:`~services.audit.db.AuditStoreError` line.  Where the workspace cannot be written (a
read-only file system, ``chmod a-w``) it is opened read-only: the entries are read, none is
written (:meth:`RetrievalAudit.unwritable` says why; the engine answers the query unaudited).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from services.audit.db import AuditStoreError, OwnTable, describe_sqlite_error, open_audit_db
from services.clock import utc_now
from services.retrieval.models import RetrievalRecord
from services.retrieval.readonly import why_unwritable
from services.sqlite.check import TableCheck
from services.sqlite.readonly import writable

FLUSH_INTERVAL_S = 0.25
"""A recorded retrieval is committed within this long (the most a crash of the machine may lose)."""
FLUSH_ROWS = 64
"""…or as soon as this many wait."""
PENDING = ".retrievals-{pid}.pending"
"""The pending file of a store: ``audit.db`` + this suffix (``pid``: process id and the store's serial)."""
_SERIALS = itertools.count(1)
_ID_LOCK = threading.Lock()
_LAST_ID = 0


def _next_id() -> int:
    """A row id: ``ms since the epoch × 4096 + pid mod 4096``, rising by 4096 within the process."""
    global _LAST_ID
    with _ID_LOCK:
        candidate = time.time_ns() // 1_000_000 * 4096 + os.getpid() % 4096
        _LAST_ID = max(candidate, _LAST_ID + 4096)
        return _LAST_ID


_COLUMNS = ("id", "ts", "workspace", "query", "index_name", "embedding_model", "params", "results")


def _pending_files(db_path: Path) -> list[Path]:
    return sorted(db_path.parent.glob(f"{db_path.name}.retrievals-*.pending"))


def _try_lock(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _read_pending(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The rows of a pending file (thresholds applied) and the number of torn lines."""
    rows: dict[int, dict[str, Any]] = {}
    torn = 0
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            torn += 1
            continue
        if "threshold_for" in entry:
            row = rows.get(int(entry["threshold_for"]))
            if row is not None:
                params = json.loads(row["params"])
                params["threshold"] = entry["threshold"]
                row["params"] = json.dumps(params, sort_keys=True)
        else:
            rows[int(entry["id"])] = entry
    return list(rows.values()), torn


def pending_report(db_path: Path) -> list[str]:
    """One line per pending file beside ``db_path``: rows waiting, torn lines, running or stopped.
    Reads only (what ``aries workspace open --check`` shows)."""
    lines: list[str] = []
    for path in _pending_files(db_path):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            stopped = _try_lock(fd)
            rows, torn = _read_pending(path)
        finally:
            os.close(fd)
        if not rows and not torn:
            continue
        lost = f"; {torn} torn line(s): that many retrievals are lost" if torn else ""
        if stopped:
            lines.append(
                f"{len(rows)} retrieval audit row(s) of a stopped Aries wait in {path.name}{lost}; "
                "the next open of this workspace commits them"
            )
        else:
            lines.append(f"{len(rows)} retrieval audit row(s) of a running Aries are being committed ({path.name})")
    return lines


RETRIEVALS_SCHEMA = """
CREATE TABLE IF NOT EXISTS retrievals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT NOT NULL,
    workspace TEXT,
    query TEXT NOT NULL,
    index_name TEXT NOT NULL,
    embedding_model TEXT NOT NULL,
    params TEXT NOT NULL,
    results TEXT NOT NULL
)
"""
IMPORT_CHECK = TableCheck(RETRIEVALS_SCHEMA, frozenset({("retrievals", "params"), ("retrievals", "results")}))
"""The table as an import of ``audit.db`` checks it (services.audit.db.check_imported)."""


class RetrievalAudit(OwnTable):
    """Writes and reads the ``retrievals`` table; one connection, shared by threads under a lock."""

    SCHEMA = RETRIEVALS_SCHEMA

    def __init__(self, db_path: Path, workspace: str | None = None) -> None:
        super().__init__(db_path)
        self.workspace = workspace
        self._cond = threading.Condition()
        self._queue: list[dict[str, Any]] = []
        self._fd: int | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._serial = next(_SERIALS)
        self._remap: dict[int, int] = {}
        self.recovered = 0
        """Rows of stopped processes committed from their pending files when this store opened."""
        self.lost = 0
        """Torn lines found in those files: retrievals that were lost."""

    def _open(self) -> sqlite3.Connection:
        if self.unwritable():
            return self._open_readonly()
        db = super()._open()
        try:
            self._recover(db)
        except BaseException:
            db.close()
            raise
        return db

    def _recover(self, db: sqlite3.Connection) -> None:
        """Commit the rows of stopped processes' pending files and delete those files."""
        for path in _pending_files(self.db_path):
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue
            try:
                if not _try_lock(fd):
                    continue  # its process is running: it commits its own rows
                rows, torn = _read_pending(path)
                if rows:
                    db.execute("BEGIN IMMEDIATE")
                    try:
                        db.executemany(
                            f"INSERT OR IGNORE INTO retrievals ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * 8)})",
                            [tuple(row[column] for column in _COLUMNS) for row in rows],
                        )
                        db.execute("COMMIT")
                    except BaseException:
                        if db.in_transaction:
                            db.execute("ROLLBACK")
                        raise
                self.recovered += len(rows)
                self.lost += torn
                path.unlink()
            finally:
                os.close(fd)

    # -- the writer --------------------------------------------------------------------------
    def _pending_path(self) -> Path:
        return self.db_path.parent / (self.db_path.name + PENDING.format(pid=f"{os.getpid()}-{self._serial}"))

    def _append(self, entry: dict[str, Any]) -> None:
        """One line in this store's pending file (under ``_cond``)."""
        if self._fd is None:
            fd = os.open(
                self._pending_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o600
            )
            _try_lock(fd)  # held until close: a reader knows this file's process is running
            self._fd = fd
        data = (json.dumps(entry) + "\n").encode("utf-8")
        written = os.write(self._fd, data)
        if written != len(data):
            raise OSError(errno.ENOSPC, "short write")

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="retrieval-audit", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or len(self._queue) >= FLUSH_ROWS, FLUSH_INTERVAL_S)
                stopping = self._stopping
            with contextlib.suppress(AuditStoreError):  # kept in the pending file; tried again next time
                self.flush()
            if stopping:
                return

    def flush(self) -> None:
        """Commit the queued rows now (in one transaction); empty the pending file if nothing new came."""
        with self._cond:
            rows = list(self._queue)
        if rows:
            with self._connect() as db:
                db.execute("BEGIN IMMEDIATE")
                try:
                    for row in rows:
                        values = tuple(row[column] for column in _COLUMNS)
                        try:
                            db.execute(
                                f"INSERT INTO retrievals ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * 8)})", values
                            )
                        except sqlite3.IntegrityError:  # the same id from another process: a new one
                            cursor = db.execute(
                                f"INSERT INTO retrievals ({', '.join(_COLUMNS[1:])}) VALUES ({', '.join('?' * 7)})",
                                values[1:],
                            )
                            self._remap[int(row["id"])] = int(cursor.lastrowid or 0)
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
        with self._cond:
            del self._queue[: len(rows)]
            if not self._queue and self._fd is not None:
                os.ftruncate(self._fd, 0)

    def _open_readonly(self) -> sqlite3.Connection:
        """Where the workspace cannot be written: read what is there (writes fail, see :meth:`unwritable`)."""
        return open_audit_db(self.db_path, readonly=True, rows=self.ROWS)

    def unwritable(self) -> str | None:
        """Why no retrieval can be recorded here (the workspace is on a read-only file system, or
        its folder or ``audit.db`` cannot be written), or None when it can be."""
        folder = self.db_path.parent
        if writable(folder) and (not self.db_path.exists() or writable(self.db_path)):
            return None
        return why_unwritable(folder)

    def record(
        self,
        *,
        query: str,
        index: str,
        embedding_model: str,
        params: dict[str, Any],
        hits: list[dict[str, Any]],
    ) -> int:
        """Append one entry (committed within :data:`FLUSH_INTERVAL_S`); returns its id."""
        why = self.unwritable()
        if why is not None:
            raise AuditStoreError(f"cannot write the audit database {self.db_path}: {why}", path=str(self.db_path))
        if self._db is None:
            with self._connect():  # opened (and stopped processes' rows committed) before the first row
                pass
        with self._cond:
            row_id = _next_id()
            row: dict[str, Any] = {
                "id": row_id,
                "ts": utc_now(),
                "workspace": self.workspace,
                "query": query,
                "index_name": index,
                "embedding_model": embedding_model,
                "params": json.dumps(params, sort_keys=True),
                "results": json.dumps(hits),
            }
            try:
                self._append(row)
            except OSError as exc:
                raise describe_sqlite_error(self.db_path, exc, "write") from None
            self._queue.append(row)
            if len(self._queue) >= FLUSH_ROWS:
                self._cond.notify_all()
            self._start()
        return row_id

    def record_threshold(self, audit_id: int, threshold: dict[str, Any]) -> None:
        """Add the relevance threshold an answer applied to entry ``audit_id`` (``params.threshold``).

        ``threshold`` is what :meth:`services.models.answers.Relevance.to_dict` gives: the limits and
        the handles that passed them.
        """
        with self._cond:
            queued = next((row for row in self._queue if row["id"] == audit_id), None)
            if queued is not None:
                params = json.loads(queued["params"])
                params["threshold"] = threshold
                queued["params"] = json.dumps(params, sort_keys=True)
                try:
                    self._append({"threshold_for": audit_id, "threshold": threshold})
                except OSError as exc:
                    raise describe_sqlite_error(self.db_path, exc, "write") from None
                return
        audit_id = self._remap.get(audit_id, audit_id)
        with self._connect() as db:
            row = db.execute("SELECT params FROM retrievals WHERE id = ?", (audit_id,)).fetchone()
            if row is None:
                return
            params = json.loads(row[0])
            params["threshold"] = threshold
            db.execute("UPDATE retrievals SET params = ? WHERE id = ?", (json.dumps(params, sort_keys=True), audit_id))

    def recent(self, limit: int = 20) -> list[RetrievalRecord]:
        """The newest entries first."""
        if self._queue:
            self.flush()
        if not self.db_path.exists():
            return []
        with self._connect() as db:
            made = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'retrievals'").fetchone()
            if made is None:
                return []  # opened read-only: the table was never made
            rows = db.execute(
                "SELECT id, ts, query, index_name, embedding_model, params, results, workspace "
                "FROM retrievals ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [
            RetrievalRecord(
                id=row[0],
                ts=row[1],
                query=row[2],
                index=row[3],
                embedding_model=row[4],
                params=json.loads(row[5]),
                hits=json.loads(row[6]),
                workspace=row[7],
            )
            for row in rows
        ]

    def last(self) -> RetrievalRecord | None:
        rows = self.recent(1)
        return rows[0] if rows else None

    def close(self) -> None:
        """Commit what is queued, stop the writer, and release the pending file."""
        with self._cond:
            thread, self._stopping = self._thread, True
            self._cond.notify_all()
        if thread is not None:
            thread.join()
            self._thread = None
        with contextlib.suppress(AuditStoreError):
            self.flush()
        with self._cond:
            fd, self._fd = self._fd, None
            if fd is not None:
                empty = os.fstat(fd).st_size == 0
                os.close(fd)
                if empty:
                    with contextlib.suppress(OSError):
                        self._pending_path().unlink()
        super().close()
