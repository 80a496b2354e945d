"""The SQLite audit store: WAL, the capsule tables plus decisions, every call recorded, queries,
a neighbour's table left alone, and the doctor."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from services.audit.log import AuditStore, explain
from services.hashing import content_hash
from services.tools.calls import ApprovalDecision
from services.tools.doctor import doctor
from services.tools.gateway import ToolGateway
from tests.tools.conftest import Sandbox, make_policy

pytestmark = pytest.mark.timeout(30)


def test_store_layout(sandbox: Sandbox, gateway: ToolGateway) -> None:
    path = sandbox.workspace.root / "audit.db"
    assert path.exists()
    assert gateway.audit.journal_mode() == "wal"
    assert {"runs", "tool_calls", "tool_results", "audit_meta"} <= set(gateway.audit.table_names())
    columns = {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(tool_results)")}
    assert {
        "call_id",
        "run_id",
        "status",
        "output_json",
        "error_json",
        "policy_decision_json",
        "decision",
        "rule_id",
        "approved_by",
        "started_at",
        "ended_at",
        "input_hash",
        "output_hash",
    } <= columns
    run = gateway.audit.runs()[-1]
    assert run["run_id"] == gateway.run_id and run["policy_hash"] == gateway.policy.hash
    assert run["status"] == "running" and run["approval_mode"] == "guide"


def test_every_call_is_recorded(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    answers = iter([ApprovalDecision.once(), ApprovalDecision.deny("no")])
    gateway = gateway_factory(approver=lambda request: next(answers))
    gateway.execute_sync("builtin:fs:list_dir", {"path": "."})  # allowed by mode
    gateway.execute_sync("builtin:fs:write_text", {"path": "a.txt", "text": "x"})  # approved once
    gateway.execute_sync("builtin:fs:write_text", {"path": "b.txt", "text": "x"})  # operator denied
    gateway.execute_sync("builtin:fs:read_text", {"path": "../outside/secret.txt"})  # policy denied
    gateway.execute_sync("builtin:fs:read_text", {"path": "missing.txt"})  # failed
    calls = gateway.audit.calls()
    assert [(c["tool_name"], c["status"], c["decision"], c["rule_id"], c["approved_by"]) for c in calls] == [
        ("builtin:fs:list_dir", "success", "allow", "mode.guide.read_only", "mode"),
        ("builtin:fs:write_text", "success", "confirm", "mode.guide.requires_approval", "operator_once"),
        ("builtin:fs:write_text", "denied", "deny", "approval.operator_denied", None),
        ("builtin:fs:read_text", "denied", "deny", "fs.traversal", None),
        ("builtin:fs:read_text", "error", "allow", "mode.guide.read_only", "mode"),
    ]
    assert [c["step_index"] for c in calls] == [0, 1, 2, 3, 4]
    first = calls[0]
    assert first["args"] == {"path": "."} and first["output"]["entries"]
    assert first["input_hash"] == content_hash({"tool": "builtin:fs:list_dir", "args": {"path": "."}})
    assert first["output_hash"] == content_hash(first["output"])
    assert calls[2]["policy_decision"]["facts"]["policy_rule"] == "mode.guide.requires_approval"
    assert calls[4]["error"]["type"] == "NotFound"
    assert gateway.audit.counts() == {"success": 2, "denied": 2, "error": 1}


def test_last_decision_explains(gateway: ToolGateway) -> None:
    assert explain(None) == "No tool call has been recorded yet."
    gateway.execute_sync("builtin:fs:read_text", {"path": "/etc/passwd"})
    last = gateway.last_decision()
    assert last is not None and last["rule_id"] == "fs.allowed_roots" and last["status"] == "denied"
    text = explain(last)
    assert text.startswith("builtin:fs:read_text (READ_ONLY): deny by rule fs.allowed_roots; result denied.")
    assert "outside the allowed roots" in text


def test_neighbour_tables_are_left_alone(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    path = sandbox.workspace.root / "audit.db"
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE IF NOT EXISTS retrievals (id INTEGER PRIMARY KEY, query TEXT)")
    other.execute("INSERT INTO retrievals(query) VALUES ('what is aries')")
    other.commit()
    gateway = gateway_factory()
    gateway.execute_sync("builtin:fs:list_dir", {})
    gateway.close()
    reopened = AuditStore(path)  # idempotent: the tables exist already
    reopened.close()
    assert other.execute("SELECT query FROM retrievals").fetchall() == [("what is aries",)]
    assert other.execute("SELECT status FROM runs").fetchall() == [("completed",)]
    other.close()


def test_interrupted_calls_show_without_a_result(sandbox: Sandbox) -> None:
    with AuditStore.for_workspace(sandbox.workspace.root) as store:
        store.start_run("r-1", mode="plan", plan_hash="sha256:plan")
        store.record_call(
            call_id="c-1",
            run_id="r-1",
            step_index=0,
            tool_name="builtin:shell:run",
            args={"argv": ["sleep", "9"]},
            created_at="2026-01-01T00:00:00.000Z",
            source="plan",
            tier="EXEC_USERSPACE",
        )
        call = store.get_call("c-1")
        assert call is not None and call["status"] is None and call["args"] == {"argv": ["sleep", "9"]}
        assert store.last_decision() is None
        assert store.next_step("r-1") == 1
        with pytest.raises(sqlite3.IntegrityError):  # a call belongs to a known run
            store.record_call(
                call_id="c-2",
                run_id="r-unknown",
                step_index=0,
                tool_name="x",
                args={},
                created_at="now",
                source=None,
                tier=None,
            )


def test_plan_runs_pass_their_own_run_and_step(gateway: ToolGateway) -> None:
    gateway.execute_sync("builtin:fs:list_dir", {}, run_id="plan-run-1", step_index=3, source="plan")
    calls = gateway.audit.calls(run_id="plan-run-1")
    assert len(calls) == 1 and calls[0]["step_index"] == 3 and calls[0]["source"] == "plan"
    assert any(r["run_id"] == "plan-run-1" and r["mode"] == "plan" for r in gateway.audit.runs())


def test_doctor_passes(sandbox: Sandbox) -> None:
    report = doctor()
    assert report.ok, report.to_dict()
    names = [c.name for c in report.checks]
    assert names == ["tools registered", "policy in force", "gateway end to end", "shell sandbox"]
    assert doctor(make_policy(sandbox.root)).ok
