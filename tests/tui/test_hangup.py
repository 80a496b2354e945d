"""Closing the terminal (SIGHUP) or SIGTERM ends Aries as a quit does: the workspace is not left marked
open as after a crash (issue 34 item 7). A real ``aries`` in a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.workspace.leases import holder_record, open_elsewhere
from services.workspace.manager import Workspace

REPO = Path(__file__).resolve().parents[2]


def _read_until(fd: int, marker: bytes, deadline: float) -> bytes:
    seen = b""
    while marker not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{marker!r} never appeared; the screen ended with {seen[-400:]!r}")
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return seen


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_a_closed_terminal_leaves_the_workspace_closed(aries_home: Path, sig: signal.Signals) -> None:
    env = {**os.environ, "ARIES_HOME": str(aries_home), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    env.pop("ARIES_MODEL", None)
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "-w", "demo"],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=env,
        cwd=REPO,
        start_new_session=True,
    )
    os.close(secondary)
    try:
        _read_until(primary, b"new conversation", time.monotonic() + 90)
        workspace = Workspace(aries_home / "workspaces" / "demo", "demo")
        assert open_elsewhere(workspace) is not None, "the running Aries holds the workspace"
        proc.send_signal(sig)
        assert proc.wait(timeout=30) is not None
        assert open_elsewhere(workspace) is None
        assert holder_record(workspace.root) is None, "the workspace is left marked open, as after a crash"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(primary)
