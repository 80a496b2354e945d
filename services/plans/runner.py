"""Plan runs, reports and replay — every step through the one gateway of a :class:`Session`.

A run is an audit ``runs`` row (``mode`` ``plan`` or ``replay``, ``plan_hash``, ``policy_hash``)
whose ``tool_calls``/``tool_results`` rows are its steps (``step_index``, ``input_hash``,
``output_hash``). The plan's text and the policy's text are kept beside it (``plan_runs``) so that
a replay runs exactly what ran, under exactly that policy.

A step's *output hash* has one definition, :func:`output_hash`: the hash of its output without the
fields that differ on every run by design (``VOLATILE``: process ids, durations, fetch times). ``aries
run``, ``aries report``, ``/runs`` and replay all show and compare that one value; the gateway's hash
of the complete output (the audit row's integrity hash, checked by ``replay --dry``) is
``stored_sha256`` in a stored step. A divergence names the step, the tool, both output hashes and,
for text, a unified diff.
"""

from __future__ import annotations

import difflib
import json
import sqlite3
import tempfile
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.audit.db import AUDIT_FILE, PLAN_RUNS_SCHEMA, open_audit_db
from services.clock import utc_now
from services.errors import AriesError, ConfigError, NotFound
from services.hashing import content_hash
from services.plans.plan import Plan, parse_plan
from services.workspace.paths import POLICY_FILE

if TYPE_CHECKING:
    from services.session.session import Session
    from services.tools.calls import ApprovalDecision, ApprovalRequest
    from services.workspace.manager import Workspace

VOLATILE = frozenset({"process_id", "cleaned_up", "duration_ms", "elapsed_ms", "fetched_at", "date", "call_id"})


class PlanRunError(AriesError):
    exit_code = 1


def stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: stable(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def output_hash(output: Any) -> str | None:
    """A step's output hash (the one every command shows): its output without ``VOLATILE`` fields."""
    if output is None:
        return None
    return content_hash(stable(json.loads(json.dumps(output, ensure_ascii=False, default=str))))


@dataclass
class StepOutcome:
    index: int
    tool: str
    tool_id: str
    status: str
    decision: str
    rule: str
    duration_ms: float
    output_bytes: int
    output_hash: str | None
    error: str | None = None


@dataclass
class RunOutcome:
    run_id: str
    status: str
    plan_hash: str
    policy_hash: str
    steps: list[StepOutcome] = field(default_factory=list)


class _HeadlessApprover:
    """Approves only the tools named with ``--approve`` (capsule names or Aries ids)."""

    def __init__(self, approve: Iterable[str]) -> None:
        from services.plans.plan import resolve_tool

        self.approved = {resolve_tool(name)[0] for name in approve}

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        from services.tools.calls import ApprovalDecision

        if request.tool_id in self.approved:
            return ApprovalDecision.once()
        return ApprovalDecision.deny(f"approval required; {request.tool_id} was not named with --approve")


def _db(workspace: Workspace) -> sqlite3.Connection:
    """``audit.db`` with the audit tables (``runs`` is joined) and ``plan_runs``."""
    return open_audit_db(
        workspace.root / AUDIT_FILE, tables=[PLAN_RUNS_SCHEMA], migrate_tables=True, rows=True, timeout=30
    )


async def run_plan(
    session: Session,
    plan: Plan,
    *,
    approve: Iterable[str] = (),
    mode: str = "plan",
    replay_of: str | None = None,
) -> RunOutcome:
    """Run every step of ``plan`` through the session's gateway; each one recorded as it ends."""
    approve = list(approve)
    approver = _HeadlessApprover(approve)
    gateway = session.gateway()
    policy = session.policy()
    run_id = f"run-{uuid.uuid4().hex[:12]}"
    gateway.ensure_run(
        run_id,
        mode=mode,
        plan_hash=plan.hash,
        source="plan",
        workspace=session.workspace.name,
        approval_mode=gateway.mode,
    )
    policy_path = session.policy_path
    policy_text = policy_path.read_text(encoding="utf-8") if policy_path is not None else None
    db = _db(session.workspace)
    try:
        with db:
            db.execute(
                "INSERT INTO plan_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, plan.source, plan.text, policy.source, policy_text, json.dumps(approve), replay_of, utc_now()),
            )
    finally:
        db.close()
    outcome = RunOutcome(run_id, "completed", plan.hash, policy.hash)
    for step in plan.steps:
        result = await gateway.execute(
            step.tool_id,
            step.args,
            approver=approver,
            transcript=session.conversation,
            source="plan",
            run_id=run_id,
            step_index=step.index,
        )
        meta = result.meta or {}
        decision = meta.get("decision") or {}
        row = gateway.audit.get_call(str(meta.get("call_id"))) or {}
        error = result.error.message if result.error is not None else None
        outcome.steps.append(
            StepOutcome(
                step.index,
                step.tool,
                step.tool_id,
                str(row.get("status") or result.status),
                str(decision.get("action", "?")),
                str(decision.get("rule", "?")),
                float(meta.get("duration_ms") or 0.0),
                int(meta.get("bytes") or 0),
                output_hash(row.get("output")),
                error,
            )
        )
        if result.status != "ok":
            outcome.status = "failed"
    gateway.audit.end_run(run_id, outcome.status)
    return outcome


def stored_run(workspace: Workspace, run_id: str) -> dict[str, Any]:
    """The run row, its plan and policy text, and its steps with their stored outputs."""
    from services.audit.log import AuditStore

    db = _db(workspace)
    try:
        run = db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        plan = db.execute("SELECT * FROM plan_runs WHERE run_id = ?", (run_id,)).fetchone()
    finally:
        db.close()
    if run is None or plan is None:
        raise NotFound(f"no plan run {run_id!r} in workspace {workspace.name}; `aries runs` lists them")
    with AuditStore.for_workspace(workspace.root) as audit:
        rows = audit.calls(run_id, limit=10_000)
    # A hook's run is an audit row of its own (services.tools.hooks), not a step of the plan.
    calls = sorted((c for c in rows if c.get("source") != "hook"), key=lambda c: c.get("step_index", 0))
    for call in calls:  # the one output hash; the audit row's hash of the complete output checks the record
        call["stored_sha256"] = call.get("output_hash")
        call["output_hash"] = output_hash(call.get("output"))
    return {"run": dict(run), "plan": dict(plan), "steps": calls}


def list_runs(workspace: Workspace, limit: int = 50) -> list[dict[str, Any]]:
    db = _db(workspace)
    try:
        rows = db.execute(
            "SELECT r.run_id, r.created_at, r.ended_at, r.mode, r.status, r.plan_hash, r.policy_hash, p.plan_source,"
            " p.replay_of, (SELECT COUNT(*) FROM tool_calls c WHERE c.run_id = r.run_id) AS steps"
            " FROM runs r JOIN plan_runs p ON p.run_id = r.run_id ORDER BY r.created_at DESC LIMIT ?",
            (limit,),
        ).fetchall()
    finally:
        db.close()
    return [dict(row) for row in rows]


def _output_text(output_json: str | None) -> str:
    if output_json is None:
        return ""
    data = json.loads(output_json)
    if isinstance(data, dict):
        for key in ("text", "stdout", "content", "body"):
            if isinstance(data.get(key), str):
                return str(data[key])
    return json.dumps(stable(data), indent=1, sort_keys=True, ensure_ascii=False)


@dataclass
class Divergence:
    step: int
    tool: str
    expected: str | None
    actual: str | None
    diff: str


def _policy_file(stored: dict[str, Any], directory: Path) -> Path | None:
    text = stored["plan"]["policy_text"]
    if text is None:
        return None
    path = directory / POLICY_FILE
    path.write_text(text, encoding="utf-8")
    return path


def verify_stored(workspace: Workspace, run_id: str) -> list[str]:
    """``replay --dry``: the stored record checks out (plan hash, policy hash, every output hash)."""
    from services.policy import parse_policy

    stored = stored_run(workspace, run_id)
    problems: list[str] = []
    plan = parse_plan(stored["plan"]["plan_text"], source=stored["plan"]["plan_source"])
    if plan.hash != stored["run"]["plan_hash"]:
        problems.append(f"plan hash {plan.hash} differs from the recorded {stored['run']['plan_hash']}")
    text = stored["plan"]["policy_text"]
    if text is not None:
        policy = parse_policy(text, source=stored["plan"]["policy_source"])
        if policy.hash != stored["run"]["policy_hash"]:
            problems.append(f"policy hash {policy.hash} differs from the recorded {stored['run']['policy_hash']}")
    for call in stored["steps"]:
        output = call.get("output")
        expected = call.get("stored_sha256")
        if output is not None and expected is not None:
            actual = content_hash(output)  # the gateway's hash of the canonical JSON of the output
            if actual.removeprefix("sha256:") != str(expected).removeprefix("sha256:"):
                problems.append(f"step {call.get('step_index')}: stored output does not match its hash")
    return problems


async def replay(session_factory: Any, workspace: Workspace, run_id: str) -> tuple[RunOutcome, list[Divergence]]:
    """Run the stored plan again under the stored policy; compare every step's output hash (the
    replayed run's own steps, in the outcome, carry theirs). ``session_factory(policy_file)`` opens
    the replay's own session (``Session.open(workspace, surface=Surface.PLAN, policy_file=…)``).

    A run that came with an imported bundle is replayed only once the operator trusted the workspace:
    its stored plan, policy and approvals are authority (:mod:`services.trust.authority`)."""
    from services.trust.authority import quarantined_runs

    if run_id in quarantined_runs(workspace.root):
        raise ConfigError(
            f"run {run_id} came with an imported bundle: replaying it runs its stored plan under its stored policy "
            f"and approvals; review and trust the workspace first (aries workspace trust {workspace.name})"
        )
    stored = stored_run(workspace, run_id)
    plan = parse_plan(stored["plan"]["plan_text"], source=stored["plan"]["plan_source"])
    approve = json.loads(stored["plan"]["approve_json"])
    with tempfile.TemporaryDirectory(prefix="aries-replay-") as tmp:
        session = session_factory(_policy_file(stored, Path(tmp)))
        try:
            outcome = await run_plan(session, plan, approve=approve, mode="replay", replay_of=run_id)
            new = {c["step_index"]: c for c in stored_run(workspace, outcome.run_id)["steps"]}
        finally:
            await session.aclose("the replay ended")
    divergences: list[Divergence] = []
    for call in stored["steps"]:
        index = call["step_index"]
        expected = call["output_hash"]
        again = new.get(index)
        actual = again["output_hash"] if again else None
        if expected != actual or (again is not None and again.get("status") != call.get("status")):
            old_text, new_text = (
                _output_text(_json(call.get("output"))),
                _output_text(_json(again and again.get("output"))),
            )
            diff = "".join(
                difflib.unified_diff(
                    old_text.splitlines(keepends=True),
                    new_text.splitlines(keepends=True),
                    f"step {index} recorded",
                    f"step {index} replayed",
                )
            )
            divergences.append(Divergence(index, str(call.get("tool_name")), expected, actual, diff))
    return outcome, divergences


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
