"""The workspace lease: one Aries at a time holds a workspace open.

The lease is an OS file lock (``filelock``, ``flock`` on POSIX) on ``<workspace>/.aries.lock``
plus a small holder record in ``<workspace>/.aries-session.json`` (pid, purpose, since) that
says *who* holds it.  The kernel releases the OS lock when the holder exits, however it
exits, so a SIGKILLed Aries never locks a workspace out: the next opener takes the lock,
finds the dead holder's record and reports "recovered after an unclean exit (pid N)".

Only long-lived sessions (the TUI, later ``ask``/``run``) take the lease.  One-shot CLI
commands (``tool call``, ``rag query``, ``artifact add``) run beside it and never touch it.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from services.clock import utc_now
from services.errors import AriesError
from services.files.atomic import atomic_write_text
from services.workspace.paths import LOCK_FILE, SESSION_FILE

if TYPE_CHECKING:
    from filelock import BaseFileLock


class Leased(Protocol):
    """What a lease needs of a workspace (``services.workspace.manager.Workspace`` is one): its name, for
    messages, and its folder, which holds the lock file and the holder record."""

    @property
    def name(self) -> str: ...

    @property
    def root(self) -> Path: ...


class WorkspaceBusy(AriesError):
    """The workspace is open in another Aries process (it holds the lease)."""

    code = "workspace_busy"
    exit_code = 1


def holder_record(root: Path) -> dict[str, Any] | None:
    """The holder record in ``root`` (it may be stale: the holder may have died)."""
    try:
        data = json.loads((Path(root) / SESSION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _since(record: dict[str, Any]) -> str:
    return str(record.get("since") or record.get("opened_at") or "an unknown time")


def busy_message(name: str, record: dict[str, Any] | None) -> str:
    if record is None:
        who = "pid unknown"
    else:
        purpose = record.get("purpose")
        who = f"pid {record.get('pid', '?')}{f', {purpose}' if purpose else ''}, since {_since(record)}"
    return (
        f"workspace {name} is open in another Aries ({who}); close it there, "
        f"or use `aries workspace close {name}` if that process is gone"
    )


def _file_lock(root: Path) -> BaseFileLock:
    from filelock import FileLock

    # thread_local=False: the App may release from another thread than the one that acquired.
    return FileLock(str(Path(root) / LOCK_FILE), blocking=False, thread_local=False)


class WorkspaceLease:
    """A held lease on one workspace; ``release()`` gives it back (idempotent)."""

    def __init__(
        self,
        workspace: Leased,
        purpose: str,
        lock: BaseFileLock,
        token: str,
        since: str,
        recovered: dict[str, Any] | None,
    ) -> None:
        self.workspace = workspace
        self.purpose = purpose
        self.pid = os.getpid()
        self.since = since
        self.recovered = recovered
        """The record of a previous holder that died without releasing (an unclean exit), if any."""
        self._lock = lock
        self._token = token
        self._guard = threading.Lock()
        self._released = False

    @property
    def held(self) -> bool:
        return not self._released

    def recovery_notice(self) -> str | None:
        """``recovered after an unclean exit (pid N)`` when the previous holder died holding it."""
        if self.recovered is None:
            return None
        return f"recovered after an unclean exit (pid {self.recovered.get('pid', '?')})"

    def release(self) -> None:
        with self._guard:
            if self._released:
                return
            self._released = True
            record = holder_record(self.workspace.root)
            if record is not None and record.get("token") == self._token:
                (self.workspace.root / SESSION_FILE).unlink(missing_ok=True)
            self._lock.release(force=True)

    def __enter__(self) -> WorkspaceLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self.held else "released"
        return f"WorkspaceLease({self.workspace.name!r}, purpose={self.purpose!r}, pid={self.pid}, {state})"


def acquire_lease(workspace: Leased, *, purpose: str) -> WorkspaceLease:
    """Take the workspace's lease now or raise :class:`WorkspaceBusy` naming the holder.

    Never waits.  A holder record left behind by a process that died holding the lease is
    reported on the returned lease (``recovered``) and replaced by this process's record.
    """
    from filelock import Timeout

    root = workspace.root
    root.mkdir(parents=True, exist_ok=True)
    lock = _file_lock(root)
    try:
        lock.acquire()
    except Timeout:
        raise WorkspaceBusy(
            busy_message(workspace.name, holder_record(root)), workspace=workspace.name, holder=holder_record(root)
        ) from None
    except OSError as exc:
        raise WorkspaceBusy(
            f"workspace {workspace.name}: cannot take its lock ({exc.strerror or exc})", workspace=workspace.name
        ) from None
    try:
        previous = holder_record(root)
        token = secrets.token_hex(8)
        since = utc_now()
        record = {"pid": os.getpid(), "purpose": purpose, "since": since, "token": token}
        atomic_write_text(root / SESSION_FILE, json.dumps(record) + "\n")
    except BaseException:
        lock.release(force=True)
        raise
    return WorkspaceLease(workspace, purpose, lock, token, since, previous)


def lease_holder(workspace: Leased) -> dict[str, Any] | None:
    """Who holds the lease right now (None if nobody), by probing the OS lock.

    The probe takes the lock for an instant when it is free; use :func:`open_elsewhere`
    where that must not happen (listing, one-shot commands).
    """
    from filelock import Timeout

    lock = _file_lock(workspace.root)
    try:
        lock.acquire()
    except Timeout:
        return holder_record(workspace.root) or {"pid": None}
    except OSError:
        return None
    lock.release(force=True)
    return None


def open_elsewhere(workspace: Leased) -> dict[str, Any] | None:
    """The holder record if a live process other than this one holds it (no lock taken)."""
    record = holder_record(workspace.root)
    if record is None or record.get("pid") == os.getpid() or not pid_alive(record.get("pid")):
        return None
    return record


def clear_stale(workspace: Leased) -> dict[str, Any] | None:
    """If nobody holds the lease, remove a leftover holder record and return it.

    Raises :class:`WorkspaceBusy` when a process holds the lease.
    """
    lease = acquire_lease(workspace, purpose="close")
    lease.release()
    return lease.recovered
