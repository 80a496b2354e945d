"""Plan runs through the one gateway, capsule policies, reports and replay — real CLI subprocesses,
real shell processes, a loopback web page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.errors import ConfigError
from services.plans.plan import parse_plan
from services.policy import BoundPolicy, parse_policy
from services.workspace.manager import WorkspaceManager

REPO = Path(__file__).resolve().parents[1]


def aries(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ARIES_HOME": str(home), "COLUMNS": "200"},
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_plan_errors_name_file_line_and_field() -> None:
    cases = {
        "version: '2.0'\nsteps: [{tool: fs.read}]\n": ("<p>:1", "version: 2.0"),
        "version: '1.0'\nsteps:\n  - tool: fs.read\n  - tool: rm.everything\n": (
            "<p>:4",
            "unknown tool 'rm.everything'",
        ),
        "version: '1.0'\nsteps:\n  - tool: fs.read\n    args: [1, 2]\n": ("<p>:4", "steps[0].args: a mapping"),
        "version: '1.0'\nsteps: []\n": ("<p>:2", "non-empty list"),
        "version: '1.0'\nstepz: []\n": ("<p>:2", "stepz: unknown field"),
    }
    known = {"builtin:fs:read_text"}
    for text, (where, what) in cases.items():
        with pytest.raises(ConfigError) as caught:
            parse_plan(text, source="<p>", known_tools=known)
        assert caught.value.message.startswith(where) and what in caught.value.message, caught.value.message


def test_capsule_policy_errors_name_file_line_and_field() -> None:
    cases = {
        "boundary: allow_all\ntools: {}\n": ("<c>:1", "only 'deny_by_default'"),
        "boundary: deny_by_default\ntools:\n  fs.read:\n    allow_pathz: [x]\n": ("<c>:4", "allow_pathz: unknown rule"),
        "boundary: deny_by_default\ntools:\n  fs.nuke: {}\n": ("<c>:3", "fs.nuke: unknown tool"),
        "boundary: deny_by_default\ntools:\n  shell.run:\n    allow_executables: echo\n": ("<c>:4", "list of strings"),
    }
    for text, (where, what) in cases.items():
        with pytest.raises(ConfigError) as caught:
            parse_policy(text, source="<c>")
        assert caught.value.message.startswith(where) and what in caught.value.message, caught.value.message


def test_a_capsule_policy_denies_by_default_and_allows_what_it_lists(tmp_path: Path) -> None:
    policy = parse_policy("boundary: deny_by_default\ntools:\n  fs.read: {allow_paths: ['./docs/**']}\n", source="<c>")
    bound = BoundPolicy(policy, tmp_path)
    assert policy.mode == "commander" and bound.mode == "commander"
    assert policy.tool_switch("builtin:fs:read_text") is True
    assert policy.tool_switch("builtin:fs:write_text") is False
    assert policy.tool_switch("builtin:shell:run") is False
    assert policy.data["tools"]["builtin:fs:read_text"] == {"enabled": True}
    assert policy.data["filesystem"]["allowed_roots"] == ["${workspace}/docs"]


@pytest.fixture
def page(loopback: Callable[..., Any]) -> str:
    from aiohttp import web

    async def hello(request: Any) -> Any:
        return web.Response(text="<html><body><p>a stable page</p></body></html>", content_type="text/html")

    return str(loopback({"GET /page": hello}).url) + "/page"


def _plan_and_policy(tmp_path: Path, url: str) -> tuple[Path, Path]:
    from urllib.parse import urlsplit

    port = urlsplit(url).port
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "version: '1.0'\nsteps:\n"
        "  - tool: fs.read\n    args: {path: notes.txt}\n"
        "  - tool: shell.run\n    args: {cmd: [echo, steady]}\n"
        f"  - tool: http.get\n    args: {{url: '{url}'}}\n"
    )
    policy = tmp_path / "capsule.yaml"
    policy.write_text(
        "boundary: deny_by_default\ntools:\n"
        "  fs.read: {allow_paths: ['./**']}\n"
        "  shell.run: {allow_executables: [echo]}\n"
        f"  http.get: {{allow_domains: ['127.0.0.1:{port}']}}\n"
    )
    return plan, policy


def test_run_report_replay_then_exactly_one_divergence_after_an_edit(
    tmp_path: Path, aries_home: Path, page: str
) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    (workspace.root / "notes.txt").write_text("first\n")
    plan, policy = _plan_and_policy(tmp_path, page)
    ran = aries("-w", "demo", "run", str(plan), "--policy", str(policy), "--json", home=aries_home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    outcome = json.loads(ran.stdout)
    assert [s["status"] for s in outcome["steps"]] == ["success"] * 3
    assert [s["rule"] for s in outcome["steps"]][1:] == ["shell.executables.capsule", "auto_approve.capsule-http-get"]
    run_id = outcome["run_id"]

    report = json.loads(aries("-w", "demo", "report", run_id, "--json", home=aries_home).stdout)
    assert report["plan_hash"] == outcome["plan_hash"] and report["policy_hash"] == outcome["policy_hash"]
    assert [s["tool"] for s in report["steps"]] == ["builtin:fs:read_text", "builtin:shell:run", "builtin:web:fetch"]
    assert all(s["input_hash"] and s["output_hash"] and s["decision"] == "allow" for s in report["steps"])
    shown = aries("-w", "demo", "report", run_id, home=aries_home)
    assert shown.returncode == 0 and "builtin:web:fetch" in shown.stdout

    dry = aries("-w", "demo", "replay", run_id, "--dry", home=aries_home)
    assert dry.returncode == 0 and "ok" in dry.stdout, dry.stdout + dry.stderr
    same = aries("-w", "demo", "replay", run_id, "--json", home=aries_home)
    assert same.returncode == 0, same.stdout + same.stderr
    assert json.loads(same.stdout)["divergences"] == []
    # One output hash (issue 24): run, report and replay show the same value for the same step, and
    # the text tables the same prefix of it.
    hashes = [s["output_hash"] for s in outcome["steps"]]
    assert all(h and h.startswith("sha256:") for h in hashes)
    assert [s["output_hash"] for s in report["steps"]] == hashes
    assert [s["output_hash"] for s in json.loads(same.stdout)["steps"]] == hashes
    ran_text = aries("-w", "demo", "run", str(plan), "--policy", str(policy), home=aries_home).stdout
    replay_text = aries("-w", "demo", "replay", run_id, home=aries_home).stdout
    for text in (ran_text, shown.stdout, replay_text):
        for value in hashes:
            assert value.removeprefix("sha256:")[:12] in text, text

    (workspace.root / "notes.txt").write_text("second\n")
    changed = aries("-w", "demo", "replay", run_id, "--json", home=aries_home)
    assert changed.returncode == 1
    divergences = json.loads(changed.stdout)["divergences"]
    assert [(d["step"], d["tool"]) for d in divergences] == [(0, "builtin:fs:read_text")]
    assert "-first" in divergences[0]["diff"] and "+second" in divergences[0]["diff"]
    assert divergences[0]["expected"] != divergences[0]["actual"]

    runs = json.loads(aries("-w", "demo", "runs", "--json", home=aries_home).stdout)
    assert [r["mode"] for r in runs] == ["replay", "replay", "plan", "replay", "plan"]
    assert {r["replay_of"] for r in runs if r["mode"] == "replay"} == {run_id}


def test_steps_needing_approval_are_refused_unless_approve_names_them(tmp_path: Path, aries_home: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    plan = tmp_path / "plan.yaml"
    plan.write_text("version: '1.0'\nsteps:\n  - tool: shell.run\n    args: {cmd: [echo, hi]}\n")
    refused = aries("-w", "demo", "run", str(plan), "--json", home=aries_home)  # the workspace's guide policy
    assert refused.returncode == 1
    step = json.loads(refused.stdout)["steps"][0]
    assert step["status"] == "denied" and "--approve" in step["error"]
    approved = aries("-w", "demo", "run", str(plan), "--approve", "shell.run", "--json", home=aries_home)
    assert approved.returncode == 0, approved.stdout
    assert json.loads(approved.stdout)["steps"][0]["status"] == "success"
    # deny by default: a capsule policy that does not list fs.write refuses it, --approve or not
    policy = tmp_path / "capsule.yaml"
    policy.write_text("boundary: deny_by_default\ntools:\n  fs.read: {}\n")
    write = tmp_path / "write.yaml"
    write.write_text("version: '1.0'\nsteps:\n  - tool: fs.write\n    args: {path: x.txt, content: hi}\n")
    denied = aries(
        "-w", "demo", "run", str(write), "--policy", str(policy), "--approve", "fs.write", "--json", home=aries_home
    )
    assert denied.returncode == 1
    assert json.loads(denied.stdout)["steps"][0]["status"] == "denied"
    assert not (workspace.root / "x.txt").exists()


def test_bad_input_is_one_line_with_exit_2(tmp_path: Path, aries_home: Path) -> None:
    WorkspaceManager().create("demo")
    plan = tmp_path / "bad.yaml"
    plan.write_text("version: '1.0'\nsteps:\n  - tool: nope\n")
    result = aries("-w", "demo", "run", str(plan), home=aries_home)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "bad.yaml:3" in result.stderr
    missing = aries("-w", "demo", "report", "run-nope", home=aries_home)
    assert missing.returncode == 1 and "no plan run" in missing.stderr
    no_ws = aries("run", str(plan), home=aries_home)
    assert no_ws.returncode == 2 and "-w NAME" in no_ws.stderr


def test_the_shipped_sample_plan_runs_under_the_shipped_capsule_policy(aries_home: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    (workspace.root / "notes.txt").write_text("hello\n")
    examples = REPO / "docs" / "examples"
    ran = aries(
        "-w", "demo", "run", str(examples / "plan.yaml"), "--policy", str(examples / "capsule-policy.yaml"), "--json",
        home=aries_home,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    replayed = aries("-w", "demo", "replay", json.loads(ran.stdout)["run_id"], home=aries_home)
    assert replayed.returncode == 0 and "no divergence" in replayed.stdout
