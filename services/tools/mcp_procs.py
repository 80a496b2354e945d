"""Process-table helpers of the MCP hub (psutil, imported when used)."""

from __future__ import annotations

import contextlib
import os


def process_alive(pid: int | None) -> bool:
    """False once ``pid`` has exited (a zombie counts as exited); True for ``None`` (not watched)."""
    if pid is None:
        return True
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def new_group_leader(before: set[int]) -> int | None:
    """The pid of the server just started: a new child of ours that leads its own process group."""
    import psutil

    for child in psutil.Process().children():
        if child.pid in before:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            if os.getpgid(child.pid) == child.pid:
                return child.pid
    return None


__all__ = ["new_group_leader", "process_alive"]
