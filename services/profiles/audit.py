"""The ``profile_switches`` table of ``<workspace>/audit.db``: one row per profile switch.

The database is shared with the tool audit and the retrieval audit; like ``services.retrieval.audit``
this module only creates and touches its own table (after the checks of :mod:`services.audit.db`).
A switch is rare, so each write opens and closes its own connection.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.audit.db import AUDIT_FILE, describe_sqlite_error, open_audit_db
from services.clock import utc_now
from services.sqlite.check import TableCheck

if TYPE_CHECKING:
    from services.profiles.loader import ActiveProfile
    from services.workspace.manager import Workspace

PROFILE_SWITCHES_SCHEMA = """
CREATE TABLE IF NOT EXISTS profile_switches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT NOT NULL,
    workspace TEXT,
    source TEXT,
    old_profile TEXT,
    new_profile TEXT NOT NULL,
    profile_path TEXT,
    policy_hash TEXT,
    approval_mode TEXT,
    tools TEXT
)
"""
IMPORT_CHECK = TableCheck(PROFILE_SWITCHES_SCHEMA, frozenset({("profile_switches", "tools")}))
"""The table as an import of ``audit.db`` checks it (services.audit.db.check_imported)."""


def _connect(path: Path) -> sqlite3.Connection:
    return open_audit_db(path, tables=[PROFILE_SWITCHES_SCHEMA], rows=True)


def record_switch(
    workspace: Workspace, source: str, old: str | None, profile: ActiveProfile, *, policy_hash: str, approval_mode: str
) -> int:
    """Append one switch; returns its row id. Raises AuditStoreError (one line) on failure."""
    import json

    path = workspace.root / AUDIT_FILE
    tools = None if profile.tools is None else sorted(profile.tools)

    try:
        db = _connect(path)
        try:
            cursor = db.execute(
                "INSERT INTO profile_switches(ts, workspace, source, old_profile, new_profile, profile_path,"
                " policy_hash, approval_mode, tools) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    utc_now(),
                    workspace.name,
                    source,
                    old,
                    profile.name,
                    str(profile.path) if profile.path is not None else None,
                    policy_hash,
                    approval_mode,
                    None if tools is None else json.dumps(tools),
                ),
            )
            return int(cursor.lastrowid or 0)
        finally:
            db.close()
    except (sqlite3.Error, OSError) as exc:
        raise describe_sqlite_error(path, exc, "write to") from None


def switches(workspace_root: Path, *, limit: int = 50) -> list[dict[str, Any]]:
    """The most recent switches, newest first (empty when the table does not exist yet)."""
    path = workspace_root / AUDIT_FILE
    if not path.exists():
        return []
    try:
        db = _connect(path)
        try:
            rows = db.execute("SELECT * FROM profile_switches ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
            return [dict(row) for row in rows]
        finally:
            db.close()
    except (sqlite3.Error, OSError) as exc:
        raise describe_sqlite_error(path, exc, "read") from None


__all__ = ["record_switch", "switches"]
