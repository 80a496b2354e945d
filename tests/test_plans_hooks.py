"""A plan run under a policy with hooks (issue 31 item 5): each hook run is an audit row of its own in
the plan's run, yet never a step of the plan — the report and a replay see the plan's steps only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from services.audit.log import AuditStore
from services.workspace.manager import WorkspaceManager
from tests.trust.hostile import aries

PLAN = """version: "1.0"
name: hooked
steps:
  - tool: fs.read
    args: {path: "notes.txt"}
  - tool: fs.read
    args: {path: "notes.txt"}
"""


def test_hook_rows_are_not_plan_steps(tmp_path: Path) -> None:
    home = tmp_path / "home"
    workspace, _ = WorkspaceManager(home / "workspaces").create("demo")
    (workspace.root / "notes.txt").write_text("first\n")
    hook = [sys.executable, "-c", "import sys; sys.stdin.read(); print('seen')"]
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\nproviders: {builtin: {enabled: true}}\ntool_classes: {fs: enabled}\n"
        'filesystem: {allowed_roots: ["${workspace}"]}\n'
        f"hooks:\n  before: [{{id: pre, command: {json.dumps(hook)}, tools: ['*']}}]\n"
        f"  after: [{{id: post, command: {json.dumps(hook)}, tools: ['*'], add_to_context: true}}]\n"
    )
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    ran = aries("-w", "demo", "run", str(plan), "--policy", str(policy), "--json", home=home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    with AuditStore.for_workspace(workspace.root) as audit:
        rows = [row["tool_name"] for row in audit.calls(run_id)]
    assert rows.count("hook:before:pre") == 2 and rows.count("hook:after:post") == 2 and len(rows) == 6
    report = json.loads(aries("-w", "demo", "report", run_id, "--json", home=home).stdout)
    assert [step["tool"] for step in report["steps"]] == ["builtin:fs:read_text"] * 2
    again = aries("-w", "demo", "replay", run_id, "--json", home=home)
    assert again.returncode == 0 and json.loads(again.stdout)["divergences"] == [], again.stdout + again.stderr
