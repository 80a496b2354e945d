"""Helpers for the MCP provider's tests: policies that declare servers, the servers' commands, and
process-table checks (psutil)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from services.policy import Policy, parse_policy
from tests.tools.conftest import policy_data

SERVERS_DIR = Path(__file__).resolve().parent / "mcp_servers"
MISBEHAVING = SERVERS_DIR / "misbehaving.py"


def misbehaving(*extra: str, **settings: Any) -> dict[str, Any]:
    """The server declaration of ``misbehaving.py`` (1 s call time-out unless given)."""
    return {"command": sys.executable, "args": [str(MISBEHAVING), *extra], "timeout_s": 1, **settings}


def time_server(**settings: Any) -> dict[str, Any]:
    """``mcp-server-time`` (PyPI), run from this venv, with UTC as its local time zone."""
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"], **settings}


def filesystem_server(root: Path, **settings: Any) -> dict[str, Any]:
    """``@modelcontextprotocol/server-filesystem`` (npm), allowed to work in ``root`` only."""
    sys.path.insert(0, str(SERVERS_DIR))
    try:
        from install import install  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(SERVERS_DIR))
    return {"command": "node", "args": [str(install()), str(root)], **settings}


def mcp_policy(
    root: Path | str,
    servers: dict[str, dict[str, Any]],
    *,
    enabled: bool = True,
    classes: dict[str, str] | None = None,
    tools: dict[str, Any] | None = None,
    mode: str = "guide",
    **extra: Any,
) -> Policy:
    data = policy_data(root, **extra)
    data["mode"] = mode
    data["providers"] = {"builtin": {"enabled": True}, "mcp": {"enabled": enabled, "servers": servers}}
    data["tool_classes"] = {**data["tool_classes"], **(classes or {})}
    if tools:
        data["tools"] = tools
    return parse_policy(json.dumps(data), source="<mcp-test-policy>")


def own_descendants() -> list[psutil.Process]:
    """The live (not zombie) descendants of this test process."""
    alive = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                proc.info = {"cmdline": proc.cmdline()}
                alive.append(proc)
        except psutil.Error:
            pass
    return alive


def running_with(marker: str) -> list[psutil.Process]:
    """Live processes anywhere on the machine whose command line mentions ``marker``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(proc.info["cmdline"] or ()):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def gone(pid: int, timeout: float = 10.0) -> bool:
    """True once ``pid`` has exited (or is a zombie waiting to be reaped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def read_pids(path: Path, timeout: float = 10.0) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file():
            server, child = path.read_text().split()
            return int(server), int(child)
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written")
