"""Storage faults of an index (disk full, read-only file system, permission denied) as one typed error.

SQLite, Chroma (Rust) and Tantivy (Rust) each report a full or read-only disk in their own
words, often as a generic "disk I/O error" — or in none: a Chroma write that runs out of space
in its compaction says ``Error in compaction: Failed to apply logs to the hnsw segment writer``.
:func:`storage_guard` turns any of them into one :class:`~services.retrieval.errors.IndexStorageError`
line that names the index, the cause and what to do; the index keeps its previous state (writes
are journalled: see :mod:`services.retrieval.store`).  When the words are vague — and every error
of a store library is taken as vague — the file system itself is asked (``statvfs``: read-only
flag, free space).  A store error that is not a storage fault is still one line (which store
failed, its words, what to do), never a traceback: :func:`store_part` says which store raised it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from services.errors import AriesError
from services.retrieval.errors import IndexStorageError, IngestError

LOW_SPACE = 1024 * 1024
"""Free bytes under which a vague I/O error is put down to a full disk."""

_FULL = ("no space left", "disk is full", "database or disk is full", "quota exceeded", "enospc")
_READ_ONLY = ("read-only file system", "readonly database", "read only file system", "erofs")
_DENIED = ("permission denied", "access is denied")
_VAGUE = ("disk i/o error", "i/o error", "io error", "unable to open database file", "input/output error")

DISK_FULL = "the disk is full"
READ_ONLY = "the file system is read-only"
DENIED = "permission denied"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _existing(path: Path) -> Path | None:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return None


def diagnose(directory: Path | None) -> str | None:
    """What the file system holding ``directory`` says: read-only, full, or nothing wrong."""
    if directory is None:
        return None
    where = _existing(Path(directory))
    if where is None:
        return None
    try:
        info = os.statvfs(where)
    except (OSError, AttributeError):  # pragma: no cover - statvfs is POSIX
        return None
    if info.f_flag & getattr(os, "ST_RDONLY", 1):
        return READ_ONLY
    if info.f_bavail * info.f_frsize < LOW_SPACE:
        return DISK_FULL
    return None


_STORE_MODULES = {"store_lexical.py": "the keyword index (Tantivy)", "store_writer.py": "the keyword index (Tantivy)"}


def store_part(exc: BaseException) -> str | None:
    """Which store raised ``exc`` — the vector store (Chroma), the manifest (SQLite), the keyword
    index (Tantivy: a ``ValueError`` raised inside the modules that call it) or the file system —
    or None for anything else."""
    for link in _chain(exc):
        if type(link).__module__.split(".")[0] == "chromadb":
            return "the vector store (Chroma)"
        if isinstance(link, sqlite3.Error):
            return "the manifest (SQLite)"
        if isinstance(link, OSError):
            return "the file system"
        if isinstance(link, ValueError) and link.__traceback__ is not None:
            frame = link.__traceback__
            while frame.tb_next is not None:
                frame = frame.tb_next
            part = _STORE_MODULES.get(Path(frame.tb_frame.f_code.co_filename).name)
            if part is not None:
                return part
    return None


def storage_fault(exc: BaseException, directory: Path | None) -> str | None:
    """The storage cause behind ``exc`` (:data:`DISK_FULL`, :data:`READ_ONLY`, :data:`DENIED`), or None."""
    vague = store_part(exc) is not None and not isinstance(exc, OSError)
    for link in _chain(exc):
        if isinstance(link, OSError) and link.errno is not None:
            if link.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
                return DISK_FULL
            if link.errno == errno.EROFS:
                return READ_ONLY
            if link.errno in (errno.EACCES, errno.EPERM):
                return diagnose(directory) or DENIED
            vague = True
        text = str(link).lower()
        if any(word in text for word in _FULL):
            return DISK_FULL
        if any(word in text for word in _READ_ONLY):
            return READ_ONLY
        if any(word in text for word in _DENIED):
            return diagnose(directory) or DENIED
        if isinstance(link, sqlite3.OperationalError) or any(word in text for word in _VAGUE):
            vague = True
    return diagnose(directory) if vague else None


def _hint(reason: str) -> str:
    if reason == DISK_FULL:
        return "free some space and run it again"
    if reason == READ_ONLY:
        return "make the file system writable and run it again"
    return "check the index folder's permissions and run it again"


@contextlib.contextmanager
def storage_guard(index: str, directory: Path | None, action: str) -> Iterator[None]:
    """Turn a storage fault raised inside into :class:`IndexStorageError`, and any other error of a
    store (:func:`store_part`) into one line too; other errors pass."""
    try:
        yield
    except (IndexStorageError, IngestError):
        raise
    except Exception as exc:
        if isinstance(exc, AriesError) and not isinstance(exc.__cause__ or exc.__context__, Exception):
            reason = storage_fault(exc, None)  # only what its own words say
        else:
            reason = storage_fault(exc, directory)
        if reason is not None:
            raise storage_error(index, reason, action) from None
        part = None if isinstance(exc, AriesError) else store_part(exc)
        if part is None:
            raise
        words = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise IndexStorageError(
            f"index {index!r}: cannot {action}: {part} failed: {words}; the index keeps its previous state "
            f"(run it again; if it fails again, rebuild its vectors from the manifest: aries rag index repair {index})",
            index=index,
            reason="store error",
        ) from None


def storage_error(index: str, reason: str, action: str) -> IndexStorageError:
    """The one line for a storage fault ``reason`` while trying to ``action`` index ``index``."""
    return IndexStorageError(
        f"index {index!r}: cannot {action}: {reason}; the index keeps its previous state ({_hint(reason)})",
        index=index,
        reason=reason,
    )
