"""Reading an SQLite database where nothing can be written: a read-only file system or a folder
this user cannot write.  Used for an index's manifest (:mod:`services.retrieval.readonly`) and for
``audit.db`` (:func:`services.audit.db.open_audit_db`).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path


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


__all__ = ["UnreadableWal", "connect_readonly", "writable"]
