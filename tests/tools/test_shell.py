"""Shell tools with real processes: start/poll/kill/run, process trees that fork, double-fork and
setsid, timeouts, output caps, stall metadata, allowlists and the child environment."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from services.tools.calls import ApprovalDecision, ApprovalRequest
from services.tools.gateway import ToolGateway
from services.tools.shell import HARDENED_ENV
from tests.tools.conftest import Sandbox, make_policy

pytestmark = pytest.mark.timeout(90)

TREE_SCRIPT = r"""
import os, signal, sys, time

pids = sys.argv[1]

def record(tag):
    with open(pids, "a") as handle:
        handle.write(f"{tag} {os.getpid()}\n")

record("main")
if os.fork() == 0:                      # child
    record("child")
    if os.fork() == 0:                  # grandchild: becomes a daemon
        os.setsid()
        if os.fork() == 0:              # great-grandchild in a new session, parent exits
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)    # detached from our pipes, like a real daemon
            record("daemon")
            time.sleep(300)
            os._exit(0)
        os._exit(0)
    if os.fork() == 0:                  # a second daemon that keeps stdout open
        os.setsid()
        if os.fork() == 0:
            record("daemon2")
            time.sleep(300)
            os._exit(0)
        os._exit(0)
    time.sleep(300)
    os._exit(0)
if os.fork() == 0:                      # ignores SIGTERM: needs the forced kill
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    record("stubborn")
    time.sleep(300)
    os._exit(0)
print("ready", flush=True)
time.sleep(300)
"""


def _write_script(sandbox: Sandbox) -> Path:
    script = sandbox.root / "tree.py"
    script.write_text(TREE_SCRIPT)
    return script


def _wait_for_pids(path: Path, count: int, timeout: float = 20) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            lines = [ln.split() for ln in path.read_text().splitlines() if ln.strip()]
            if len(lines) >= count:
                return {tag: int(pid) for tag, pid in lines}
        time.sleep(0.05)
    raise AssertionError(f"the process tree did not start: {path.read_text() if path.exists() else 'no file'}")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _assert_all_dead(pids: dict[str, int]) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in pids.values()):
        time.sleep(0.05)
    survivors = {tag: pid for tag, pid in pids.items() if _alive(pid)}
    for pid in survivors.values():  # do not leak processes even when the test fails
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass
    assert not survivors, f"still alive: {survivors}"


def _host_pids(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> ToolGateway:
    """A gateway without the OS sandbox: these tests check pids the children write themselves,
    which inside bubblewrap's pid namespace are not the host's (the sandboxed tree is covered by
    tests/tools/test_sandbox.py)."""
    return gateway_factory(make_policy(sandbox.root, shell__sandbox="off"))


def test_kill_ends_a_tree_that_forks_and_daemonizes(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = _host_pids(sandbox, gateway_factory)
    _write_script(sandbox)
    started = gateway.execute_sync("builtin:shell:start", {"argv": ["python3", "tree.py", "pids.txt"]})
    assert started.ok and started.data is not None, started.to_dict()
    process_id = started.data["process_id"]
    pids = _wait_for_pids(sandbox.root / "pids.txt", 5)
    assert set(pids) == {"main", "child", "daemon", "daemon2", "stubborn"} | set(pids)
    # the daemons really left the process group and the main process's descendants
    main = psutil.Process(pids["main"])
    descendants = {p.pid for p in main.children(recursive=True)}
    assert pids["daemon"] not in descendants and os.getpgid(pids["daemon"]) != pids["main"]
    for _ in range(40):
        polled = gateway.execute_sync("builtin:shell:poll", {"process_id": process_id, "wait_s": 0.5})
        assert polled.ok and polled.data is not None and polled.data["running"] is True
        if "ready" in polled.data["stdout_tail"]:
            break
    assert polled.data is not None and "ready" in polled.data["stdout_tail"]
    killed = gateway.execute_sync("builtin:shell:kill", {"process_id": process_id, "grace_s": 0.5})
    assert killed.ok and killed.data is not None, killed.to_dict()
    assert killed.data["survivors"] == []
    assert pids["stubborn"] in killed.data["forced"]
    _assert_all_dead(pids)
    after = gateway.execute_sync("builtin:shell:poll", {"process_id": process_id})
    assert after.data is not None and after.data["running"] is False and after.data["exit_code"] is not None


def test_run_timeout_ends_the_whole_tree(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = _host_pids(sandbox, gateway_factory)
    _write_script(sandbox)
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["python3", "tree.py", "pids.txt"], "timeout_s": 2})
    pids = _wait_for_pids(sandbox.root / "pids.txt", 5, timeout=1)
    assert result.error is not None and result.error.type == "Timeout" and result.error.retryable
    assert "ready" in result.error.details["stdout_tail"]
    _assert_all_dead(pids)


def test_closing_the_gateway_ends_started_processes(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    _write_script(sandbox)
    gateway = _host_pids(sandbox, gateway_factory)
    assert gateway.execute_sync("builtin:shell:start", {"argv": ["python3", "tree.py", "pids.txt"]}).ok
    pids = _wait_for_pids(sandbox.root / "pids.txt", 5)
    gateway.close()
    _assert_all_dead(pids)


def test_run_cleans_up_background_processes_left_behind(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = _host_pids(sandbox, gateway_factory)
    (sandbox.root / "bg.py").write_text(
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    devnull = os.open(os.devnull, os.O_RDWR)\n"
        "    [os.dup2(devnull, fd) for fd in (0, 1, 2)]\n"
        "    open('bg.pid', 'w').write(str(os.getpid()))\n"
        "    time.sleep(300)\n"
        "    os._exit(0)\n"
        "while not os.path.exists('bg.pid'): time.sleep(0.01)\n"
        "print('parent done')\n"
    )
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["python3", "bg.py"], "timeout_s": 20})
    assert result.ok and result.data is not None, result.to_dict()
    assert result.data["stdout"] == "parent done\n" and result.data["exit_code"] == 0
    pid = int((sandbox.root / "bg.pid").read_text())
    assert pid in result.data["cleaned_up"]
    _assert_all_dead({"bg": pid})


def test_run_reports_exit_codes_and_stderr(gateway: ToolGateway) -> None:
    result = gateway.execute_sync(
        "builtin:shell:run",
        {"argv": ["python3", "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"]},
    )
    assert result.ok and result.data is not None
    assert (result.data["exit_code"], result.data["stdout"], result.data["stderr"]) == (3, "out\n", "err\n")


def test_output_is_capped_with_truncation_metadata(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = gateway_factory(make_policy(sandbox.root, limits={"shell_output_max_bytes": 1000}))
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["python3", "-c", "print('x' * 5000 + 'END')"]})
    assert result.ok and result.data is not None
    assert result.meta["truncated"] is True
    assert len(result.data["stdout"]) == 1000 and result.data["stdout"].endswith("END\n")
    assert result.data["stdout_bytes"] == 5004


def test_poll_reports_stalls(gateway: ToolGateway) -> None:
    started = gateway.execute_sync(
        "builtin:shell:start",
        {"argv": ["python3", "-c", "print('hi', flush=True); import time; time.sleep(30)"], "stall_after_s": 0.3},
    )
    assert started.data is not None
    pid = started.data["process_id"]
    first = gateway.execute_sync("builtin:shell:poll", {"process_id": pid, "wait_s": 5})
    assert first.data is not None and first.data["stdout_tail"] == "hi\n"
    time.sleep(0.5)
    later = gateway.execute_sync("builtin:shell:poll", {"process_id": pid})
    assert later.data is not None and later.data["stalled"] is True and later.data["seconds_since_output"] >= 0.3
    assert gateway.execute_sync("builtin:shell:kill", {"process_id": pid, "grace_s": 0.2}).ok


def test_poll_and_kill_unknown_process(gateway: ToolGateway) -> None:
    for tool in ("builtin:shell:poll", "builtin:shell:kill"):
        result = gateway.execute_sync(tool, {"process_id": "p999-nothere"})
        assert result.error is not None and result.error.type == "NotFound"


def test_process_limit(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = gateway_factory(make_policy(sandbox.root, limits={"shell_max_processes": 1}))
    first = gateway.execute_sync("builtin:shell:start", {"argv": ["sleep", "30"]})
    second = gateway.execute_sync("builtin:shell:start", {"argv": ["sleep", "30"]})
    assert first.ok and second.error is not None and second.error.type == "TooLarge"


def test_child_environment_is_reduced_and_tagged(
    sandbox: Sandbox, gateway: ToolGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARIES_TEST_SECRET_TOKEN", "do-not-leak")
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["env"], "env": {"TZ": "UTC"}})
    assert result.ok and result.data is not None
    env = dict(line.split("=", 1) for line in result.data["stdout"].splitlines() if "=" in line)
    assert "ARIES_TEST_SECRET_TOKEN" not in env
    assert env["TZ"] == "UTC" and env["ARIES_PROC_TAG"].endswith(":" + result.data["process_id"])
    assert env["PAGER"] == "cat" and env["GIT_CONFIG_KEY_0"] == "core.fsmonitor"
    # PWD (bubblewrap sets it) and TMPDIR (the sandbox's private one) come from the OS sandbox.
    assert set(env) <= {"PATH", "HOME", "LANG", "TZ", "ARIES_PROC_TAG", "PWD", "TMPDIR", *HARDENED_ENV}


@pytest.mark.parametrize("env", [{"LD_PRELOAD": "/tmp/x.so"}, {"ARIES_PROC_TAG": "spoof"}, {"BASH_ENV": "x"}])
def test_dangerous_env_is_refused(env: dict[str, str], gateway: ToolGateway) -> None:
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["true"], "env": env})
    assert result.error is not None and result.error.type == "PolicyDenied"
    assert result.error.details["rule"] == "shell.env"


@pytest.mark.parametrize(
    ("argv", "rule"),
    [
        (["rm", "-rf", "sub"], "shell.executables"),
        (["/bin/echo", "x"], "shell.executables"),
        (["sudo", "true"], "approval.operator_denied"),
    ],
)
def test_executable_allowlist(argv: list[str], rule: str, gateway_factory: Callable[..., Any]) -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision.deny("no")

    gateway = gateway_factory(approver=approver)
    result = gateway.execute_sync("builtin:shell:run", {"argv": argv})
    assert result.error is not None and result.error.details["rule"] == rule
    if argv[0] == "sudo":
        assert asked and str(asked[0].tier) == "EXEC_PRIVILEGED"


def test_missing_executable_is_not_found(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    policy = make_policy(sandbox.root, shell__executables=[{"id": "ghost", "names": ["no-such-binary-aries"]}])
    gateway = gateway_factory(policy)
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["no-such-binary-aries"]})
    assert result.error is not None and result.error.type == "NotFound"


def test_commander_runs_allowlisted_commands_without_asking(
    sandbox: Sandbox, gateway_factory: Callable[..., Any]
) -> None:
    gateway = gateway_factory(make_policy(sandbox.root, mode="commander"), approver=None)
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["echo", "auto"]})
    assert result.ok, result.to_dict()
    assert result.meta["decision"] == {
        "action": "allow",
        "rule": "shell.executables.inspect",
        "approved_by": "rule",
        "tier": "EXEC_USERSPACE",
        "mode": "commander",
    }
    strict = gateway_factory(make_policy(sandbox.root, mode="strict"), approver=None)
    denied = strict.execute_sync("builtin:shell:run", {"argv": ["echo", "auto"]})
    assert denied.error is not None and denied.error.details["rule"] == "approval.no_approver"
