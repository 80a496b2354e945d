"""The ``retrievals`` table of ``<workspace>/audit.db``: one row per query.

The database file is shared with other services (tool calls, plan runs), so this module
only ever creates and touches its own table.  WAL mode lets readers (``/rag last`` in the
TUI, the CLI) run while another process writes.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from services.clock import utc_now
from services.retrieval.models import RetrievalRecord

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


class RetrievalAudit:
    """Writes and reads the ``retrievals`` table; one connection, shared by threads under a lock."""

    def __init__(self, db_path: Path, workspace: str | None = None) -> None:
        self.db_path = Path(db_path)
        self.workspace = workspace
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._db is None:
                db = sqlite3.connect(self.db_path, timeout=10, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoints, no fsync per query
                db.execute(_SCHEMA)
                db.commit()
                self._db = db
            yield self._db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

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
            db.commit()
            return int(cursor.lastrowid or 0)

    def recent(self, limit: int = 20) -> list[RetrievalRecord]:
        """The newest entries first."""
        if not self.db_path.exists():
            return []
        with self._connect() as db:
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
