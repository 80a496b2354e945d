"""``aries desktop REQUEST``: the plan printed, ``--yes`` runs it through the gateway (real files,
real subprocesses, the real audit store), ``--approve`` for what the policy wants approved; a request
that cannot be planned is one line and exit 2; with a model configured, one turn of the loop."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import desktop as cli_desktop
from services.audit.log import AuditStore
from services.workspace.manager import WorkspaceManager
from tests.tools.conftest import policy_data

pytestmark = pytest.mark.timeout(90)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="aries")
    parser.add_argument("-w", "--workspace")
    cli_desktop.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARIES_MODEL", raising=False)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    return root


@pytest.fixture
def policy_file(tmp_path: Path, root: Path) -> Path:
    data = policy_data(root)
    data["shell"]["executables"].append({"id": "pytest", "names": ["pytest"]})
    path = tmp_path / "policy.yaml"
    path.write_text(json.dumps(data))
    return path


def test_plan_is_shown_and_nothing_runs_without_yes(
    root: Path, policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(
        ["desktop", "create", "notes/todo.md", "with", "buy milk", "--policy", str(policy_file)], capsys
    )
    assert code == 0
    assert out.splitlines() == [
        "Plan for: create notes/todo.md with 'buy milk'",
        "1. builtin:fs:write_text  create notes/todo.md (9 bytes)",
        '   {"create_dirs": true, "if_exists": "error", "path": "notes/todo.md", "text": "buy milk\\n"}',
    ]
    assert "rerun with --yes to run these 1 step(s)" in err
    assert not (root / "notes").exists()


def test_yes_without_approve_is_denied_where_the_policy_asks(
    root: Path, policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["desktop", 'create notes/todo.md with "buy milk"', "--yes", "--policy", str(policy_file)]
    code, out, err = _run(argv, capsys)
    assert code == 3 and "PolicyDenied" in out
    assert "needs approval; rerun with --yes --approve" in err
    assert not (root / "notes" / "todo.md").exists()
    code, out, err = _run([*argv, "--approve"], capsys)
    assert code == 0, err
    assert (root / "notes" / "todo.md").read_text() == "buy milk\n"
    assert "── 1. builtin:fs:write_text" in out and "Done: 1 step(s) ran." in out


def test_list_and_read_need_no_approval(root: Path, policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["desktop", "list", "--yes", "--json", "--policy", str(policy_file)], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["ok"] and data["plan"]["steps"][0]["tool_id"] == "builtin:fs:list_dir"
    assert [e["name"] for e in data["steps"][0]["data"]["entries"]] == ["a.txt"]
    assert data["steps"][0]["meta"]["decision"]["action"] == "allow"
    code, out, _ = _run(["desktop", "read", "a.txt", "--yes", "--policy", str(policy_file)], capsys)
    assert code == 0 and "alpha" in out


def test_run_pytest_through_the_shell_tool(root: Path, policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "test_ok.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    argv = ["desktop", "run", "pytest", "-q", "-p", "no:cacheprovider", "--yes", "--approve", "--json"]
    code, out, err = _run([*argv, "--policy", str(policy_file)], capsys)
    assert code == 0, err
    step = json.loads(out)["steps"][0]
    assert step["tool_id"] == "builtin:shell:run" and step["data"]["exit_code"] == 0
    assert "1 passed" in step["data"]["stdout"]


def test_start_and_poll(root: Path, policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["desktop", "start", "python3", "-c", "print('hi')", "and", "poll", "it", "--yes", "--approve", "--json"]
    code, out, err = _run([*argv, "--policy", str(policy_file)], capsys)
    assert code == 0, err
    started, polled = json.loads(out)["steps"]
    assert started["tool_id"] == "builtin:shell:start" and polled["tool_id"] == "builtin:shell:poll"
    assert polled["data"]["process_id"] == started["data"]["process_id"]


def test_unreadable_request_is_one_line_and_exit_2(policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["desktop", "dance", "--policy", str(policy_file)], capsys)
    assert code == 2 and out == ""
    assert err.startswith("aries: cannot tell what to do with 'dance'") and err.count("\n") == 1


def test_a_tool_the_policy_does_not_enable_is_said_before_anything_runs(
    tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "fs-only.yaml"
    path.write_text(json.dumps(policy_data(root, tool_classes={"fs": "enabled"})))
    code, out, err = _run(["desktop", "run", "pytest", "--yes", "--approve", "--policy", str(path)], capsys)
    assert code == 2 and out == ""
    assert "step 1 needs builtin:shell:run, which the policy in force" in err and "does not enable" in err


def test_steps_are_audited_in_the_workspace(root: Path, policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace, _ = WorkspaceManager().create("desk")
    workspace.close()
    argv = ["-w", "desk", "desktop", "write", "hello", "to", "b.txt", "--yes", "--approve"]
    code, _, err = _run([*argv, "--policy", str(policy_file)], capsys)
    assert code == 0, err
    with AuditStore.for_workspace(workspace.root) as audit:
        [row] = audit.calls(limit=10)
    assert row["tool_name"] == "builtin:fs:write_text" and row["source"] == "cli"
    assert row["approved_by"] == "operator_once"


def test_end_to_end_in_a_subprocess(root: Path, policy_file: Path, tmp_path: Path) -> None:
    env = {**os.environ, "ARIES_HOME": str(tmp_path / "home"), "PYTHONPATH": str(Path(__file__).parents[2])}
    env.pop("ARIES_MODEL", None)
    argv = [sys.executable, "-m", "app", "desktop", "list", "--yes", "--policy", str(policy_file)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "1. builtin:fs:list_dir  list the workspace root" in done.stdout and "a.txt" in done.stdout


def test_with_a_model_the_request_is_one_turn_of_the_loop(
    root: Path, policy_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from services.assistant import TurnLoop
    from services.models.config import make_provider, resolve_model
    from services.session.session import Session
    from tests.models.servers import Call, Reply, ScriptedServer

    server = ScriptedServer("ollama").start()
    try:
        env = {"ARIES_MODEL": "ollama:llama3.2:3b", "OLLAMA_HOST": server.url}
        workspace, _ = WorkspaceManager().create("desk")
        session = Session(workspace, policy_file=str(policy_file), interactive=False)
        _, name_map = TurnLoop(session, make_provider(resolve_model(None, env))).offered_tools()
        session.close()
        workspace.close()
        tool = dict(name_map.items())
        server.add(
            Reply(tool_calls=[Call(tool["builtin:fs:list_dir"], {"path": "."}, id="c1")]),
            Reply(text="There is one file, a.txt."),
        )
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        code, out, err = _run(
            ["-w", "desk", "desktop", "what", "files", "are", "here?", "--policy", str(policy_file)], capsys
        )
    finally:
        server.stop()
    assert code == 0, err
    assert out.splitlines()[0] == "Desktop Ops with ollama:llama3.2:3b: 1 tool call(s)"
    assert "There is one file, a.txt." in out
    with AuditStore.for_workspace(workspace.root) as audit:
        [row] = audit.calls(limit=10)
    assert row["tool_name"] == "builtin:fs:list_dir" and row["status"] == "success"


def test_options_before_the_request_and_after_a_double_dash(
    root: Path, policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["desktop", "--yes", "--policy", str(policy_file), "read", "a.txt"], capsys)
    assert code == 0 and "alpha" in out
    argv = ["desktop", "--policy", str(policy_file), "--", "run", "echo", "--yes"]
    code, out, err = _run(argv, capsys)
    assert code == 0 and '"argv": ["echo", "--yes"]' in out and "rerun with --yes" in err  # shown, not run
    code, _, err = _run(["desktop", "list", "--mode", "reckless"], capsys)
    assert code == 2 and "--mode is one of guide, commander, strict" in err
