"""Cross-process locks of one index: one writer at a time, and the stores used by one party at a time.

Two ``filelock`` locks per index live in ``<workspace>/indexes/.locks/`` (outside the index's
own folder, so they exist before the index does and survive a drop):

``NAME.writer.lock``
    held by an ingest (``index add``) from before the index is created until its last batch
    is searchable by keyword, then for each step of the vectors written behind (see
    :mod:`services.retrieval.backfill`; ``NAME.vectors.lock`` makes one process the filler):
    one writer per index across processes and threads.  Who holds it is written
    to ``NAME.writer.json`` (pid, since) so that a waiting writer can say so.
``NAME.store.lock``
    held while the embedded Chroma store or the Tantivy files are opened, read or written:
    for one query or for one batch write, never for a whole ingest.  The embedded Chroma
    ``PersistentClient`` is not safe with two processes (a reader's client replays the
    write log into its own HNSW copy and persists it over the writer's files), so it is only
    ever used under this lock, and a client opened before another process wrote is reopened.

Both are exclusive between processes and between threads, and re-entrant in the thread that
holds them; one lock object per path is shared by every user in the process.  The writer lock
is a ``filelock.FileLock`` (polled, so a waiting writer can report and be cancelled); the store
lock is a blocking ``flock`` (see :class:`_BlockingLock`), so a writer waiting between two
queries gets it as soon as the query ends.  The kernel drops both when their process dies
(``kill -9`` included): a lock is never left behind.  Where the lock folder cannot be written
(a read-only file system), a reader goes on without the store lock and a writer gets the error
(see :mod:`services.retrieval.readonly`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.clock import utc_now
from services.files.atomic import atomic_write_text
from services.retrieval.errors import IndexBusy
from services.workspace.paths import INDEX_LOCKS_DIR

if TYPE_CHECKING:
    from filelock import FileLock

LOCKS_DIR = INDEX_LOCKS_DIR
DEFAULT_WRITE_WAIT_S = 600.0
"""How long ``index add`` waits for another writer of the same index before it gives up."""
POLL_S = 0.2

_registry: dict[str, FileLock] = {}
_registry_lock = threading.Lock()


class WaitCancelled(Exception):
    """The cancel event was set while waiting for another writer."""


def _file_lock(path: Path) -> FileLock:
    from filelock import FileLock

    key = os.path.abspath(path)
    with _registry_lock:
        lock = _registry.get(key)
        if lock is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(key, thread_local=True)
            _registry[key] = lock
        return lock


class _BlockingLock:
    """An exclusive lock file taken with a *blocking* ``flock`` (re-entrant per thread).

    The store lock is taken and released many times a second by queries; ``filelock`` polls
    (try, sleep, try), and a polling writer can starve behind a busy reader.  A blocked
    ``flock`` is woken by the kernel as soon as the file is unlocked.  Where ``fcntl`` is
    missing (Windows), ``filelock`` is used instead.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._folder_made = False

    def acquire(self, *, reader: bool = False) -> None:
        """Take the lock (blocking).  A ``reader`` whose lock file cannot be created or opened
        because its folder cannot be written (a read-only file system, ``chmod a-w``) goes on
        without it: nobody can write there either.  Anyone else gets the ``OSError``."""
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            return
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            _file_lock(self.path).acquire()
            self._local.fd = None
        else:
            self._local.fd = self._flock(fcntl, reader)
        self._local.depth = 1

    def _flock(self, fcntl: Any, reader: bool) -> int | bool:
        """The locked descriptor, or ``False`` for a reader that goes on without a lock."""
        try:
            if not self._folder_made:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._folder_made = True
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            from services.retrieval.readonly import refusal

            if not reader or not refusal(exc, self.path.parent):
                raise
            try:  # an existing lock file is still locked: flock needs no write access
                fd = os.open(self.path, os.O_RDONLY)
            except OSError as again:
                if again.errno in (errno.ENOENT, errno.EACCES, errno.EPERM):
                    return False
                raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            os.close(fd)
            if reader and exc.errno == errno.EBADF:  # NFS emulates flock with write locks
                return False
            raise
        except BaseException:
            os.close(fd)
            raise
        return fd

    def release(self) -> None:
        self._local.depth -= 1
        if self._local.depth:
            return
        fd = self._local.fd
        if fd is False:  # a reader that went on without the lock
            return
        if fd is None:  # pragma: no cover - Windows
            _file_lock(self.path).release()
            return
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


_store_locks: dict[str, _BlockingLock] = {}


def _store_lock(path: Path) -> _BlockingLock:
    key = os.path.abspath(path)
    with _registry_lock:
        lock = _store_locks.get(key)
        if lock is None:  # its folder is made when it is first taken (a reader may not be able to)
            lock = _store_locks[key] = _BlockingLock(path)
        return lock


class IndexLocks:
    """The writer and store locks of index ``name`` under ``indexes_dir``."""

    def __init__(self, indexes_dir: Path, name: str) -> None:
        self.name = name
        self.directory = Path(indexes_dir) / LOCKS_DIR
        self.writer_path = self.directory / f"{name}.writer.lock"
        self.store_path = self.directory / f"{name}.store.lock"
        self.holder_path = self.directory / f"{name}.writer.json"
        self.filler_path = self.directory / f"{name}.vectors.lock"

    # -- store lock: one query or one batch write --------------------------------------------
    @contextlib.contextmanager
    def store(self, *, reader: bool = False) -> Iterator[None]:
        """Hold the store lock; a ``reader`` goes on without it where it cannot be created
        (see :meth:`_BlockingLock.acquire`)."""
        lock = _store_lock(self.store_path)
        lock.acquire(reader=reader)
        try:
            yield
        finally:
            lock.release()

    # -- filler lock: the one process writing the vectors that follow the keywords -----------
    @contextlib.contextmanager
    def filler(self) -> Iterator[bool]:
        """Try to be the one that fills in the index's pending vectors (``NAME.vectors.lock``):
        yields True when taken (held until the block ends), False when another Aries (or
        thread) does it now, which is then left to finish it.  Each batch it writes takes the
        writer lock on its own (:mod:`services.retrieval.backfill`)."""
        from filelock import Timeout

        lock = _file_lock(self.filler_path)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            yield False
            return
        try:
            yield True
        finally:
            lock.release()

    # -- writer lock: a whole ingest ---------------------------------------------------------
    def holder(self) -> str:
        """``pid N`` of the process that holds the writer lock (as it recorded), or ``unknown pid``."""
        try:
            data = json.loads(self.holder_path.read_text(encoding="utf-8"))
            return f"pid {int(data['pid'])}"
        except (OSError, ValueError, KeyError, TypeError):
            return "unknown pid"

    def try_writer(self) -> bool:
        """Take the writer lock if it is free now (re-entrant); the caller must :meth:`release_writer`."""
        from filelock import Timeout

        try:
            _file_lock(self.writer_path).acquire(timeout=0)
        except Timeout:
            return False
        return True

    def release_writer(self) -> None:
        _file_lock(self.writer_path).release()

    @contextlib.contextmanager
    def writer(
        self,
        *,
        wait_s: float = DEFAULT_WRITE_WAIT_S,
        on_wait: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Iterator[None]:
        """Hold the writer lock; while another Aries holds it, say so once and wait up to ``wait_s``.

        Raises :class:`IndexBusy` after ``wait_s`` seconds, :class:`WaitCancelled` when ``cancel``
        is set while waiting.
        """
        lock = _file_lock(self.writer_path)
        outer = lock.is_locked and lock.lock_counter > 0
        if not self.try_writer():
            holder = self.holder()
            if on_wait is not None:
                on_wait(f"index {self.name!r} is being written by another Aries ({holder}); waiting… Ctrl+C to stop")
            deadline = time.monotonic() + max(0.0, wait_s)
            while not self.try_writer():
                if cancel is not None and cancel.is_set():
                    raise WaitCancelled
                if time.monotonic() >= deadline:
                    raise IndexBusy(
                        f"index {self.name!r} is being written by another Aries ({self.holder()}); "
                        f"gave up after {wait_s:g} s; try again when it has finished"
                    )
                time.sleep(POLL_S)
        try:
            if not outer:
                with contextlib.suppress(OSError):
                    atomic_write_text(self.holder_path, json.dumps({"pid": os.getpid(), "since": utc_now()}))
            yield
        finally:
            if not outer:
                with contextlib.suppress(OSError):
                    self.holder_path.unlink()
            self.release_writer()
