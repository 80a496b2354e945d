"""The MCP provider against a misbehaving stdio server of our own (tests/tools/mcp_servers/
misbehaving.py): off by default, deny by default, tiers raised by annotations, and containment —
a hang, garbage, a huge answer, a crash — with the server restarted on the next call and no
process left behind."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from services.errors import ConfigError
from services.policy import RiskTier, parse_policy
from services.policy.mcp import McpServerConfig, tool_tier
from services.tools.gateway import ToolGateway
from tests.tools.conftest import Sandbox, policy_data
from tests.tools.mcp_support import MISBEHAVING, gone, mcp_policy, misbehaving, own_descendants, read_pids

pytestmark = pytest.mark.timeout(120)
BAD = {"mcp:bad": "enabled"}


def server_pids(gateway: ToolGateway) -> list[int]:
    return [s["pid"] for s in gateway.mcp_status() if s["pid"]]


def test_disabled_mcp_starts_nothing_and_its_tools_do_not_exist(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    before = {p.pid for p in own_descendants()}
    policy = mcp_policy(sandbox.root, {"bad": misbehaving()}, enabled=False, classes=BAD)
    gateway = gateway_factory(policy)
    assert gateway.mcp is None and gateway.mcp_status() == []
    assert gateway.registry.load_all() == {}
    result = gateway.execute_sync("mcp:bad:echo", {"text": "hi"})
    assert result.error is not None and result.error.details["rule"] == "registry.unknown_tool"
    assert not [t for t in gateway.list_tools() if t["id"].startswith("mcp:")]
    started = [p for p in own_descendants() if p.pid not in before]
    assert not [p for p in started if str(MISBEHAVING) in " ".join(p.info.get("cmdline") or [])]


def test_the_shipped_default_policy_keeps_mcp_off() -> None:
    from services.policy import default_policy
    from services.policy.mcp import mcp_settings

    assert mcp_settings(default_policy().data).enabled is False


def test_servers_start_lazily_and_the_tool_list_is_cached(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(mcp_policy(sandbox.root, {"bad": misbehaving()}, classes=BAD))
    [status] = gateway.mcp_status()
    assert status["state"] == "stopped" and status["pid"] is None  # nothing yet
    assert gateway.registry.load_all() == {}
    ids = {t["id"] for t in gateway.list_tools()}
    assert {"mcp:bad:echo", "mcp:bad:hang", "mcp:bad:huge"} <= ids
    assert "mcp:bad:bad schema" not in ids  # an invalid tool name is left out
    spec = gateway.registry.get("mcp:bad:echo")
    assert spec.input_schema["required"] == ["text"] and spec.tool_class == "mcp:bad"
    first = gateway.execute_sync("mcp:bad:echo", {"text": "one"})
    second = gateway.execute_sync("mcp:bad:echo", {"text": "two"})
    assert first.ok and second.ok, (first.to_dict(), second.to_dict())
    assert second.data is not None and second.data["text"] == "two"
    [status] = gateway.mcp_status()
    assert status["state"] == "running" and status["starts"] == 1 and status["tools"] >= 7


def test_mcp_tools_are_denied_until_the_policy_allows_them(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    closed = gateway_factory(mcp_policy(sandbox.root, {"bad": misbehaving()}))
    result = closed.execute_sync("mcp:bad:echo", {"text": "x"})
    assert result.denied and result.error is not None and result.error.details["rule"] == "default.deny"
    named = {"mcp:bad:echo": {"enabled": True}}
    by_name = gateway_factory(mcp_policy(sandbox.root, {"bad": misbehaving()}, tools=named))
    assert by_name.execute_sync("mcp:bad:echo", {"text": "x"}).ok
    other = by_name.execute_sync("mcp:bad:wipe", {})
    assert other.denied and other.error is not None and other.error.details["rule"] == "default.deny"
    off = gateway_factory(
        mcp_policy(sandbox.root, {"bad": misbehaving()}, classes=BAD, tools={"mcp:bad:echo": {"enabled": False}})
    )
    refused = off.execute_sync("mcp:bad:echo", {"text": "x"})
    assert refused.error is not None and refused.error.details["rule"] == "tools.mcp:bad:echo"


def test_arguments_are_checked_against_the_servers_input_schema(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(mcp_policy(sandbox.root, {"bad": misbehaving()}, classes=BAD))
    result = gateway.execute_sync("mcp:bad:echo", {"text": 5})
    assert result.error is not None and result.error.type == "InvalidInput"
    assert result.error.details["rule"] == "input.schema"


def test_annotations_raise_the_tier_but_never_lower_it(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    config = McpServerConfig("s", command="x", tier=RiskTier.READ_ONLY)
    assert tool_tier(config, "t", {"destructiveHint": True}) is RiskTier.WRITE_DESTRUCTIVE
    assert tool_tier(config, "t", {"openWorldHint": True}) is RiskTier.NETWORK
    high = McpServerConfig("s", command="x", tier=RiskTier.EXEC_USERSPACE)
    assert tool_tier(high, "t", {"readOnlyHint": True}) is RiskTier.EXEC_USERSPACE
    assert tool_tier(high, "t", {"destructiveHint": True}) is RiskTier.EXEC_USERSPACE
    # Through the gateway: the policy says READ_ONLY for the whole server; echo (read-only hint) runs
    # without approval, wipe (destructive hint) is raised and needs approval.
    policy = mcp_policy(sandbox.root, {"bad": misbehaving(tier="READ_ONLY")}, classes=BAD)
    gateway = gateway_factory(policy, approver=None)
    assert gateway.execute_sync("mcp:bad:echo", {"text": "x"}).ok
    assert gateway.registry.get("mcp:bad:wipe").tier is RiskTier.WRITE_DESTRUCTIVE
    wiped = gateway.execute_sync("mcp:bad:wipe", {})
    assert wiped.denied and wiped.error is not None and wiped.error.details["rule"] == "approval.no_approver"
    assert wiped.error.details["policy_rule"] == "mode.guide.requires_approval"
    # The default tier (WRITE_DESTRUCTIVE) needs approval; a per-tool tier in the policy lowers one tool.
    strict = gateway_factory(mcp_policy(sandbox.root, {"bad": misbehaving()}, classes=BAD), approver=None)
    assert strict.execute_sync("mcp:bad:echo", {"text": "x"}).denied
    lowered = gateway_factory(
        mcp_policy(sandbox.root, {"bad": misbehaving(tools={"echo": "READ_ONLY"})}, classes=BAD), approver=None
    )
    assert lowered.execute_sync("mcp:bad:echo", {"text": "x"}).ok


def test_a_hung_server_times_out_and_is_restarted_on_the_next_call(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(mcp_policy(sandbox.root, {"bad": misbehaving()}, classes=BAD))
    assert gateway.execute_sync("mcp:bad:echo", {"text": "up"}).ok
    [first_pid] = server_pids(gateway)
    started = time.monotonic()
    hung = gateway.execute_sync("mcp:bad:hang", {})
    assert time.monotonic() - started < 10
    assert hung.error is not None and hung.error.type == "Timeout" and "'bad'" in hung.error.message
    assert gone(first_pid), "the hung server was not stopped"
    again = gateway.execute_sync("mcp:bad:echo", {"text": "back"})
    assert again.ok and again.data is not None and again.data["text"] == "back"
    [status] = gateway.mcp_status()
    assert status["starts"] == 2 and status["pid"] != first_pid


def test_garbage_and_malformed_results_are_typed_errors(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(mcp_policy(sandbox.root, {"bad": misbehaving()}, classes=BAD))
    result = gateway.execute_sync("mcp:bad:garbage", {})
    assert result.error is not None and result.error.type in ("InternalError", "Timeout")
    assert "'bad'" in result.error.message and "\n" not in result.error.message
    assert gateway.execute_sync("mcp:bad:echo", {"text": "still"}).ok
    failed = gateway.execute_sync("mcp:bad:error", {})
    assert failed.error is not None and failed.error.details.get("code") == "mcp_tool_error"
    assert "the thing failed" in failed.error.message and "\x1b" not in failed.error.message


def test_a_huge_answer_is_capped_with_truncation_metadata(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(
        mcp_policy(sandbox.root, {"bad": misbehaving(max_output_bytes=4096, timeout_s=20)}, classes=BAD)
    )
    result = gateway.execute_sync("mcp:bad:huge", {"bytes": 3_000_000})
    assert result.ok and result.data is not None, result.to_dict()
    assert result.meta["truncated"] is True and result.meta["bytes_received"] > 3_000_000
    assert len(json.dumps(result.data["content"])) <= 4096
    assert result.data["text"].startswith("xxxx")


def test_a_server_that_crashes_mid_call_is_reported_and_restarted(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(mcp_policy(sandbox.root, {"bad": misbehaving(timeout_s=10)}, classes=BAD))
    crashed = gateway.execute_sync("mcp:bad:crash", {})
    assert crashed.error is not None and crashed.error.type == "InternalError", crashed.to_dict()
    assert crashed.error.retryable and "'bad'" in crashed.error.message
    assert gateway.execute_sync("mcp:bad:echo", {"text": "again"}).ok
    assert gateway.mcp_status()[0]["starts"] == 2


def test_a_server_killed_with_sigkill_mid_call_is_contained(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway], tmp_path: Path
) -> None:
    pidfile = tmp_path / "pids"
    gateway = gateway_factory(
        mcp_policy(sandbox.root, {"bad": misbehaving("--child", "--pidfile", str(pidfile), timeout_s=30)}, classes=BAD)
    )
    assert gateway.registry.load_all() == {}
    server, child = read_pids(pidfile)

    import threading

    killer = threading.Timer(0.5, os.kill, (server, signal.SIGKILL))
    killer.start()
    started = time.monotonic()
    result = gateway.execute_sync("mcp:bad:hang", {})
    killer.join()
    assert time.monotonic() - started < 20
    assert result.error is not None and result.error.type == "InternalError" and result.error.retryable
    assert "exited" in result.error.message
    assert gone(child, timeout=20), "the killed server's child was left behind"
    pidfile.unlink()
    assert gateway.execute_sync("mcp:bad:echo", {"text": "restarted"}).ok
    new_server, _ = read_pids(pidfile)
    assert new_server != server


def test_closing_the_gateway_leaves_no_server_or_child_process(sandbox: Sandbox, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    server = misbehaving("--child", "--pidfile", str(pidfile), tier="READ_ONLY")
    policy = mcp_policy(sandbox.root, {"bad": server}, classes=BAD)
    gateway = ToolGateway(sandbox.workspace, policy=policy)
    assert gateway.execute_sync("mcp:bad:echo", {"text": "x"}).ok
    server, child = read_pids(pidfile)
    gateway.close()
    assert gone(server) and gone(child)


def test_a_server_that_cannot_start_is_a_typed_retryable_error(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    broken = {"command": "/nonexistent/mcp-server", "start_timeout_s": 5}
    gateway = gateway_factory(mcp_policy(sandbox.root, {"gone": broken}, classes={"mcp:gone": "enabled"}))
    assert "mcp:gone" in gateway.registry.load_all()
    result = gateway.execute_sync("mcp:gone:anything", {})
    assert result.error is not None and result.error.details["rule"] == "registry.provider_failed"
    assert result.error.retryable and "failed to start" in result.error.message
    [status] = gateway.mcp_status()
    assert status["state"] == "failed" and status["error"]


def test_server_urls_must_be_loopback_and_mistakes_name_the_line(sandbox: Sandbox) -> None:
    data = policy_data(sandbox.root)
    data["providers"] = {"mcp": {"enabled": True, "servers": {"far": {"url": "http://example.com/mcp"}}}}
    with pytest.raises(ConfigError, match="loopback"):
        parse_policy(json.dumps(data), source="<p>")
    text = "version: 1\nproviders:\n  mcp:\n    enabled: true\n    servers:\n      t:\n        comand: x\n"
    with pytest.raises(ConfigError, match=r"<p>:\d+"):
        parse_policy(text, source="<p>")
    ok = "version: 1\nproviders:\n  mcp:\n    servers:\n      t: {url: 'http://127.0.0.1:9/mcp'}\n"
    assert parse_policy(ok, source="<p>").providers["mcp"] is False


def test_no_server_or_child_is_left_after_aries_crashes(sandbox: Sandbox, tmp_path: Path) -> None:
    import subprocess
    import sys

    pidfile = tmp_path / "pids"
    server = misbehaving("--child", "--pidfile", str(pidfile), tier="READ_ONLY")
    policy = mcp_policy(sandbox.root, {"bad": server}, classes=BAD)
    (tmp_path / "policy.json").write_text(json.dumps(policy.data))
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from services.policy import parse_policy\n"
        "from services.tools.gateway import ToolGateway\n"
        "from services.workspace.manager import Workspace\n"
        "base = Path(sys.argv[1])\n"
        "policy = parse_policy((base / 'policy.json').read_text(), source='p')\n"
        "workspace = Workspace(base / 'crash-ws', 'crash')\n"
        "workspace.ensure_layout()\n"
        "gateway = ToolGateway(workspace, policy=policy)\n"
        "assert gateway.execute_sync('mcp:bad:echo', {'text': 'x'}).ok\n"
        "raise RuntimeError('Aries crashed')\n"
    )
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 1 and "Aries crashed" in done.stderr
    server, child = read_pids(pidfile)
    assert gone(server) and gone(child), "a server or its child outlived the crashed Aries"


def test_a_loopback_streamable_http_server(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = MISBEHAVING.parent / "http_greeter.py"
    proc = subprocess.Popen([sys.executable, str(script), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as conn:
                if conn.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            time.sleep(0.1)
        servers = {"web": {"url": f"http://127.0.0.1:{port}/mcp", "tools": {"greet": "READ_ONLY"}}}
        gateway = gateway_factory(mcp_policy(sandbox.root, servers, classes={"mcp:web": "enabled"}), approver=None)
        result = gateway.execute_sync("mcp:web:greet", {"name": "Ada"})
        assert result.ok and result.data is not None, result.to_dict()
        assert result.data["text"] == "Hello, Ada!"
        assert gateway.mcp_status()[0]["transport"] == "http"
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_server_that_never_answers_the_handshake_is_stopped(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    mute = {"command": "sleep", "args": ["301"], "start_timeout_s": 1}
    gateway = gateway_factory(mcp_policy(sandbox.root, {"mute": mute}, classes={"mcp:mute": "enabled"}))
    started = time.monotonic()
    failed = gateway.registry.load_all()
    assert "did not start within 1 s" in failed["mcp:mute"]
    assert time.monotonic() - started < 15
    [status] = gateway.mcp_status()
    assert status["state"] == "failed" and status["pid"] and gone(status["pid"])
