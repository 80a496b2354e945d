"""The SQLite audit store at ``<workspace>/audit.db``: every tool call, allowed, denied or failed.

Tables (the capsule spec's, plus the policy decision, the matching rule and who approved)::

    runs          one per gateway session or plan run
    tool_calls    one per call, written before the call runs
    tool_results  one per call, written when it ends (status success / error / denied)

WAL mode, ``CREATE TABLE IF NOT EXISTS``; other services keep their own tables in the same
file (retrieval writes ``retrievals``) and this module never touches them.  A call row without
a result row is a call that was interrupted (crash, kill) before it finished.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from services.clock import utc_now

AUDIT_FILE = "audit.db"
SCHEMA_VERSION = 1

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
    workspace   TEXT
);
CREATE INDEX IF NOT EXISTS tool_calls_run ON tool_calls(run_id, step_index);
CREATE INDEX IF NOT EXISTS tool_results_run ON tool_results(run_id);
CREATE INDEX IF NOT EXISTS tool_results_ended ON tool_results(ended_at);
"""


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_hash(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


class AuditStore:
    """Thread-safe writer/reader of the audit tables. One connection, serialised by a lock."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=10.0, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        with self._lock:
            self._conn.execute("PRAGMA busy_timeout = 10000")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.executescript(SCHEMA)
            self._conn.execute(
                "INSERT OR IGNORE INTO audit_meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )

    @classmethod
    def for_workspace(cls, root: Path) -> AuditStore:
        return cls(Path(root) / AUDIT_FILE)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> AuditStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._lock:
            self._conn.execute(sql, params)

    # -- writing -----------------------------------------------------------------------
    def start_run(
        self,
        run_id: str,
        *,
        mode: str = "interactive",
        policy_hash: str | None = None,
        plan_hash: str | None = None,
        source: str | None = None,
        workspace: str | None = None,
        approval_mode: str | None = None,
    ) -> None:
        self._write(
            "INSERT OR IGNORE INTO runs(run_id, created_at, plan_hash, policy_hash, mode, status, source, workspace,"
            " approval_mode) VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)",
            (run_id, utc_now(), plan_hash, policy_hash, mode, source, workspace, approval_mode),
        )

    def end_run(self, run_id: str, status: str = "completed") -> None:
        self._write("UPDATE runs SET status = ?, ended_at = ? WHERE run_id = ?", (status, utc_now(), run_id))

    def record_call(
        self,
        *,
        call_id: str,
        run_id: str,
        step_index: int,
        tool_name: str,
        args: Any,
        created_at: str,
        source: str | None,
        tier: str | None,
    ) -> None:
        self._write(
            "INSERT INTO tool_calls(call_id, run_id, step_index, tool_name, args_json, created_at, source, tier)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (call_id, run_id, step_index, tool_name, canonical_json(args), created_at, source, tier),
        )

    def record_result(
        self,
        *,
        call_id: str,
        run_id: str,
        status: str,
        output_json: str | None,
        error_json: str | None,
        decision: dict[str, Any],
        started_at: str,
        ended_at: str,
        duration_ms: float,
        input_hash: str,
        output_hash: str | None,
        workspace: str | None,
    ) -> None:
        self._write(
            "INSERT INTO tool_results(call_id, run_id, status, output_json, error_json, policy_decision_json,"
            " decision, rule_id, approved_by, started_at, ended_at, duration_ms, input_hash, output_hash, workspace)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                call_id,
                run_id,
                status,
                output_json,
                error_json,
                canonical_json(decision),
                decision.get("action", "deny"),
                decision.get("rule", "unknown"),
                decision.get("approved_by"),
                started_at,
                ended_at,
                duration_ms,
                input_hash,
                output_hash,
                workspace,
            ),
        )

    def next_step(self, run_id: str) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT COALESCE(MAX(step_index), -1) + 1 FROM tool_calls WHERE run_id = ?", (run_id,)
            ).fetchone()
        return int(row[0])

    # -- reading -----------------------------------------------------------------------
    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._conn.execute(sql, params).fetchall()]

    _CALL_SQL = (
        "SELECT c.call_id, c.run_id, c.step_index, c.tool_name, c.args_json, c.created_at, c.source, c.tier,"
        " r.status, r.output_json, r.error_json, r.policy_decision_json, r.decision, r.rule_id, r.approved_by,"
        " r.started_at, r.ended_at, r.duration_ms, r.input_hash, r.output_hash"
        " FROM tool_calls c LEFT JOIN tool_results r ON r.call_id = c.call_id"
    )

    @staticmethod
    def _decode(row: dict[str, Any]) -> dict[str, Any]:
        for key in ("args_json", "output_json", "error_json", "policy_decision_json"):
            value = row.pop(key, None)
            row[key.removesuffix("_json")] = json.loads(value) if value is not None else None
        return row

    def calls(self, run_id: str | None = None, *, limit: int = 100) -> list[dict[str, Any]]:
        """Calls with their results, oldest first (the last ``limit``)."""
        where, params = ("WHERE c.run_id = ?", (run_id,)) if run_id else ("", ())
        rows = self._rows(f"{self._CALL_SQL} {where} ORDER BY c.rowid DESC LIMIT ?", (*params, limit))
        return [self._decode(r) for r in reversed(rows)]

    def get_call(self, call_id: str) -> dict[str, Any] | None:
        rows = self._rows(f"{self._CALL_SQL} WHERE c.call_id = ?", (call_id,))
        return self._decode(rows[0]) if rows else None

    def runs(self, *, limit: int = 50) -> list[dict[str, Any]]:
        return list(reversed(self._rows("SELECT * FROM runs ORDER BY rowid DESC LIMIT ?", (limit,))))

    def last_decision(self, run_id: str | None = None) -> dict[str, Any] | None:
        """The latest finished call's decision, for ``/policy explain-last``."""
        where, params = ("WHERE r.run_id = ?", (run_id,)) if run_id else ("", ())
        rows = self._rows(
            "SELECT c.call_id, c.tool_name, c.args_json, c.tier, r.status, r.decision, r.rule_id, r.approved_by,"
            " r.policy_decision_json, r.error_json, r.ended_at FROM tool_results r"
            f" JOIN tool_calls c ON c.call_id = r.call_id {where} ORDER BY r.rowid DESC LIMIT 1",
            params,
        )
        if not rows:
            return None
        row = self._decode(rows[0])
        decision = row.get("policy_decision") or {}
        row["reason"] = decision.get("reason")
        return row

    def counts(self) -> dict[str, int]:
        rows = self._rows("SELECT status, COUNT(*) AS n FROM tool_results GROUP BY status")
        return {r["status"]: int(r["n"]) for r in rows}

    def table_names(self) -> list[str]:
        return [r["name"] for r in self._rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]

    def journal_mode(self) -> str:
        with self._lock:
            return str(self._conn.execute("PRAGMA journal_mode").fetchone()[0])


def explain(decision_row: dict[str, Any] | None) -> str:
    """One paragraph for ``/policy explain-last``."""
    if decision_row is None:
        return "No tool call has been recorded yet."
    who = decision_row.get("approved_by")
    approval = f", approved by {who}" if who else ""
    return (
        f"{decision_row['tool_name']} ({decision_row.get('tier') or '?'}): {decision_row['decision']} by rule "
        f"{decision_row['rule_id']}{approval}; result {decision_row['status']}. "
        f"{decision_row.get('reason') or ''}".strip()
    )
