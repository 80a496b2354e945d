"""``aries run PLAN``, ``aries runs``, ``aries report RUN_ID`` and ``aries replay RUN_ID`` (services.plans).

Plans run in a workspace (``-w``; a plan run in an ephemeral workspace could not be reported or
replayed later, so ``-w`` is required). Exit codes: 0 every step succeeded (``replay``: no
divergence), 1 a step failed or was refused (``replay``: divergences), 2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from app.cli._common import POLICY_HELP, open_session, out, print_json, print_table

PLAN_HELP = """\
A plan is YAML: version "1.0" and a list of steps, each {tool, args}. Tools are capsule names
(fs.read, fs.write, fs.list, fs.search, shell.run, http.get, web.fetch, web.search) or Aries ids
(builtin:fs:read_text …). Every step goes through the workspace's gateway: its policy (or --policy,
an Aries policy or a capsule policy with boundary: deny_by_default), the audit store and the
transcript. A step that needs approval is refused unless --approve names its tool.
Exit codes: 0 all steps ok; 1 a step failed or was refused; 2 bad input.
"""


def register(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run a plan step by step through the gateway",
        description=PLAN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("plan", type=Path)
    run.add_argument("--policy", type=Path, metavar="FILE", help=POLICY_HELP)
    run.add_argument("--approve", action="append", default=[], metavar="TOOL", help="approve this tool's calls")
    run.add_argument("--json", action="store_true", help="print the run as JSON")
    run.set_defaults(func=cmd_run)

    runs = sub.add_parser("runs", help="list the plan runs of a workspace")
    runs.add_argument("--json", action="store_true")
    runs.set_defaults(func=cmd_runs)

    report = sub.add_parser("report", help="the timeline of one plan run")
    report.add_argument("run_id")
    report.add_argument("--json", action="store_true")
    report.set_defaults(func=cmd_report)

    replay = sub.add_parser(
        "replay",
        help="run a stored plan again under its recorded policy and report every divergence",
        description="Re-executes the plan of RUN_ID under the policy it ran with and compares each step's output "
        "(process ids, durations and fetch times left out) with the recorded one. --dry checks the stored record "
        "(plan, policy and output hashes) without running anything. Exit 0 only with zero divergences.",
    )
    replay.add_argument("run_id")
    replay.add_argument("--dry", action="store_true", help="verify the stored record; execute nothing")
    replay.add_argument("--json", action="store_true")
    replay.set_defaults(func=cmd_replay)


NEED_WORKSPACE = "plan runs live in a workspace: pass -w NAME"


def _mode(policy: Path | None) -> str | None:
    """A policy given for the run brings its own approval mode (a capsule policy's is ``commander``:
    what it lists runs without asking); else the workspace's mode applies."""
    from services.policy import load_policy

    return load_policy(policy).mode if policy is not None else None


def _print_outcome(outcome: Any, title: str) -> None:
    columns = ("step", "tool", "status", "decision (rule)", "ms", "bytes", "output hash", "error")
    rows = [
        [
            str(step.index),
            step.tool,
            step.status,
            f"{step.decision} ({step.rule})",
            f"{step.duration_ms:.0f}",
            str(step.output_bytes),
            (step.output_hash or "-").removeprefix("sha256:")[:12],
            (step.error or "")[:80],
        ]
        for step in outcome.steps
    ]
    print_table(title, columns, rows)


def cmd_run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from services.errors import InvalidInput
    from services.plans.plan import load_plan
    from services.plans.runner import run_plan
    from services.tools.builtin import default_registry

    if not args.workspace:
        raise InvalidInput(NEED_WORKSPACE)
    known = {spec.tool_id for spec in default_registry().list()}
    named = {step.tool_id for step in load_plan(args.plan).steps} - known
    mode = _mode(args.policy)
    with open_session(args, surface="plan", need=NEED_WORKSPACE, policy_file=args.policy, mode=mode) as session:
        if named:  # MCP tools (mcp:<server>:<tool>): their servers load on demand, as for a call
            registry = session.gateway().registry
            for tool_id in sorted(named):
                registry.load_for(tool_id)
            known |= {spec.tool_id for spec in registry.list()}
        plan = load_plan(args.plan, known_tools=known)
        outcome = asyncio.run(run_plan(session, plan, approve=args.approve))
    if args.json:
        print_json(asdict(outcome))
    else:
        _print_outcome(outcome, f"run {outcome.run_id} of {args.plan}: {outcome.status}")
        out(f"report: aries -w {args.workspace} report {outcome.run_id}")
    return 0 if outcome.status == "completed" else 1


def cmd_runs(args: argparse.Namespace) -> int:
    from services.plans.runner import list_runs

    with open_session(args, surface="plan", need=NEED_WORKSPACE) as session:
        rows = list_runs(session.workspace)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        out("no plan runs yet; start one with: aries -w NAME run PLAN.yaml")
        return 0
    for row in rows:
        replay = f" (replay of {row['replay_of']})" if row.get("replay_of") else ""
        line = (
            f"{row['run_id']}  {row['created_at'][:19]}  {row['mode']:<6} {row['status']:<9} "
            f"{row['steps']} steps  {row['plan_source']}{replay}"
        )
        out(line, single_line=True)
    return 0


def _timeline(workspace: Any, run_id: str) -> dict[str, Any]:
    from services.plans.runner import stored_run

    stored = stored_run(workspace, run_id)
    steps = []
    for call in stored["steps"]:
        output = call.get("output")
        error = call.get("error") or {}
        steps.append(
            {
                "step": call.get("step_index"),
                "tool": call.get("tool_name"),
                "status": call.get("status"),
                "decision": call.get("decision"),
                "rule": call.get("rule_id"),
                "approved_by": call.get("approved_by"),
                "started_at": call.get("started_at"),
                "duration_ms": call.get("duration_ms"),
                "input_hash": call.get("input_hash"),
                "output_hash": call.get("output_hash"),  # the one definition (services.plans.runner.output_hash)
                "stored_sha256": call.get("stored_sha256"),  # the audit row's hash of the complete output
                "output_bytes": len(str(output)) if output is not None else 0,
                "error": error.get("message") if isinstance(error, dict) else None,
            }
        )
    run = stored["run"]
    return {
        "run_id": run_id,
        "mode": run["mode"],
        "status": run["status"],
        "created_at": run["created_at"],
        "ended_at": run["ended_at"],
        "plan": stored["plan"]["plan_source"],
        "plan_hash": run["plan_hash"],
        "policy": stored["plan"]["policy_source"],
        "policy_hash": run["policy_hash"],
        "replay_of": stored["plan"]["replay_of"],
        "steps": steps,
    }


def cmd_report(args: argparse.Namespace) -> int:
    with open_session(args, surface="plan", need=NEED_WORKSPACE) as session:
        data = _timeline(session.workspace, args.run_id)
    if args.json:
        print_json(data)
        return 0
    title = (
        f"run {data['run_id']} · {data['mode']} · {data['status']} · plan {data['plan']} "
        f"({data['plan_hash'][:19]}) · policy {data['policy']} ({str(data['policy_hash'])[:19]})"
    )
    columns = ("step", "time", "tool", "decision (rule)", "ms", "bytes", "output hash", "error")
    rows = [
        [
            str(step["step"]),
            str(step["started_at"] or "")[11:23],
            str(step["tool"]),
            f"{step['decision']} ({step['rule']})",
            f"{step['duration_ms'] or 0:.0f}",
            str(step["output_bytes"]),
            str(step["output_hash"] or "-").removeprefix("sha256:")[:12],
            str(step["error"] or ""),
        ]
        for step in data["steps"]
    ]
    print_table(title, columns, rows)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from services.plans.runner import replay, verify_stored
    from services.session.opening import Surface
    from services.session.session import Session

    with open_session(args, surface="plan", need=NEED_WORKSPACE) as session:
        workspace = session.workspace

        def under(policy: Path | None) -> Session:  # the replay's own session, under the recorded policy
            return Session.open(workspace, surface=Surface.PLAN, policy_file=policy, mode=_mode(policy))

        if args.dry:
            problems = verify_stored(workspace, args.run_id)
            if args.json:
                print_json({"run_id": args.run_id, "dry": True, "problems": problems})
            else:
                for problem in problems:
                    out(f"problem: {problem}")
                out(f"stored record of {args.run_id}: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
            return 0 if not problems else 1
        outcome, divergences = asyncio.run(replay(under, workspace, args.run_id))
    if args.json:
        print_json(
            {
                "run_id": outcome.run_id,
                "replay_of": args.run_id,
                "steps": [asdict(step) for step in outcome.steps],
                "divergences": [asdict(d) for d in divergences],
            }
        )
    else:
        _print_outcome(outcome, f"replay {outcome.run_id} of {args.run_id}: {outcome.status}")
        for item in divergences:
            out(f"divergence at step {item.step} ({item.tool}): expected {item.expected}, got {item.actual}")
            if item.diff:
                out(item.diff)
        summary = "no divergence" if not divergences else f"{len(divergences)} divergence(s)"
        out(f"replay {outcome.run_id} of {args.run_id}: {summary}")
    return 0 if not divergences else 1
