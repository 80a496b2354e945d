"""The MCP provider against real servers that no one here wrote: ``mcp-server-time`` (PyPI, stdio)
and ``@modelcontextprotocol/server-filesystem`` (npm, stdio, installed by
``tests/tools/mcp_servers/install.py``): list tools, allowed call, denied call, a server killed
between calls, the CLI's ``tool list`` / ``tool doctor``, and no process left after the CLI quits."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from services.tools.gateway import ToolGateway
from tests.tools.conftest import Sandbox, policy_data
from tests.tools.mcp_support import filesystem_server, gone, mcp_policy, running_with, time_server

pytestmark = pytest.mark.timeout(240)
REPO = Path(__file__).resolve().parents[2]
TIME = {"mcp:time": "enabled"}
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not on PATH")


def test_time_server_tools_allowed_and_denied_calls(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    servers = {"time": time_server(tools={"get_current_time": "READ_ONLY"})}
    gateway = gateway_factory(mcp_policy(sandbox.root, servers, classes=TIME), approver=None)
    assert gateway.registry.load_all() == {}
    tools = {t["id"]: t for t in gateway.list_tools() if t["id"].startswith("mcp:time:")}
    assert set(tools) >= {"mcp:time:get_current_time", "mcp:time:convert_time"}
    schema = gateway.registry.get("mcp:time:get_current_time").input_schema
    assert "timezone" in schema["properties"]

    now = gateway.execute_sync("mcp:time:get_current_time", {"timezone": "Europe/Paris"})
    assert now.ok and now.data is not None, now.to_dict()
    assert "Europe/Paris" in now.data["text"]
    last = gateway.last_decision()
    assert last is not None and last["tool_name"] == "mcp:time:get_current_time"
    assert last["rule_id"] == "mode.guide.read_only" and last["status"] == "success"

    # convert_time keeps the server's default tier (WRITE_DESTRUCTIVE): approval, and none is given.
    args = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    denied = gateway.execute_sync("mcp:time:convert_time", args)
    assert denied.denied and denied.error is not None
    assert denied.error.details["rule"] == "approval.no_approver"
    last = gateway.last_decision()
    assert last is not None and last["status"] == "denied" and last["tool_name"] == "mcp:time:convert_time"


def test_explain_loads_the_server_of_an_mcp_tool(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    servers = {"time": time_server(tools={"get_current_time": "READ_ONLY"})}
    gateway = gateway_factory(mcp_policy(sandbox.root, servers, classes=TIME), approver=None)
    decision = gateway.explain("mcp:time:get_current_time", {"timezone": "UTC"})  # nothing loaded before
    assert decision.action == "allow" and decision.rule == "mode.guide.read_only", decision


@pytest.mark.slow
def test_time_server_killed_is_restarted_on_the_next_call(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    servers = {"time": time_server(tools={"get_current_time": "READ_ONLY"})}
    gateway = gateway_factory(mcp_policy(sandbox.root, servers, classes=TIME))
    assert gateway.execute_sync("mcp:time:get_current_time", {"timezone": "UTC"}).ok
    [status] = gateway.mcp_status()
    os.kill(status["pid"], signal.SIGKILL)
    assert gone(status["pid"])
    again = gateway.execute_sync("mcp:time:get_current_time", {"timezone": "UTC"})
    assert again.ok, again.to_dict()
    [after] = gateway.mcp_status()
    assert after["starts"] == 2 and after["pid"] != status["pid"]


@needs_node
def test_filesystem_server_lists_reads_and_is_refused_writes(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    fs_tiers = {"list_directory": "READ_ONLY", "read_text_file": "READ_ONLY"}
    servers = {"files": filesystem_server(sandbox.root, tools=fs_tiers, timeout_s=30)}
    gateway = gateway_factory(mcp_policy(sandbox.root, servers, classes={"mcp:files": "enabled"}), approver=None)
    assert gateway.registry.load_all() == {}
    ids = {t["id"] for t in gateway.list_tools()}
    assert {"mcp:files:list_directory", "mcp:files:read_text_file", "mcp:files:write_file"} <= ids

    listed = gateway.execute_sync("mcp:files:list_directory", {"path": str(sandbox.root)})
    assert listed.ok and listed.data is not None, listed.to_dict()
    assert "hello.txt" in listed.data["text"]
    read = gateway.execute_sync("mcp:files:read_text_file", {"path": str(sandbox.root / "hello.txt")})
    assert read.ok and read.data is not None and "hello world" in read.data["text"]

    target = sandbox.root / "new.txt"
    write = gateway.execute_sync("mcp:files:write_file", {"path": str(target), "content": "no"})
    assert write.denied and not target.exists()
    # Outside the server's own allowed directory: the server refuses; Aries reports it typed.
    outside = gateway.execute_sync("mcp:files:read_text_file", {"path": str(sandbox.outside / "secret.txt")})
    assert outside.error is not None and outside.error.details.get("code") in ("mcp_tool_error", "mcp_server_error")
    assert "SENTINEL" not in json.dumps(outside.to_dict())


def _cli(argv: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARIES_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "app", *argv], capture_output=True, text=True, env=env, timeout=180, cwd=REPO
    )


def test_cli_tool_list_and_doctor_show_the_servers_and_leave_no_process(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    servers = {"time": time_server(tools={"get_current_time": "READ_ONLY"})}
    data = policy_data(root)
    data["providers"] = {"builtin": {"enabled": True}, "mcp": {"enabled": True, "servers": servers}}
    data["tool_classes"] = {**data["tool_classes"], **TIME}
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps(data))

    listing = _cli(["tool", "list", "--json", "--policy", str(policy)], tmp_path / "home")
    assert listing.returncode == 0, listing.stderr
    out = json.loads(listing.stdout)
    tools = {t["id"]: t for t in out["tools"]}
    assert tools["mcp:time:get_current_time"]["enabled"] and tools["mcp:time:get_current_time"]["tier"] == "READ_ONLY"
    [server] = out["mcp_servers"]
    assert server["name"] == "time" and server["state"] == "running" and server["error"] is None
    assert server["pid"] and gone(server["pid"], timeout=10), "the server outlived `aries tool list`"

    doctor = _cli(["tool", "doctor", "--policy", str(policy)], tmp_path / "home")
    report = json.loads(doctor.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    detail = checks["mcp server time"]["detail"]
    assert checks["mcp server time"]["ok"] and "running" in detail, detail
    pid = int(detail.rsplit("pid ", 1)[1])
    assert gone(pid, timeout=10), "the server outlived `aries tool doctor`"
    assert pid not in {p.pid for p in running_with("mcp_server_time")}


def test_cli_doctor_says_mcp_is_off_by_default(tmp_path: Path) -> None:
    doctor = _cli(["tool", "doctor"], tmp_path / "home")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["mcp provider"]["ok"] and "disabled" in checks["mcp provider"]["detail"]


def test_a_bare_server_command_is_found_beside_aries_python(tmp_path: Path) -> None:
    """`command: mcp-server-time` as a user writes it, with the venv not on PATH: the server
    installed into Aries's own environment is found beside its Python and starts."""
    if not (Path(sys.executable).parent / "mcp-server-time").exists():
        pytest.skip("mcp-server-time's script is not beside this Python")
    root = tmp_path / "root"
    root.mkdir()
    servers = {"time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}}
    data = policy_data(root)
    data["providers"] = {"builtin": {"enabled": True}, "mcp": {"enabled": True, "servers": servers}}
    data["tool_classes"] = {**data["tool_classes"], **TIME}
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps(data))
    home = tmp_path / "home"
    env = {**os.environ, "ARIES_HOME": str(home), "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    listing = subprocess.run(
        [sys.executable, "-m", "app", "tool", "list", "--json", "--policy", str(policy)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        cwd=REPO,
    )
    assert listing.returncode == 0, listing.stderr
    [server] = json.loads(listing.stdout)["mcp_servers"]
    assert server["state"] == "running" and server["error"] is None, server


def test_a_plan_step_names_an_mcp_tool(tmp_path: Path) -> None:
    """`aries run` accepts `mcp:<server>:<tool>` steps (the server loads on demand, as for a call);
    an MCP tool the server does not have is still refused with the plan's file:line."""
    home = tmp_path / "home"
    assert _cli(["workspace", "new", "demo"], home).returncode == 0
    root = home / "workspaces" / "demo"
    servers = {"time": time_server(tools={"get_current_time": "READ_ONLY"})}
    data = policy_data(root)
    data["providers"] = {"builtin": {"enabled": True}, "mcp": {"enabled": True, "servers": servers}}
    data["tool_classes"] = {**data["tool_classes"], **TIME}
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps(data))
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        'version: "1.0"\nsteps:\n  - tool: mcp:time:get_current_time\n    args: {timezone: UTC}\n', encoding="utf-8"
    )
    run = _cli(["-w", "demo", "run", str(plan), "--policy", str(policy), "--json"], home)
    assert run.returncode == 0, run.stderr + run.stdout
    outcome = json.loads(run.stdout)
    assert outcome["status"] == "completed" and outcome["steps"][0]["tool_id"] == "mcp:time:get_current_time"

    plan.write_text('version: "1.0"\nsteps:\n  - tool: mcp:time:no_such_tool\n    args: {}\n', encoding="utf-8")
    bad = _cli(["-w", "demo", "run", str(plan), "--policy", str(policy)], home)
    assert bad.returncode != 0 and f"{plan}:3" in bad.stderr and "mcp:time:no_such_tool" in bad.stderr
