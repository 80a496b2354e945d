"""The ``cloud_calls`` table of ``<workspace>/audit.db``: one row per question the bridge handled.

Never the text: a row holds the request id, the time, the mode, the endpoint and model, the
SHA-256 of the prompt exactly as sent (after redaction) and of the reply exactly as received, the
redaction counts per kind, the outcome and how long it took.  ``status``:

    sent      the cloud answered (reply_sha256 set)
    error     the request left but failed (``error`` holds the error code)
    refused   the outbound allowlist refused it: nothing left the machine
    declined  ``ask`` mode and the operator (or a headless run without ``--cloud``) said no

Like :mod:`services.retrieval.audit`, this module only creates and touches its own table in the
shared file (checked on open by :mod:`services.audit.db`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.audit.db import AUDIT_FILE, OwnTable
from services.clock import utc_now
from services.sqlite.check import TableCheck

CLOUD_CALLS_SCHEMA = """
CREATE TABLE IF NOT EXISTS cloud_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL UNIQUE,
    ts TEXT NOT NULL,
    workspace TEXT,
    mode TEXT NOT NULL,
    base_url TEXT,
    model TEXT,
    status TEXT NOT NULL CHECK (status IN ('sent', 'error', 'refused', 'declined')),
    prompt_sha256 TEXT NOT NULL,
    reply_sha256 TEXT,
    redactions TEXT NOT NULL,
    local_confidence REAL,
    duration_ms INTEGER,
    error TEXT
)
"""
IMPORT_CHECK = TableCheck(CLOUD_CALLS_SCHEMA, frozenset({("cloud_calls", "redactions")}))
"""The table as an import of ``audit.db`` checks it (services.audit.db.check_imported)."""


class CloudAudit(OwnTable):
    """Writes and reads ``cloud_calls``; one connection, shared by threads under a lock."""

    SCHEMA = CLOUD_CALLS_SCHEMA
    ROWS = True

    def __init__(self, db_path: Path, workspace: str | None = None) -> None:
        super().__init__(db_path)
        self.workspace = workspace

    @classmethod
    def for_workspace(cls, root: Path, workspace: str | None = None) -> CloudAudit:
        return cls(Path(root) / AUDIT_FILE, workspace)

    def record(
        self,
        *,
        request_id: str,
        mode: str,
        status: str,
        prompt_sha256: str,
        redactions: dict[str, int],
        base_url: str | None = None,
        model: str | None = None,
        reply_sha256: str | None = None,
        local_confidence: float | None = None,
        duration_ms: int | None = None,
        error: str | None = None,
    ) -> int:
        """Append one row; returns its id."""
        with self._connect() as db:
            cursor = db.execute(
                "INSERT INTO cloud_calls (request_id, ts, workspace, mode, base_url, model, status, prompt_sha256,"
                " reply_sha256, redactions, local_confidence, duration_ms, error)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    request_id,
                    utc_now(),
                    self.workspace,
                    mode,
                    base_url,
                    model,
                    status,
                    prompt_sha256,
                    reply_sha256,
                    json.dumps(redactions, sort_keys=True),
                    local_confidence,
                    duration_ms,
                    error,
                ),
            )
            return int(cursor.lastrowid or 0)

    def recent(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest rows first (``redactions`` decoded); for ``aries status`` and the TUI."""
        if not self.db_path.exists():
            return []
        with self._connect() as db:
            rows = db.execute("SELECT * FROM cloud_calls ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        out = []
        for row in rows:
            entry = dict(row)
            entry["redactions"] = json.loads(entry["redactions"])
            out.append(entry)
        return out

    def get(self, request_id: str) -> dict[str, Any] | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM cloud_calls WHERE request_id = ?", (request_id,)).fetchone()
        if row is None:
            return None
        entry = dict(row)
        entry["redactions"] = json.loads(entry["redactions"])
        return entry


__all__ = ["CloudAudit"]
