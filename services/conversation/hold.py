"""One conversation, one writer at a time: the per-conversation hold.

A conversation is appended to by one process at a time. The TUI holds the conversation it shows
(switching with ``/new``, ``/resume``, ``/fork`` moves the hold) and ``aries ask -c`` holds its
conversation for the duration of its turn; a second writer is refused with :class:`ConversationBusy`
naming the holder's pid, so two histories never interleave in one file.

The hold is the workspace lease's approach (``services.workspace.leases``) for one conversation: an OS file
lock (``filelock``, ``flock`` on POSIX) on ``transcripts/.holds/<id>.lock`` plus a holder record
``transcripts/.holds/<id>.json`` (pid, purpose, since) that says *who* holds it. The kernel releases
the lock when the holder exits, however it exits, so a SIGKILLed holder never blocks a conversation:
the next writer takes the lock and replaces the dead holder's record. The lock is per open file, so
two holds of one conversation in one process are refused too.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.clock import utc_now
from services.errors import AriesError
from services.files.atomic import atomic_write_text

if TYPE_CHECKING:
    from filelock import BaseFileLock

HOLDS_DIR = ".holds"
"""In ``transcripts/``: the lock and holder record of every held conversation (never a transcript)."""

EXIT_CONVERSATION_BUSY = 5
"""The exit code of a refused second writer (``app.cli._common.EXIT_CONVERSATION_BUSY``)."""


class ConversationBusy(AriesError):
    """The conversation is being written by another Aries (it holds the conversation)."""

    code = "conversation_busy"
    exit_code = EXIT_CONVERSATION_BUSY


def _paths(transcripts_dir: Path, conversation_id: str) -> tuple[Path, Path]:
    holds = Path(transcripts_dir) / HOLDS_DIR
    return holds / f"{conversation_id}.lock", holds / f"{conversation_id}.json"


def holder_record(transcripts_dir: Path, conversation_id: str) -> dict[str, Any] | None:
    """The holder record of ``conversation_id`` (it may be stale: the holder may have died)."""
    try:
        data = json.loads(_paths(transcripts_dir, conversation_id)[1].read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def busy_message(conversation_id: str, record: dict[str, Any] | None) -> str:
    """``conversation X is open in another Aries (pid N); close it there, or …`` (one line)."""
    pid = record.get("pid", "?") if record is not None else "unknown"
    return (
        f"conversation {conversation_id} is open in another Aries (pid {pid}); "
        "close it there, or start a new one without -c"
    )


class ConversationHold:
    """A held conversation; ``release()`` gives it back (idempotent)."""

    def __init__(self, transcripts_dir: Path, conversation_id: str, purpose: str, lock: BaseFileLock) -> None:
        self.transcripts_dir = Path(transcripts_dir)
        self.conversation_id = conversation_id
        self.purpose = purpose
        self.pid = os.getpid()
        self._lock = lock
        self._token = secrets.token_hex(8)
        self._guard = threading.Lock()
        self._released = False

    def _write_record(self) -> None:
        record = {"pid": self.pid, "purpose": self.purpose, "since": utc_now(), "token": self._token}
        atomic_write_text(_paths(self.transcripts_dir, self.conversation_id)[1], json.dumps(record) + "\n")

    @property
    def held(self) -> bool:
        return not self._released

    def release(self) -> None:
        with self._guard:
            if self._released:
                return
            self._released = True
            try:
                record = holder_record(self.transcripts_dir, self.conversation_id)
                if record is not None and record.get("token") == self._token:
                    _paths(self.transcripts_dir, self.conversation_id)[1].unlink(missing_ok=True)
            finally:
                self._lock.release(force=True)

    def __enter__(self) -> ConversationHold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self.held else "released"
        return f"ConversationHold({self.conversation_id!r}, purpose={self.purpose!r}, pid={self.pid}, {state})"


def held_elsewhere(transcripts_dir: Path, conversation_id: str) -> dict[str, Any] | None:
    """The holder record when a live process other than this one holds the conversation (no lock
    taken: a write-time check; a record left by a dead holder does not count)."""
    from services.workspace.leases import pid_alive

    if not (Path(transcripts_dir) / HOLDS_DIR).is_dir():
        return None
    record = holder_record(transcripts_dir, conversation_id)
    if record is None or record.get("pid") == os.getpid() or not pid_alive(record.get("pid")):
        return None
    return record


def check_writer(transcripts_dir: Path, conversation_id: str) -> None:
    """Raise :class:`ConversationBusy` when another live Aries holds the conversation: a surface that
    does not hold what it writes (a one-shot ``tool call``, a plan run on the last conversation) never
    appends between the holder's entries."""
    record = held_elsewhere(transcripts_dir, conversation_id)
    if record is not None:
        raise ConversationBusy(busy_message(conversation_id, record), conversation=conversation_id, holder=record)


def hold_conversation(transcripts_dir: Path, conversation_id: str, *, purpose: str) -> ConversationHold:
    """Hold ``conversation_id`` now or raise :class:`ConversationBusy` naming the holder's pid.

    Never waits. A record left by a holder that died is replaced by this process's record."""
    from filelock import FileLock, Timeout

    lock_path, _record = _paths(transcripts_dir, conversation_id)
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        # thread_local=False: the App may release from another thread than the one that acquired.
        lock = FileLock(str(lock_path), blocking=False, thread_local=False)
        lock.acquire()
    except Timeout:
        record = holder_record(transcripts_dir, conversation_id)
        raise ConversationBusy(
            busy_message(conversation_id, record), conversation=conversation_id, holder=record
        ) from None
    except OSError as exc:
        raise ConversationBusy(
            f"conversation {conversation_id}: cannot take its lock ({exc.strerror or exc})",
            conversation=conversation_id,
        ) from None
    hold = ConversationHold(transcripts_dir, conversation_id, purpose, lock)
    try:
        hold._write_record()
    except BaseException:
        lock.release(force=True)
        raise
    return hold


__all__ = [
    "EXIT_CONVERSATION_BUSY",
    "HOLDS_DIR",
    "ConversationBusy",
    "ConversationHold",
    "busy_message",
    "check_writer",
    "held_elsewhere",
    "hold_conversation",
    "holder_record",
]
