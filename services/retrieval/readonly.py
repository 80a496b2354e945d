"""Reading an index where nothing can be written: a read-only file system (a read-only mount,
a CD, an NFS ``ro`` export) or a folder this user cannot write (``chmod -R a-w``).

What each part does there (see :mod:`services.retrieval.store`):

* the store lock (:mod:`services.retrieval.store_locks`): a reader whose lock file cannot be
  created or opened because of this takes no lock (nobody can write there either); a lock
  file that exists is opened read-only and locked as usual (``flock`` needs no write access);
* the manifest (SQLite, WAL) is opened read-only by :func:`connect_readonly`;
* Tantivy takes a lock file to open its index: when it cannot, the keyword index is rebuilt
  in memory from the manifest (same chunks, so the same BM25 answers);
* the embedded Chroma store writes to its own SQLite file when it opens, so it does not open:
  queries are keyword-only, with the vector store's warning (status ``unavailable``);
* the retrieval audit row cannot be written: the query still answers, ``audited`` is false,
  and the first such query of an engine says so (see :mod:`services.retrieval.engine`).

Any other error is never swallowed: these fallbacks apply only when the folder is not
writable (:func:`writable`).
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from services.retrieval.errors import IndexStorageError
from services.retrieval.faults import DENIED, READ_ONLY, diagnose, storage_error

FOLDER_NOT_WRITABLE = "its folder cannot be written (permission denied)"

REFUSALS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT})
"""The errnos of a file that cannot be created or opened for writing where nothing can be written
(ENOENT: the lock folder itself is missing and cannot be made)."""


def writable(path: Path) -> bool:
    """Whether this process may write ``path`` (a file, or a folder: create files in it).

    ``path`` or, if it does not exist, its nearest existing parent.  ``False`` on a read-only
    file system whatever the permissions (``access`` says ``EROFS``).
    """
    for candidate in (Path(path), *Path(path).parents):
        if candidate.exists():
            if os.access in os.supports_effective_ids:
                return os.access(candidate, os.W_OK, effective_ids=True)
            return os.access(candidate, os.W_OK)  # pragma: no cover - platforms without effective ids
    return False


def refusal(exc: OSError, folder: Path) -> bool:
    """``exc`` is a file that cannot be created/opened for writing because ``folder`` is not writable."""
    return exc.errno in REFUSALS and not writable(folder)


def why_unwritable(path: Path) -> str:
    """``the file system is read-only``, or that the folder cannot be written (permissions)."""
    return READ_ONLY if diagnose(path) == READ_ONLY else FOLDER_NOT_WRITABLE


def not_writable(index: str, directory: Path | None, action: str) -> IndexStorageError:
    """The typed error of a write to an index whose folder cannot be written."""
    reason = READ_ONLY if directory is not None and diagnose(directory) == READ_ONLY else DENIED
    return storage_error(index, reason, action)


class UnreadableWal(Exception):
    """A WAL database whose ``-wal`` holds commits but whose ``-shm`` is missing and cannot be
    created: SQLite can read those commits only where it can write."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path.name}-wal holds commits that can only be read with {path.name}-shm")
        self.path = path


_PROBE = "SELECT COUNT(*) FROM sqlite_master"


def connect_readonly(path: Path, *, timeout: float = 10.0) -> sqlite3.Connection:
    """A read-only connection to the SQLite database ``path`` (WAL or not), usable from any thread.

    SQLite reads a WAL database through its ``-shm`` file (https://sqlite.org/wal.html, "Read-Only
    Databases"): ``mode=ro`` works when the ``-wal`` and ``-shm`` files exist (a writer was killed,
    or is still open elsewhere) or can be created.  When they cannot, and the database and its
    folder are not writable (nobody can change it here), ``immutable=1`` reads the main file alone,
    without locks — which is only right when no ``-wal`` holds commits: a non-empty ``-wal`` left
    without its ``-shm`` is :class:`UnreadableWal`, never a silently older state.
    Raises ``sqlite3.Error`` or :class:`UnreadableWal`.
    """
    uri = Path(path).absolute().as_uri()
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout, check_same_thread=False)
    try:
        db.execute(_PROBE).fetchone()
        return db
    except sqlite3.OperationalError:
        db.close()
        if writable(path) or writable(Path(path).parent):
            raise
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise UnreadableWal(Path(path))
    db = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=timeout, check_same_thread=False)
    try:
        db.execute(_PROBE).fetchone()
    except BaseException:
        db.close()
        raise
    return db
