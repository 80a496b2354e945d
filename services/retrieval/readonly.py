"""Reading an index where nothing can be written: a read-only file system (a read-only mount,
a CD, an NFS ``ro`` export) or a folder this user cannot write (``chmod -R a-w``).

What each part does there (see :mod:`services.retrieval.store`):

* the store lock (:mod:`services.retrieval.store_locks`): a reader whose lock file cannot be
  created or opened because of this takes no lock (nobody can write there either); a lock
  file that exists is opened read-only and locked as usual (``flock`` needs no write access);
* the manifest (SQLite, WAL) is opened read-only by :func:`services.sqlite.readonly.connect_readonly`;
* Tantivy takes a lock file to open its index: when it cannot, the keyword index is rebuilt
  in memory from the manifest (same chunks, so the same BM25 answers);
* the embedded Chroma store writes to its own SQLite file when it opens, so it does not open:
  queries are keyword-only, with the vector store's warning (status ``unavailable``);
* the retrieval audit row cannot be written: the query still answers, ``audited`` is false,
  and the first such query of an engine says so (see :mod:`services.retrieval.engine`).

Any other error is never swallowed: these fallbacks apply only when the folder is not
writable (:func:`services.sqlite.readonly.writable`).
"""

from __future__ import annotations

import errno
from pathlib import Path

from services.retrieval.errors import IndexStorageError
from services.retrieval.faults import DENIED, READ_ONLY, diagnose, storage_error
from services.sqlite.readonly import writable

FOLDER_NOT_WRITABLE = "its folder cannot be written (permission denied)"

REFUSALS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT})
"""The errnos of a file that cannot be created or opened for writing where nothing can be written
(ENOENT: the lock folder itself is missing and cannot be made)."""


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
