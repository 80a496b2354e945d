"""``aries tool list|call|doctor``: JSON out, exit 0 ok / 3 policy denial / 1 other errors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import tool as cli_tool
from tests.tools.conftest import policy_data

pytestmark = pytest.mark.timeout(60)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    parser = argparse.ArgumentParser(prog="aries")
    parser.add_argument("-w", "--workspace")
    cli_tool.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


@pytest.fixture
def policy_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ARIES_HOME", str(tmp_path / "home"))
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    path = tmp_path / "policy.json.yaml"
    path.write_text(json.dumps(policy_data(root)))
    return path


def test_tool_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["tool", "list", "--json"], capsys)
    assert code == 0 and len(out["tools"]) == 16 and out["mode"] == "guide"
    enabled = {t["id"]: t["enabled"] for t in out["tools"]}
    assert enabled["builtin:fs:read_text"] and not enabled["builtin:web:fetch"]


def test_call_ok(policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        ["tool", "call", "builtin:fs:read_text", "--args", '{"path": "a.txt"}', "--policy", str(policy_file)], capsys
    )
    assert code == 0 and out["status"] == "ok" and out["data"]["text"] == "alpha\n"


def test_call_needing_approval(policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["tool", "call", "builtin:shell:run", "--args", '{"argv": ["echo", "hi"]}', "--policy", str(policy_file)]
    code, out, err = _run(argv, capsys)
    assert code == 3 and out["error"]["type"] == "PolicyDenied"
    assert out["error"]["details"]["rule"] == "approval.no_approver" and "--approve" in err
    code, out, _ = _run([*argv, "--approve"], capsys)
    assert code == 0 and out["data"]["stdout"] == "hi\n"
    assert out["meta"]["decision"]["approved_by"] == "operator_once"
    code, out, _ = _run([*argv, "--mode", "commander"], capsys)
    assert code == 0 and out["meta"]["decision"]["approved_by"] == "rule"


def test_call_denied_by_policy(policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        [
            "tool",
            "call",
            "builtin:fs:read_text",
            "--args",
            '{"path": "/etc/passwd"}',
            "--policy",
            str(policy_file),
            "--approve",
        ],
        capsys,
    )
    assert code == 3 and out["error"]["details"]["rule"] == "fs.allowed_roots"


def test_call_errors(policy_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["tool", "call", "builtin:fs:read_text", "--args", "{nope"], capsys)
    assert code == 1 and out is None and "not valid JSON" in err
    code, out, err = _run(["tool", "call", "builtin:fs:read_text", "--args", "[1]"], capsys)
    assert code == 1 and "JSON object" in err
    code, out, _ = _run(["tool", "call", "builtin:fs:missing", "--policy", str(policy_file)], capsys)
    assert code == 1 and out["error"]["type"] == "NotFound"
    code, out, _ = _run(
        ["tool", "call", "builtin:fs:read_text", "--args", '{"path": "nope.txt"}', "--policy", str(policy_file)], capsys
    )
    assert code == 1 and out["error"]["type"] == "NotFound"
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nmode: yolo\n")
    code, out, err = _run(["tool", "call", "builtin:fs:list_dir", "--policy", str(bad)], capsys)
    assert code == 1 and f"{bad}:2:" in err
    code, out, err = _run(
        ["-w", "no-such-workspace", "tool", "call", "builtin:fs:list_dir", "--policy", str(policy_file)], capsys
    )
    assert code == 1 and "no workspace named" in err


def test_call_in_a_named_workspace_is_audited(policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from services.audit.log import AuditStore
    from services.workspace.manager import WorkspaceManager

    workspace, _ = WorkspaceManager().create("proj")
    code, _, _ = _run(["-w", "proj", "tool", "call", "builtin:fs:list_dir", "--policy", str(policy_file)], capsys)
    assert code == 0
    with AuditStore.for_workspace(workspace.root) as store:
        last = store.last_decision()
    assert last is not None and last["tool_name"] == "builtin:fs:list_dir" and last["status"] == "success"
    assert store.path.parent == workspace.root


def test_doctor(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["tool", "doctor"], capsys)
    assert code == 0 and out["ok"] is True
    sandbox = next(c for c in out["checks"] if c["name"] == "shell sandbox")  # which one, or the fallback
    assert sandbox["ok"] and sandbox["detail"].startswith(("bubblewrap", "Landlock ABI", "none:")), sandbox
