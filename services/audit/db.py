"""The audit database file: its schemas, its version, the one way it is opened
(:func:`open_audit_db`: the checks, WAL, the caller's own tables) and the one error type every
SQLite failure on it becomes.  Shared by :mod:`services.audit.log` (tool calls), the plan runs
(:mod:`services.plans.runner`), the retrievals, the cloud calls, the profile switches and the
context requests and traces, which keep their own tables in the same file.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from services.errors import AriesError
from services.sqlite.check import StoreRefused, TableCheck, check_sqlite
from services.sqlite.readonly import UnreadableWal, connect_readonly
from services.workspace.paths import AUDIT_FILE as AUDIT_FILE

SCHEMA_VERSION = 2
"""The audit tables' schema version, kept in ``PRAGMA user_version`` (0: a file from before
versioning or one that only holds other services' tables; migrated to 1 by creating the tables;
2 adds ``tool_results.artifacts_json``, the artifacts a call stored: fetched bodies, extracted
text, file snapshots and diffs)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS audit_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    plan_hash   TEXT,
    policy_hash TEXT,
    mode        TEXT NOT NULL,
    status      TEXT NOT NULL,
    source      TEXT,
    workspace   TEXT,
    approval_mode TEXT,
    ended_at    TEXT
);
CREATE TABLE IF NOT EXISTS tool_calls (
    call_id     TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    step_index  INTEGER NOT NULL,
    tool_name   TEXT NOT NULL,
    args_json   TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    source      TEXT,
    tier        TEXT
);
CREATE TABLE IF NOT EXISTS tool_results (
    call_id     TEXT PRIMARY KEY REFERENCES tool_calls(call_id),
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    status      TEXT NOT NULL CHECK (status IN ('success', 'error', 'denied')),
    output_json TEXT,
    error_json  TEXT,
    policy_decision_json TEXT NOT NULL,
    decision    TEXT NOT NULL,
    rule_id     TEXT NOT NULL,
    approved_by TEXT,
    started_at  TEXT NOT NULL,
    ended_at    TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    input_hash  TEXT NOT NULL,
    output_hash TEXT,
    workspace   TEXT,
    artifacts_json TEXT
);
CREATE INDEX IF NOT EXISTS tool_calls_run ON tool_calls(run_id, step_index);
CREATE INDEX IF NOT EXISTS tool_results_run ON tool_results(run_id);
CREATE INDEX IF NOT EXISTS tool_results_ended ON tool_results(ended_at);
"""

PLAN_RUNS_SCHEMA = """
CREATE TABLE IF NOT EXISTS plan_runs (
    run_id        TEXT PRIMARY KEY,
    plan_source   TEXT NOT NULL,
    plan_text     TEXT NOT NULL,
    policy_source TEXT NOT NULL,
    policy_text   TEXT,
    approve_json  TEXT NOT NULL,
    replay_of     TEXT,
    created_at    TEXT NOT NULL
)
"""
"""Plan runs (``services.plans.runner``): the plan, the policy and the approvals a replay runs again."""

CONTEXT_REQUESTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS context_requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    ts TEXT NOT NULL,
    operation TEXT NOT NULL,
    target TEXT,
    duration_ms REAL NOT NULL,
    outcome TEXT NOT NULL,
    trace_id TEXT,
    counts TEXT NOT NULL
)
"""
CONTEXT_TRACES_SCHEMA = """
CREATE TABLE IF NOT EXISTS context_traces (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    ts TEXT NOT NULL,
    kind TEXT NOT NULL,
    query TEXT NOT NULL,
    stop_reason TEXT NOT NULL,
    hits INTEGER NOT NULL,
    data TEXT NOT NULL
)
"""


IMPORT_CHECKS = (
    TableCheck(SCHEMA),
    TableCheck(PLAN_RUNS_SCHEMA),
    TableCheck(CONTEXT_REQUESTS_SCHEMA, frozenset({("context_requests", "counts")})),
    TableCheck(CONTEXT_TRACES_SCHEMA, frozenset({("context_traces", "data")})),
)
"""This module's tables as an import checks them (the other stores of the file export their own)."""


def check_imported(path: Path, rel: str, others: Sequence[TableCheck]) -> None:
    """Refuse (:class:`~services.sqlite.check.StoreRefused`, naming ``rel``) an ``audit.db`` that arrived
    in a bundle unless it is what Aries writes: a whole SQLite database without triggers or views, the
    tables of this module and of ``others`` (the other stores' :class:`TableCheck`) with the column types
    Aries writes, and a schema version this Aries reads."""
    check_sqlite(path, rel, [*IMPORT_CHECKS, *others])
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise StoreRefused(f"{rel} cannot be read ({exc}); the bundle is refused") from None
    if version > SCHEMA_VERSION:
        raise StoreRefused(
            f"{AUDIT_FILE} has schema version {version}; this Aries reads up to {SCHEMA_VERSION} "
            "(exported by a newer Aries?); the bundle is refused"
        )


def plan_run_ids(path: Path) -> list[str]:
    """The ids of the plan runs recorded in the ``audit.db`` at ``path`` (read-only), sorted; none when
    the file or its ``plan_runs`` table does not exist."""
    if not path.is_file():
        return []
    db = open_audit_db(path, readonly=True, timeout=5)
    try:
        return sorted(str(row[0]) for row in db.execute("SELECT run_id FROM plan_runs"))
    except sqlite3.OperationalError:  # no plan_runs table: no run to replay
        return []
    finally:
        db.close()


class AuditStoreError(AriesError):
    """The audit database cannot be opened, read or written (damaged, full, read-only, locked)."""

    code = "audit_store_error"


_REASONS = {
    "SQLITE_FULL": "the disk is full",
    "SQLITE_READONLY": "it is on a read-only file system or not writable",
    "SQLITE_CANTOPEN": "it cannot be opened (missing folder, permissions or a read-only file system)",
    "SQLITE_BUSY": "it is locked by another process (busy past the timeout)",
    "SQLITE_LOCKED": "it is locked by another connection",
    "SQLITE_CORRUPT": "the file is damaged",
    "SQLITE_NOTADB": "the file is not an SQLite database (damaged or overwritten)",
    "SQLITE_IOERR": "an I/O error occurred",
    "SQLITE_PERM": "access was denied",
}


def describe_sqlite_error(path: Path, exc: BaseException, doing: str = "use") -> AuditStoreError:
    """One clear line for a SQLite or OS failure on ``path``."""
    if isinstance(exc, AuditStoreError):
        return exc
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    base = next((key for key in _REASONS if name == key or name.startswith(key + "_")), "")
    if not base and isinstance(exc, OSError):
        import errno

        base = {errno.ENOSPC: "SQLITE_FULL", errno.EROFS: "SQLITE_READONLY", errno.EACCES: "SQLITE_PERM"}.get(
            exc.errno or 0, ""
        )
    reason = _REASONS.get(base) or " ".join(str(exc).split())[:200] or type(exc).__name__
    hint = ""
    if base in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
        hint = "; move it aside (Aries starts a new one) and keep the old file for inspection"
    return AuditStoreError(f"cannot {doing} the audit database {path}: {reason}{hint}", path=str(path), sqlite=name)


def open_audit_db(
    path: Path,
    *,
    tables: Sequence[str] = (),
    migrate_tables: bool = False,
    readonly: bool = False,
    rows: bool = False,
    timeout: float = 10.0,
) -> sqlite3.Connection:
    """The one way Aries opens an ``audit.db``: connect, refuse a newer schema or a damaged file
    (``PRAGMA quick_check``), set WAL, and create the caller's own ``tables`` (each a ``CREATE TABLE
    IF NOT EXISTS`` statement; other services' tables are left alone).

    ``migrate_tables`` (the tool audit store, :mod:`services.audit.log`) creates or migrates the audit
    tables of :data:`SCHEMA`; ``readonly`` opens the file without writing anything (it must exist;
    on a read-only file system too, :func:`services.sqlite.readonly.connect_readonly`);
    ``rows`` gives :class:`sqlite3.Row` rows; ``timeout`` is how long a write waits for another
    process's lock.  The connection autocommits (``BEGIN`` for a transaction) and may be shared by
    threads under the caller's lock.  Every SQLite or OS failure is one :class:`AuditStoreError`.
    """
    path = Path(path)
    try:
        if readonly:
            db = connect_readonly(path, timeout=timeout)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, timeout=timeout, check_same_thread=False, isolation_level=None)
    except UnreadableWal:
        raise AuditStoreError(
            f"cannot read the audit database {path}: its last writes are in {AUDIT_FILE}-wal, which SQLite reads "
            f"only with {AUDIT_FILE}-shm, and that file is missing and cannot be made here",
            path=str(path),
        ) from None
    except (sqlite3.Error, OSError) as exc:
        raise describe_sqlite_error(path, exc, "open") from None
    try:
        _check(db, path, timeout=timeout, readonly=readonly)
        if migrate_tables and not readonly:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version < SCHEMA_VERSION:
                migrate(db, version)
        for statement in tables:
            db.execute(statement)
    except BaseException as exc:
        db.close()
        if isinstance(exc, sqlite3.Error | OSError):
            raise describe_sqlite_error(path, exc, "open") from None
        raise
    if rows:
        db.row_factory = sqlite3.Row
    return db


def _check(conn: sqlite3.Connection, path: Path, *, timeout: float, readonly: bool) -> None:
    """Refuse a newer schema or a damaged file; set WAL (not on a read-only connection)."""
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000):d}")
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])  # reads the header: NOTADB here
    if version > SCHEMA_VERSION:
        raise AuditStoreError(
            f"{AUDIT_FILE} was written by a newer Aries (schema {version}; this one knows {SCHEMA_VERSION}); "
            f"open this workspace with that version ({path})",
            path=str(path),
            schema=version,
        )
    problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)").fetchall()]
    if problems != ["ok"]:
        first = " ".join(problems[0].split())[:160] if problems else "no answer"
        raise AuditStoreError(
            f"the audit database {path} is damaged (integrity check: {first}); move it aside "
            "(Aries starts a new one) and keep the old file for inspection",
            path=str(path),
        )
    if readonly:
        return
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")


def migrate(conn: sqlite3.Connection, version: int) -> None:
    """From ``version`` to :data:`SCHEMA_VERSION`, all in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = int(conn.execute("PRAGMA user_version").fetchone()[0])  # another process may have done it
        if current < 1:
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO audit_meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
        columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(tool_results)").fetchall()}
        if "artifacts_json" not in columns:  # schema 1 (or a file from before versioning)
            conn.execute("ALTER TABLE tool_results ADD COLUMN artifacts_json TEXT")
        if current < SCHEMA_VERSION:
            conn.execute("UPDATE audit_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class OwnTable:
    """A module's own table in ``audit.db``: one connection, opened on first use and shared by threads
    under a lock, the file checked on open (:func:`open_audit_db`, other tables left alone), the
    module's ``SCHEMA`` created, and every SQLite failure one :class:`AuditStoreError`.

    Subclasses set ``SCHEMA`` (and ``ROWS = True`` for :class:`sqlite3.Row` rows); a store that must
    open the file another way (read-only) overrides :meth:`_open`.
    """

    SCHEMA = ""
    ROWS = False

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                if self._db is None:
                    self._db = self._open()
                yield self._db
            except (sqlite3.Error, OSError) as exc:
                raise describe_sqlite_error(self.db_path, exc) from None

    def _open(self) -> sqlite3.Connection:
        return open_audit_db(self.db_path, tables=[self.SCHEMA], rows=self.ROWS)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
