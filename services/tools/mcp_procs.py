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


def resolve_command(command: str) -> str:
    """A bare server command (``mcp-server-time``) is looked up on ``PATH``, then beside the Python
    that runs Aries, so a server installed into Aries's own ``.venv`` is found without activating
    it. A path, or a name found nowhere, is returned as it is (the start then fails naming it)."""
    import shutil
    import sys
    from pathlib import Path

    if os.sep in command or shutil.which(command) is not None:
        return command
    beside = Path(sys.executable).parent / command
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else command
