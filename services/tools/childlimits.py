"""Resource limits for shell children: rlimits and no-new-privileges, and reading back which
limit stopped a command.

The policy's ``limits:`` section sets ``child_memory_bytes`` (``RLIMIT_DATA`` on Linux, which
counts the memory a process can write to but not address space it only reserves; ``RLIMIT_AS``
elsewhere), ``child_cpu_s`` (``RLIMIT_CPU``: SIGXCPU at the limit, SIGKILL one second later),
``child_file_bytes`` (``RLIMIT_FSIZE``: SIGXFSZ), ``child_processes`` (``RLIMIT_NPROC``, counted
as headroom over the processes the user already has, because the kernel counts per user) and
``child_no_new_privs`` (``prctl(PR_SET_NO_NEW_PRIVS)``: set-uid programs cannot gain privileges).
A value of 0 turns a limit off.

The kernel does not apply ``RLIMIT_NPROC`` to root (or with CAP_SYS_RESOURCE); there the
process manager enforces the process limit itself by watching the tree (``watchdog``).  Where
``resource`` or ``prctl`` do not exist (Windows, macOS for prctl) the limit is skipped and the
skip is recorded in the result's ``meta.sandbox`` notes; nothing assumes Linux.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_PR_SET_NO_NEW_PRIVS = 38
_MEMORY_WORDS = ("MemoryError", "Cannot allocate memory", "out of memory", "bad_alloc", "memory exhausted")


@dataclass
class ChildLimits:
    """What one child gets, computed in the parent (the child only makes system calls)."""

    memory_bytes: int = 0
    cpu_s: int = 0
    file_bytes: int = 0
    processes: int = 0  # processes the tree may hold; 0 = unlimited
    nproc_rlimit: int = 0  # the RLIMIT_NPROC value (user's processes + headroom); 0 = not set
    no_new_privs: bool = False
    watchdog_processes: bool = False  # the manager enforces ``processes`` (root: rlimit ignored)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        return {
            "memory_bytes": self.memory_bytes,
            "cpu_s": self.cpu_s,
            "file_bytes": self.file_bytes,
            "processes": self.processes,
            "process_limit_by": "watchdog" if self.watchdog_processes else ("rlimit" if self.nproc_rlimit else None),
            "no_new_privs": self.no_new_privs,
            "notes": list(self.notes),
        }


def plan(limits: Any) -> ChildLimits:
    """The limits for the next child from the policy's ``Limits``."""
    out = ChildLimits(
        memory_bytes=int(limits.child_memory_bytes),
        cpu_s=int(limits.child_cpu_s),
        file_bytes=int(limits.child_file_bytes),
        processes=int(limits.child_processes),
    )
    try:
        import resource  # noqa: F401
    except ImportError:  # pragma: no cover - Windows
        out.notes.append("rlimits are not available on this platform; memory, CPU and file limits skipped")
        out.memory_bytes = out.cpu_s = out.file_bytes = 0
        out.watchdog_processes = out.processes > 0
    else:
        if out.processes > 0:
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                out.watchdog_processes = True
                out.notes.append("running as root: RLIMIT_NPROC is not enforced, the process limit is watched")
            else:
                out.nproc_rlimit = _user_processes() + out.processes
    if limits.child_no_new_privs:
        if sys.platform.startswith("linux") and _prctl() is not None:
            out.no_new_privs = True
        else:
            out.notes.append(f"no-new-privileges is not available on {sys.platform}; skipped")
    return out


def _user_processes() -> int:
    import psutil

    uid = os.getuid()
    count = 0
    for process in psutil.process_iter(["uids"]):
        uids = process.info.get("uids")
        if uids is not None and uids.real == uid:
            count += 1
    return count


_PRCTL: Any = None


def _prctl() -> Any:
    global _PRCTL
    if _PRCTL is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _PRCTL = libc.prctl
        except (OSError, AttributeError):
            _PRCTL = False
    return _PRCTL or None


def preexec(child: ChildLimits) -> Callable[[], None] | None:
    """A ``preexec_fn`` that applies ``child`` (everything it needs is resolved beforehand)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    memory_kind = getattr(resource, "RLIMIT_DATA", None) if sys.platform.startswith("linux") else None
    memory_kind = memory_kind if memory_kind is not None else getattr(resource, "RLIMIT_AS", None)
    settings: list[tuple[int, tuple[int, int]]] = []
    if child.memory_bytes and memory_kind is not None:
        settings.append((memory_kind, (child.memory_bytes, child.memory_bytes)))
    if child.cpu_s:
        settings.append((resource.RLIMIT_CPU, (child.cpu_s, child.cpu_s + 1)))
    if child.file_bytes:
        settings.append((resource.RLIMIT_FSIZE, (child.file_bytes, child.file_bytes)))
    nproc = getattr(resource, "RLIMIT_NPROC", None)
    if child.nproc_rlimit and nproc is not None:
        settings.append((nproc, (child.nproc_rlimit, child.nproc_rlimit)))
    prctl = _prctl() if child.no_new_privs else None
    setrlimit = resource.setrlimit

    def apply() -> None:
        for kind, values in settings:
            setrlimit(kind, values)
        if prctl is not None and prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError("prctl(PR_SET_NO_NEW_PRIVS) failed")

    return apply


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"


def stopped_by(
    child: ChildLimits, returncode: int | None, stderr_tail: str, *, watchdog_hit: bool
) -> dict[str, str] | None:
    """Which limit stopped a finished command, if one did: ``{"limit": ..., "message": ...}``."""
    if watchdog_hit:
        return {"limit": "processes", "message": f"stopped: process limit of {child.processes} processes"}
    if returncode is None:
        return None
    sigxcpu = getattr(signal, "SIGXCPU", None)
    sigxfsz = getattr(signal, "SIGXFSZ", None)
    if child.cpu_s and sigxcpu is not None and returncode == -int(sigxcpu):
        return {"limit": "cpu", "message": f"stopped: CPU time limit of {child.cpu_s} s"}
    file_too_large = returncode != 0 and "File too large" in stderr_tail  # SIGXFSZ ignored: EFBIG
    if child.file_bytes and ((sigxfsz is not None and returncode == -int(sigxfsz)) or file_too_large):
        return {"limit": "file_size", "message": f"stopped: file size limit of {_size(child.file_bytes)}"}
    if child.memory_bytes and returncode != 0 and any(word in stderr_tail for word in _MEMORY_WORDS):
        return {"limit": "memory", "message": f"stopped: memory limit of {_size(child.memory_bytes)}"}
    if child.nproc_rlimit and returncode != 0 and "Resource temporarily unavailable" in stderr_tail:
        return {"limit": "processes", "message": f"stopped: process limit of {child.processes} processes"}
    return None
