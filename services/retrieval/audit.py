"""The ``retrievals`` table of ``<workspace>/audit.db``: one row per query.

The database file is shared with other services (tool calls, plan runs), so this module
only ever creates and touches its own table.  WAL mode lets readers (``/rag last`` in the
TUI, the CLI) run while another process writes.  Opening runs the checks of
:mod:`services.audit_db` (integrity, schema version); every SQLite failure is one
:class:`~services.audit_db.AuditStoreError` line.  Where the workspace cannot be written (a
read-only file system, ``chmod a-w``) it is opened read-only: the entries are read, none is
written (:meth:`RetrievalAudit.unwritable` says why; the engine answers the query unaudited).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from services.audit_db import SCHEMA_VERSION, AuditStoreError, OwnTable
from services.clock import utc_now
from services.retrieval.models import RetrievalRecord
from services.retrieval.readonly import UnreadableWal, connect_readonly, why_unwritable, writable

AUDIT_DB = "audit.db"

_SCHEMA = """
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


class RetrievalAudit(OwnTable):
    """Writes and reads the ``retrievals`` table; one connection, shared by threads under a lock."""

    SCHEMA = _SCHEMA

    def __init__(self, db_path: Path, workspace: str | None = None) -> None:
        super().__init__(db_path)
        self.workspace = workspace

    def _open(self) -> sqlite3.Connection:
        return self._open_readonly() if self.unwritable() else super()._open()

    def _open_readonly(self) -> sqlite3.Connection:
        """Where the workspace cannot be written: read what is there (writes fail, see :meth:`unwritable`)."""
        try:
            db = connect_readonly(self.db_path)
        except UnreadableWal:
            raise AuditStoreError(
                f"cannot read the audit database {self.db_path}: its last writes are in {AUDIT_DB}-wal, which "
                f"SQLite reads only with {AUDIT_DB}-shm, and that file is missing and cannot be made here",
                path=str(self.db_path),
            ) from None
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            db.close()
            raise AuditStoreError(
                f"{AUDIT_DB} was written by a newer Aries (schema {version}; this one knows {SCHEMA_VERSION}) "
                f"({self.db_path})",
                path=str(self.db_path),
            )
        return db

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
        """Append one entry; returns its id."""
        with self._connect() as db:
            cursor = db.execute(
                "INSERT INTO retrievals (ts, workspace, query, index_name, embedding_model, params, results) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    utc_now(),
                    self.workspace,
                    query,
                    index,
                    embedding_model,
                    json.dumps(params, sort_keys=True),
                    json.dumps(hits),
                ),
            )
            return int(cursor.lastrowid or 0)

    def record_threshold(self, audit_id: int, threshold: dict[str, Any]) -> None:
        """Add the relevance threshold an answer applied to entry ``audit_id`` (``params.threshold``).

        ``threshold`` is what :meth:`services.answers.Relevance.to_dict` gives: the limits and
        the handles that passed them.
        """
        with self._connect() as db:
            row = db.execute("SELECT params FROM retrievals WHERE id = ?", (audit_id,)).fetchone()
            if row is None:
                return
            params = json.loads(row[0])
            params["threshold"] = threshold
            db.execute("UPDATE retrievals SET params = ? WHERE id = ?", (json.dumps(params, sort_keys=True), audit_id))

    def recent(self, limit: int = 20) -> list[RetrievalRecord]:
        """The newest entries first."""
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
