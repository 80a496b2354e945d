"""The SQLite audit store at ``<workspace>/audit.db``: every tool call, allowed, denied or failed.

Tables (the capsule spec's, plus the policy decision, the matching rule and who approved)::

    runs          one per gateway session or plan run
    tool_calls    one per call, written before the call runs
    tool_results  one per call, written when it ends (status success / error / denied)

WAL mode; other services keep their own tables in the same file (retrieval writes
``retrievals``) and this module never touches them.  A call row without a result row is a
call that was interrupted (crash, kill) before it finished.

Opening checks the store: ``PRAGMA quick_check`` (a damaged file is refused instead of
receiving rows unnoticed), and the schema version kept in ``PRAGMA user_version``: a file
written by a newer Aries is refused, never silently migrated; an older one is migrated in
one transaction.  Every SQLite failure — a damaged file, a full disk, a read-only file
system, a database locked past the busy timeout — is one :class:`AuditStoreError` with one
clear line.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.audit.db import AUDIT_FILE, AuditStoreError, describe_sqlite_error, open_audit_db
from services.clock import utc_now
from services.hashing import canonical_json

__all__ = ["AuditStore", "explain", "read_decisions"]


class AuditStore:
    """Thread-safe writer/reader of the audit tables. One connection, serialised by a lock."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = open_audit_db(self.path, migrate_tables=True, rows=True)

    def schema_version(self) -> int:
        with self._lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

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

    def _write(self, sql: str, params: tuple[Any, ...]) -> int:
        """Run one statement; return the number of rows it changed."""
        with self._lock:
            try:
                return int(self._conn.execute(sql, params).rowcount)
            except sqlite3.IntegrityError:
                raise  # a caller's bug (unknown run, duplicate call id), not a storage failure
            except sqlite3.Error as exc:
                raise describe_sqlite_error(self.path, exc, "write to") from None

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
        tier: str | None = None,
        artifacts: list[dict[str, Any]] | None = None,
    ) -> None:
        """Record the end of a call.  ``tier`` is the tier the decision used (arguments can raise
        a tool's fixed tier); when given it replaces the tier on the call row, in the same
        transaction as the result row.  ``artifacts`` are the links to what the call stored in the
        artifact registry (``services.tools.snapshots``), kept as ``artifacts_json``."""
        statements: list[tuple[str, tuple[Any, ...]]] = []
        if tier is not None:
            statements.append(("UPDATE tool_calls SET tier = ? WHERE call_id = ?", (tier, call_id)))
        statements.append(
            self._result_insert(
                call_id=call_id,
                run_id=run_id,
                status=status,
                output_json=output_json,
                error_json=error_json,
                decision=decision,
                started_at=started_at,
                ended_at=ended_at,
                duration_ms=duration_ms,
                input_hash=input_hash,
                output_hash=output_hash,
                workspace=workspace,
                artifacts=artifacts,
            )
        )
        self._write_all(statements)

    @staticmethod
    def _result_insert(
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
        artifacts: list[dict[str, Any]] | None = None,
    ) -> tuple[str, tuple[Any, ...]]:
        return (
            "INSERT INTO tool_results(call_id, run_id, status, output_json, error_json, policy_decision_json,"
            " decision, rule_id, approved_by, started_at, ended_at, duration_ms, input_hash, output_hash, workspace,"
            " artifacts_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                canonical_json(artifacts) if artifacts else None,
            ),
        )

    def _write_all(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Run ``statements`` in one transaction."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    for sql, params in statements:
                        self._conn.execute(sql, params)
                    self._conn.execute("COMMIT")
                except BaseException:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.IntegrityError:
                raise  # a caller's bug (unknown run, duplicate call id), not a storage failure
            except sqlite3.Error as exc:
                raise describe_sqlite_error(self.path, exc, "write to") from None

    def next_step(self, run_id: str) -> int:
        rows = self._rows("SELECT COALESCE(MAX(step_index), -1) + 1 AS n FROM tool_calls WHERE run_id = ?", (run_id,))
        return int(rows[0]["n"])

    # -- reading -----------------------------------------------------------------------
    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            try:
                return [dict(r) for r in self._conn.execute(sql, params).fetchall()]
            except sqlite3.Error as exc:
                raise describe_sqlite_error(self.path, exc, "read") from None

    _CALL_SQL = (
        "SELECT c.call_id, c.run_id, c.step_index, c.tool_name, c.args_json, c.created_at, c.source, c.tier,"
        " r.status, r.output_json, r.error_json, r.policy_decision_json, r.decision, r.rule_id, r.approved_by,"
        " r.started_at, r.ended_at, r.duration_ms, r.input_hash, r.output_hash,"
        " r.artifacts_json FROM tool_calls c LEFT JOIN tool_results r ON r.call_id = c.call_id"
    )

    @staticmethod
    def _decode(row: dict[str, Any]) -> dict[str, Any]:
        for key in ("args_json", "output_json", "error_json", "policy_decision_json", "artifacts_json"):
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


def read_decisions(path: Path, call_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What the gateway decided for each of ``call_ids`` (``tool_name``, ``tier``, ``status``,
    ``decision``, ``rule_id``, ``approved_by``, ``reason``), read without writing anything (a live
    Aries may hold the store); a call without a result row has ``status`` None. ``{}`` when the
    store does not exist. Raises :class:`AuditStoreError` when it cannot be read."""
    wanted = sorted(set(call_ids))
    if not wanted or not Path(path).is_file():
        return {}
    db = open_audit_db(Path(path), readonly=True, rows=True)
    found: dict[str, dict[str, Any]] = {}
    try:
        for start in range(0, len(wanted), 500):
            batch = wanted[start : start + 500]
            rows = db.execute(
                "SELECT c.call_id, c.tool_name, c.tier, r.status, r.decision, r.rule_id, r.approved_by,"
                " r.policy_decision_json FROM tool_calls c LEFT JOIN tool_results r ON r.call_id = c.call_id"
                f" WHERE c.call_id IN ({','.join('?' * len(batch))})",
                batch,
            ).fetchall()
            for row in rows:
                data = dict(row)
                decision = json.loads(data.pop("policy_decision_json") or "null") or {}
                data["reason"] = decision.get("reason") if isinstance(decision, dict) else None
                found[str(data["call_id"])] = data
    except (sqlite3.Error, ValueError) as exc:
        if isinstance(exc, sqlite3.Error):
            raise describe_sqlite_error(Path(path), exc, "read") from None
        raise AuditStoreError(f"cannot read the audit database {path}: {exc}", path=str(path)) from None
    finally:
        db.close()
    return found


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
