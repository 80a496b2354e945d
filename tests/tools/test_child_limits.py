"""Shell children get resource limits and no-new-privileges from the policy, and a call the
gateway cancels or times out leaves no process of its tree running (real processes, psutil)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from services.policy import BoundPolicy
from services.tools.gateway import ToolGateway
from services.tools.processes import ENV_TAG
from tests.tools.conftest import Sandbox, make_policy

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(sys.platform == "win32", reason="POSIX rlimits")]

SHELL = [{"id": "dev", "names": ["python3", "sh", "sleep", "true"]}]


def _gateway(sandbox: Sandbox, factory: Callable[..., ToolGateway], **limits: Any) -> ToolGateway:
    return factory(make_policy(sandbox.root, shell__executables=SHELL, limits={"shell_kill_grace_s": 1, **limits}))


def _tagged(session: str) -> list[psutil.Process]:
    """Live processes started by this gateway's process manager (they carry its marker)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(ENV_TAG, "").startswith(session + ":") and process.status() != "zombie":
                found.append(process)
        except (psutil.Error, OSError):
            continue
    return found


def _wait_none_left(session: str, within_s: float = 5.0) -> list[psutil.Process]:
    deadline = time.monotonic() + within_s
    left = _tagged(session)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _tagged(session)
    return left


def test_cpu_burner_is_stopped_by_the_cpu_limit(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = _gateway(sandbox, gateway_factory, child_cpu_s=1)
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["python3", "-c", "while True: pass"], "timeout_s": 30})
    assert result.error is not None and result.error.type == "TooLarge", result.to_dict()
    assert result.error.details["limit"] == "cpu"
    assert "stopped: CPU time limit of 1 s" in result.error.message


def test_poll_reports_the_limit_that_stopped_a_background_process(
    sandbox: Sandbox, gateway_factory: Callable[..., Any]
) -> None:
    gateway = _gateway(sandbox, gateway_factory, child_cpu_s=1)
    started = gateway.execute_sync("builtin:shell:start", {"argv": ["python3", "-c", "while True: pass"]})
    assert started.ok and started.data is not None
    polled = None
    for _ in range(20):
        polled = gateway.execute_sync("builtin:shell:poll", {"process_id": started.data["process_id"], "wait_s": 1})
        if polled.data is not None and not polled.data["running"]:
            break
    assert polled is not None and polled.data is not None and polled.data["running"] is False
    assert polled.meta["limit"] == {"limit": "cpu", "message": "stopped: CPU time limit of 1 s"}


def test_memory_hog_is_stopped_by_the_memory_limit(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = _gateway(sandbox, gateway_factory, child_memory_bytes=256 << 20)
    hog = "x = bytearray(2 << 30); print(len(x))"
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["python3", "-c", hog], "timeout_s": 30})
    assert result.error is not None and result.error.type == "TooLarge", result.to_dict()
    assert result.error.details["limit"] == "memory"
    assert "stopped: memory limit of 256 MiB" in result.error.message
    ok = gateway.execute_sync("builtin:shell:run", {"argv": ["python3", "-c", "x = bytearray(16 << 20)"]})
    assert ok.ok, ok.to_dict()  # ordinary work fits


def test_file_size_limit(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = _gateway(sandbox, gateway_factory, child_file_bytes=1 << 20)
    code = "import signal; open('big.bin', 'wb').write(b'x' * (4 << 20))"
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["python3", "-c", code]})
    assert result.error is not None and result.error.details["limit"] == "file_size", result.to_dict()
    assert (sandbox.root / "big.bin").stat().st_size <= 1 << 20


# A fork bomb that would reach thousands of processes, but slowly enough (and bounded) that a
# broken limit cannot take the test machine down: each process forks every 10 ms, 12 rounds.
FORK_BOMB = """
import os, sys, time
for _ in range(12):
    try:
        os.fork()
    except OSError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
    time.sleep(0.01)
time.sleep(5)
"""


def test_fork_bomb_is_bounded_by_the_process_limit(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = _gateway(sandbox, gateway_factory, child_processes=16, child_cpu_s=5, child_memory_bytes=512 << 20)
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["python3", "-c", FORK_BOMB], "timeout_s": 30})
    assert result.error is not None and result.error.type == "TooLarge", result.to_dict()
    assert result.error.details["limit"] == "processes"
    assert "process limit of 16" in result.error.message
    assert _wait_none_left(gateway.processes.session) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_NO_NEW_PRIVS) is Linux only")
def test_children_run_with_no_new_privs(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = _gateway(sandbox, gateway_factory)
    code = "print([l for l in open('/proc/self/status') if l.startswith('NoNewPrivs')][0].split()[1])"
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["python3", "-c", code]})
    assert result.ok and result.data is not None, result.to_dict()
    assert result.data["stdout"].strip() == "1"
    assert result.meta["sandbox"]["no_new_privs"] is True and result.meta["sandbox"]["cpu_s"] == 300
    # Off in the policy, and no OS sandbox (Landlock and bubblewrap set no-new-privileges themselves).
    limits = {"shell_kill_grace_s": 1, "child_no_new_privs": False}
    off = gateway_factory(make_policy(sandbox.root, shell__executables=SHELL, shell__sandbox="off", limits=limits))
    plain = off.execute_sync("builtin:shell:run", {"argv": ["python3", "-c", code]})
    assert plain.ok and plain.data is not None and plain.data["stdout"].strip() == "0"


# -- cancellation -------------------------------------------------------------------------------
def test_timed_out_call_leaves_no_process_running(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    """A 1 s tool timeout on ``sh -c 'sleep 30 & sleep 30'``: Timeout, and the tree is gone."""
    gateway = _gateway(sandbox, gateway_factory, tool_timeout_s=1)
    background = gateway.execute_sync("builtin:shell:start", {"argv": ["sleep", "30"]})
    assert background.ok and background.data is not None
    started = time.monotonic()
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["sh", "-c", "sleep 30 & sleep 30"], "timeout_s": 60})
    assert result.error is not None and result.error.type == "Timeout", result.to_dict()
    assert time.monotonic() - started < 10
    session = gateway.processes.session
    # The background process's own tree (with the OS sandbox: bwrap and its command) carries its tag.
    background_tag = f"{session}:{background.data['process_id']}"

    def others() -> list[psutil.Process]:
        found = []
        for process in _tagged(session):
            try:
                if process.environ().get(ENV_TAG) != background_tag:
                    found.append(process)
            except psutil.Error:
                continue
        return found

    deadline = time.monotonic() + 5
    left = others()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = others()
    assert left == [], [p.cmdline() for p in left]
    # A process from builtin:shell:start is not the timed-out call's: it keeps running.
    polled = gateway.execute_sync("builtin:shell:poll", {"process_id": background.data["process_id"]})
    assert polled.data is not None and polled.data["running"] is True


def test_policy_rebinding_keeps_background_processes(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = _gateway(sandbox, gateway_factory)
    started = gateway.execute_sync("builtin:shell:start", {"argv": ["sleep", "30"]})
    assert started.ok and started.data is not None
    manager = gateway.processes
    gateway.bound = BoundPolicy(gateway.policy, sandbox.workspace.root, mode="strict")  # a mode change
    assert gateway.processes is manager
    polled = gateway.execute_sync("builtin:shell:poll", {"process_id": started.data["process_id"]})
    assert polled.data is not None and polled.data["running"] is True
