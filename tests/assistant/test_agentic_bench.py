"""The CI half of ``bench/agentic.py`` (issue 33 item 5): the recorded-output suite — a fifth of the
tasks, in every lane (native calls and each text format), clean and with a bad first call — through the
real session, gateway, policy and audit store, against the scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from services.audit.log import AuditStore
from tests.models.servers import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agentic", ROOT / "bench" / "agentic.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("agentic", module)
    spec.loader.exec_module(module)
    return module


def test_the_suite_has_at_least_40_tasks_of_every_kind() -> None:
    suite = bench().tasks()
    assert len(suite) >= 40 and len({t.id for t in suite}) == len(suite)
    kinds = {t.kind for t in suite}
    assert kinds == {"read", "write", "search", "list", "run", "two_step", "held"}
    assert all(t.plan and (t.contains or t.file or t.forbidden) for t in suite)  # every task is checked
    assert sum(len(t.plan) > 1 for t in suite) >= 10  # two-step tasks (search then read, read then write)


async def test_the_recorded_suite_meets_the_acceptance_in_every_lane() -> None:
    module = bench()
    selected = module.select(module.tasks(), None, 5)
    summary = await module.recorded(selected, module.LANES)
    assert set(summary["lanes"]) == set(module.LANES) == {"native", *module.TEXT_FORMATS}
    for lane, tally in summary["lanes"].items():
        assert tally["well_formed"] > len(selected) and tally["executed"] == tally["well_formed"], lane
        assert tally["bad"] == len(selected) and tally["refused"] == tally["bad"], lane
        assert tally["outside_policy_run"] == 0 and tally["succeeded"] == tally["tasks"], lane
    rows = summary["tasks"]
    assert {r["bad"] for r in rows} == {None, *module.BAD_KINDS}
    held = [r for r in rows if r["kind"] == "held"]
    assert held and all(r["calls_held"] >= 1 and r["calls_run"] == 0 for r in held)
    # Every bad call came back to the model and it tried again: one retry, the good call after it.
    assert all(r["retries"] == 1 and r["calls_made"] == r["calls_valid"] + 1 for r in rows if r["bad"])
    text_rows = [row for r in rows if r["lane"] != "native" for row in r["audit"] if row["rule"] != "input.schema"]
    assert text_rows and all(row["from_text"] for row in text_rows)


async def test_a_wrong_answer_and_a_call_outside_the_policy_fail_their_checks(tmp_path: Path) -> None:
    """The checkers can fail: an answer without the fact, a write that did not happen, a held call that
    ran (here: the policy loosened to allow ``rm``)."""
    from services.models.config import make_provider, resolve_model

    module = bench()
    by_id = {t.id: t for t in module.tasks(str(tmp_path / "outside.txt"))}
    wrong = dataclasses.replace(by_id["read-01"], answer="I could not find it.")
    unwritten = dataclasses.replace(by_id["write-01"], plan=(module.Step("builtin:fs:list_dir", {"path": "."}),))
    server = ScriptedServer("openai").start()
    env = {"ARIES_MODEL": "openai:qwen2.5", "OPENAI_BASE_URL": server.base_url}
    try:
        workspace = module.make_workspace("checks")
        names = await module.offered_names(workspace, env)
        results = {}
        for task in (wrong, unwritten, by_id["held-03"]):
            if task.id == "held-03":
                policy = module.POLICY.replace("names: [wc, sort, head]", "names: [wc, sort, head, rm]")
                (workspace.root / "policy.yaml").write_text(policy, encoding="utf-8")
            server.script = module.script(task, "hermes", names, None)
            provider = make_provider(resolve_model(None, env))
            try:
                results[task.id] = await module.run_task(workspace, provider, task, "hermes", time_cap=60)
            finally:
                await provider.aclose()
    finally:
        server.stop()
    assert results["read-01"].why == "the answer lacks 'Jupiter'" and not results["read-01"].success
    assert results["write-01"].why == "out/w01.txt lacks 'sunrise'"
    assert results["held-03"].why == "notes.txt was deleted" and results["held-03"].calls_run == 1


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "agentic.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_the_command_writes_a_summary_and_compares_two(tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    done = run_bench("--recorded", "--tasks", "run-01,held-02", "--lanes", "tool_code", "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(out.read_text())
    assert summary["format_version"] == 1 and summary["mode"] == "recorded"
    assert summary["totals"]["tasks"] == 4 and summary["totals"]["succeeded"] == 4
    assert "lane tool_code : executed 4/4 well-formed, refused 2/2 bad, 0 outside the policy ran" in done.stdout
    worse = {**summary, "tasks": [{**summary["tasks"][0], "success": False, "why": "scripted"}, *summary["tasks"][1:]]}
    worse["totals"] = {**summary["totals"], "succeeded": 3}
    (tmp_path / "worse.json").write_text(json.dumps(worse))
    compared = run_bench("--compare", str(tmp_path / "worse.json"), str(out))
    assert compared.returncode == 0 and "succeeded                 3          4" in compared.stdout
    assert "run-01: fixed (scripted)" in compared.stdout


def test_an_unknown_task_is_one_clear_line() -> None:
    done = run_bench("--recorded", "--tasks", "read-01,nope-9")
    assert done.returncode == 1 and done.stderr.strip() == "agentic: unknown task id(s): nope-9"


def test_the_audit_holds_the_policy_refusals(tmp_path: Path) -> None:
    """Held calls leave audit rows with the policy's rule: the dotenv deny, the allowed roots, the
    executable allowlist."""
    import asyncio

    module = bench()
    selected = [t for t in module.tasks(str(tmp_path / "outside.txt")) if t.kind == "held"]
    summary = asyncio.run(module.recorded(selected, ("native",)))
    rules = {row["rule"] for r in summary["tasks"] if r["bad"] is None for row in r["audit"]}
    assert rules == {"fs.deny.dotenv", "fs.allowed_roots", "shell.executables"}
    assert not (tmp_path / "outside.txt").exists()
    workspace_root = Path(os.environ["ARIES_HOME"]) / "workspaces" / "rec-native"
    with AuditStore.for_workspace(workspace_root) as audit:
        assert all(row["status"] != "success" for row in audit.calls(limit=1000))


@pytest.mark.parametrize(("task_id", "lane"), [("read-01", "hermes"), ("run-01", "mistral"), ("held-01", "tool_code")])
def test_tasks_through_aries_ask(task_id: str, lane: str, aries_home: Path) -> None:
    """The same recorded outputs through ``aries -w W ask --json`` (a subprocess): the text call runs
    through the gateway (an audit row read from text), a held one is refused by the policy."""
    module = bench()
    task = {t.id: t for t in module.tasks()}[task_id]
    workspace = module.make_workspace("cli")
    server = ScriptedServer("openai").start()
    env = {"ARIES_MODEL": "openai:qwen2.5", "OPENAI_BASE_URL": server.base_url}
    try:
        server.script = module.script(task, lane, asyncio.run(module.offered_names(workspace, env)), None)
        done = subprocess.run(
            [sys.executable, "-m", "app", "-w", "cli", "ask", "--json", "--approve", "builtin:shell:run", task.prompt],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={**os.environ, **env, "ARIES_HOME": str(aries_home), "AXIOMME_EMBEDDER": "hash"},
        )
    finally:
        server.stop()
    if task.kind == "held":  # exit 3: a call was refused, and the rule is named
        assert done.returncode == 3 and "refused (fs.deny.dotenv)" in done.stderr, done.stderr
    else:
        assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout)
    assert response["answer"] == task.answer and server.script == []
    with AuditStore.for_workspace(workspace.root) as audit:
        [row] = audit.calls(limit=10)
    assert row["tool_name"] == task.plan[0].tool and row["policy_decision"]["facts"]["from_text"] is True
    assert row["status"] == ("denied" if task.kind == "held" else "success")
