"""Watched folders: an index that follows its folders while a watcher runs (``rag index watch NAME``).

:class:`FolderWatch` watches the folders (or the one file) an index was built from with
``watchfiles`` (Rust ``notify``: inotify on Linux), and brings the index up to date in batches:

* **Catch-up first.** On start the watcher is armed, then every root is read again through
  :meth:`RetrievalEngine.index_add` (incremental: unchanged files are skipped by content hash;
  files gone are dropped; a journal left by a killed writer is replayed, damaged vectors are
  rebuilt).  Changes made while the catch-up runs are already being collected.
* **Debounced batches.** Events are gathered until ``quiet_ms`` pass without one, or until the
  oldest is ``max_age_ms`` old (a file saved a hundred times a second is one batch every
  ``max_age_ms``).  ``watchfiles`` only delivers them (every few tens of milliseconds while they
  come: its own grouping cannot tell a file saved again from a quiet folder).  Each batch takes the
  index's writer lock once (not for the whole watch) and goes through
  :meth:`RetrievalEngine.index_update` per root: the same journalled, whole-file atomic writer as
  ``index add``.  A batch that could not be written (another writer held the
  index past ``wait_s``, a full disk) is kept and tried again with the next one.
* **Not indexed twice.** Editors' temp files (``.swp``, ``~``, ``.#…``, ``#…#``, vim's ``4913``,
  ``.tmp``, ``.part``…), hidden names (as ``index add`` skips them) and unsupported types are
  ignored; a file whose content hash is the manifest's (the web viewer's save, already reindexed
  by it; a ``touch``) costs no lock and no batch.
* **One watcher per index.** ``<workspace>/indexes/.locks/NAME.watch.lock`` is held (``flock``)
  for the life of the watch and ``NAME.watch.json`` names the holder; a second watcher, in this
  process or another, is refused with the holder's pid.  The kernel drops the lock when its
  process dies (``kill -9`` included).
* **Refused**: a watch the caller's :class:`WatchPermit` refuses (an untrusted or changed
  workspace), a root outside the policy's allowed roots, an index with no folder.  Running out
  of inotify watches is one line naming ``fs.inotify.max_user_watches``.

``services.retrieval`` does not import the session or the trust records (they import it): the
caller (``services.session.watching``) builds the :class:`WatchPermit`.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from services.clock import utc_now
from services.errors import AriesError, NotFound
from services.files.atomic import atomic_write_text
from services.hashing import sha256_hex
from services.retrieval.errors import IndexBusy, IndexStorageError
from services.retrieval.loaders import content_type_for
from services.text.names import validate_name

if TYPE_CHECKING:
    from services.retrieval.engine import RetrievalEngine
    from services.retrieval.models import IngestReport
    from services.retrieval.store_manifest import Manifest

WATCH_FORMAT = 1
"""The format version of ``NAME.watch.json`` (who holds the watch lock)."""
MAX_AGE_MS = 2000
"""A batch is written at most this long after its first event (a file saved continuously)."""
QUIET_MS = 400
"""A batch is written once this long has passed without a new event."""
TICK_MS = 200
"""The watcher wakes at least this often (a quiet period to notice, a stop request, a batch to retry)."""
DELIVER_MS = 50
"""``watchfiles`` hands over what it has once this long passed without a new kind of event."""
BATCH_WAIT_S = 60.0
"""How long one batch waits for another writer of the index (an ``index add``) before it is retried."""

TEMP_PATTERNS = (
    "*.swp",
    "*.swo",
    "*.swx",
    "*~",
    ".#*",
    "#*#",
    "4913",
    "*.tmp",
    "*.temp",
    "*.part",
    "*.crdownload",
    ".~lock.*#",
    "~$*",
    "*___jb_tmp___",
    "*___jb_old___",
)
"""Names editors, browsers and office suites write beside a file while saving it (matched on the last part)."""


class WatchRefused(AriesError):
    """The watch may not start: the workspace is not trusted, a folder is outside the policy's roots, …"""

    code = "watch_refused"
    exit_code = 3


class WatchLimit(AriesError):
    """The system ran out of inotify watches (``fs.inotify.max_user_watches``)."""

    code = "watch_limit"


@dataclass(frozen=True)
class WatchPermit:
    """What the caller allows: the policy's allowed roots, and why the workspace may not be watched."""

    allowed_roots: tuple[Path, ...]
    """The real paths of the policy's filesystem roots; every root of the index must lie inside one."""
    refusal: str | None = None
    """None: the workspace may be watched; else the one line that says why not (untrusted, changed)."""
    recheck: Callable[[], str | None] | None = field(default=None, compare=False)
    """Asked again before each batch: a refusal then stops the watch (the workspace was changed by hand)."""


class WatchHolder(BaseModel):
    """``NAME.watch.json``: who holds an index's watch lock."""

    model_config = ConfigDict(extra="ignore")
    format: Literal[1] = 1
    pid: int
    since: str
    surface: str = "cli"


def ignored(rel: str) -> bool:
    """Whether a path under a watched folder is none of the index's business: a hidden name in
    any part (``index add`` skips them), an editor's or a download's temp file, an unsupported type."""
    parts = PurePosixPath(rel).parts
    if not parts or any(part.startswith(".") for part in parts):
        return True
    name = parts[-1]
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in TEMP_PATTERNS):
        return True
    return content_type_for(name) is None


class WatchLock:
    """The one-watcher-per-index lock (see the module docstring)."""

    def __init__(self, directory: Path, name: str) -> None:
        self.name = name
        self.path = directory / f"{name}.watch.lock"
        self.holder_path = directory / f"{name}.watch.json"
        self._fd: int | None = None

    def holder(self) -> str:
        """``pid N`` of the watcher that holds the lock (as it recorded), or ``unknown pid``."""
        try:
            data = WatchHolder.model_validate_json(self.holder_path.read_bytes())
        except (OSError, ValidationError):
            return "unknown pid"
        return f"pid {data.pid}, since {data.since[:19].replace('T', ' ')}"

    def acquire(self, surface: str) -> None:
        """Take the lock now or raise :class:`WatchRefused` naming the holder."""
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                raise WatchRefused(
                    f"index {self.name!r} is already watched ({self.holder()}); one watcher per index"
                ) from None
            raise
        self._fd = fd
        holder = WatchHolder(pid=os.getpid(), since=utc_now(), surface=surface)
        with contextlib.suppress(OSError):
            atomic_write_text(self.holder_path, holder.model_dump_json() + "\n")

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            self.holder_path.unlink()
        os.close(fd)  # closing the descriptor drops the flock


@dataclass
class WatchBatch:
    """The account of one batch (``number`` 0: the catch-up on start)."""

    number: int
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    """Events whose file already matched the index (no write)."""
    problems: list[str] = field(default_factory=list)
    """One line per file that could not be indexed (kept out, or its previous chunks kept)."""
    elapsed_s: float = 0.0
    first_event: float | None = None
    """``time.monotonic()`` of the batch's first event (the latency to searchable is measured from it)."""

    @property
    def changed(self) -> list[str]:
        return [*self.added, *self.updated, *self.removed]

    def take(self, report: IngestReport) -> None:
        self.added.extend(report.added)
        self.updated.extend(report.updated)
        self.removed.extend(report.removed)
        self.unchanged += len(report.unchanged)
        issues = [*report.errors, *report.skipped]
        for issue in issues:
            if not ignored(issue.path):
                said = issue.message.startswith(f"{issue.path}:")
                self.problems.append(issue.message if said else f"{issue.path}: {issue.message}")

    def line(self) -> str:
        """``batch 3: +1 ~2 -0 (0.21 s) notes/a.md, …`` (the CLI's live line)."""
        what = "caught up" if self.number == 0 else f"batch {self.number}"
        names = self.changed
        shown = ", ".join(names[:3]) + (f", … ({len(names) - 3} more)" if len(names) > 3 else "")
        failed = f" !{len(self.problems)}" if self.problems else ""
        return (
            f"{what}: +{len(self.added)} ~{len(self.updated)} -{len(self.removed)}{failed} "
            f"({self.elapsed_s:.2f} s){' ' + shown if shown else ''}"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "batch": self.number,
            "added": self.added,
            "updated": self.updated,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "problems": self.problems,
            "elapsed_s": round(self.elapsed_s, 3),
        }


OnBatch = Callable[[WatchBatch], None]
OnNote = Callable[[str], None]


def limit_message(exc: BaseException) -> str | None:
    """The one line for an inotify watch limit (``watchfiles`` raises ``OSError``: ENOSPC, or
    notify's "OS file watch limit reached"); None for any other error."""
    text = str(exc)
    if not isinstance(exc, OSError):
        return None
    if exc.errno == errno.ENOSPC or "watch limit" in text or "os error 28" in text:
        return (
            "the system ran out of inotify watches (one per watched folder); raise fs.inotify.max_user_watches, "
            "e.g. sudo sysctl fs.inotify.max_user_watches=524288, or watch a smaller folder"
        )
    if exc.errno == errno.EMFILE or "max_user_instances" in text:
        return "the system ran out of inotify instances; raise fs.inotify.max_user_instances"
    return None


class FolderWatch:
    """One index kept current with its folders while :meth:`run` runs (see the module docstring)."""

    def __init__(
        self,
        engine: RetrievalEngine,
        name: str,
        permit: WatchPermit,
        *,
        surface: str = "cli",
        quiet_ms: int = QUIET_MS,
        max_age_ms: int = MAX_AGE_MS,
        wait_s: float = BATCH_WAIT_S,
    ) -> None:
        self.engine = engine
        self.name = validate_name(name, "index")
        self.permit = permit
        self.surface = surface
        self.quiet_s = quiet_ms / 1000
        self.max_age_s = max_age_ms / 1000
        self.wait_s = wait_s
        self.roots = self._checked_roots()
        self._file_roots = frozenset(root for root in self.roots if root.is_file())  # an index of one file
        locks = engine.indexes.locks(self.name)
        self._lock = WatchLock(locks.directory, self.name) if locks is not None else None
        self.batches = 0
        """Batches written so far (the catch-up not counted)."""
        self._pending: dict[tuple[Path, str], float] = {}  # (root, rel) → monotonic time of its first event
        self._last_event = 0.0  # monotonic time of the last event that concerned the index

    # -- refusals ------------------------------------------------------------------------------
    def _checked_roots(self) -> list[Path]:
        """The index's roots, once the permit, the index and the policy's roots allow the watch."""
        if self.permit.refusal is not None:
            raise WatchRefused(self.permit.refusal)
        if not self.engine.indexes.exists(self.name):
            raise NotFound(f"no index named {self.name!r}; add one with: rag index add PATH --name {self.name}")
        recorded = self.engine.indexes.store(self.name).manifest.roots()
        if not recorded:
            raise WatchRefused(f"index {self.name!r} records no folder to watch")
        roots: list[Path] = []
        for text in recorded:
            root = Path(text)
            if not root.exists():
                raise WatchRefused(f"folder {root} of index {self.name!r} does not exist (any more)")
            real = root.resolve()
            if not any(real == allowed or real.is_relative_to(allowed) for allowed in self.permit.allowed_roots):
                raise WatchRefused(
                    f"folder {root} of index {self.name!r} is outside the policy's allowed roots; "
                    "add it to filesystem.allowed_roots to watch it"
                )
            roots.append(root)
        return roots

    # -- the watch -----------------------------------------------------------------------------
    def run(self, stop: threading.Event, on_batch: OnBatch, on_note: OnNote | None = None) -> int:
        """Catch up, then follow the folders until ``stop`` is set; the number of batches written.

        Raises :class:`WatchRefused` (another watcher), :class:`WatchLimit` (out of inotify
        watches) and the engine's errors of the catch-up."""
        with self._held():
            for changes in self._changes(stop):
                if changes is None:  # armed: the watcher collects events from here on
                    self._catch_up(stop, on_batch)
                    if on_note is not None:
                        on_note(self._watching_line())
                    continue
                now = time.monotonic()
                if self._collect(changes, now):
                    self._last_event = now
                if self._due(now) and not stop.is_set():
                    self._write_batch(on_batch, on_note)
        return self.batches

    def _watching_line(self) -> str:
        folders = ", ".join(root.as_posix() for root in self.roots)
        return f"watching index {self.name!r}: {folders}"

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        if self._lock is None:
            yield
            return
        self._lock.acquire(self.surface)
        try:
            yield
        finally:
            self._lock.release()

    def _watch_paths(self) -> list[str]:
        """A folder root is watched recursively; a file root through its folder (a save replaces the file)."""
        paths = {(root.parent if root.is_file() else root).as_posix() for root in self.roots}
        return sorted(paths)

    def _changes(self, stop: threading.Event) -> Iterator[set[tuple[str, str]] | None]:
        """None once the watcher is armed, then each debounced set of (kind, absolute path)."""
        from watchfiles import watch

        armed = False
        try:
            for raw in watch(
                *self._watch_paths(),
                watch_filter=None,
                debounce=TICK_MS,
                step=DELIVER_MS,
                stop_event=stop,
                rust_timeout=TICK_MS,
                yield_on_timeout=True,
                raise_interrupt=False,
                recursive=any(root not in self._file_roots for root in self.roots),  # one file: its folder only
            ):
                if not armed:
                    armed = True
                    yield None
                yield {(change.name, path) for change, path in raw}
        except OSError as exc:
            message = limit_message(exc)
            if message is None:
                raise
            raise WatchLimit(message) from None

    def _catch_up(self, stop: threading.Event, on_batch: OnBatch) -> None:
        """Batch 0: every root read again (incremental), under the writer lock one root at a time."""
        started = time.monotonic()
        batch = WatchBatch(0)
        for root in self.roots:
            report = self.engine.index_add(root, self.name, cancel=stop, activate=False)
            batch.take(report)
        batch.elapsed_s = time.monotonic() - started
        on_batch(batch)

    def _collect(self, changes: set[tuple[str, str]], now: float) -> bool:
        """Add the changes' files that concern the index to the pending set; whether there was one."""
        concerned = False
        for _kind, path in sorted(changes):
            for key in self._files_of(Path(path)):
                self._pending.setdefault(key, now)
                concerned = True
        return concerned

    def _due(self, now: float) -> bool:
        """Whether the pending batch is to be written now: quiet for ``quiet_ms``, or its oldest event
        ``max_age_ms`` old."""
        if not self._pending:
            return False
        return now - self._last_event >= self.quiet_s or now - min(self._pending.values()) >= self.max_age_s

    def _files_of(self, path: Path) -> Iterator[tuple[Path, str]]:
        """(root, relative path) of each indexable file an event at ``path`` may concern: the file; every
        file under a folder that appeared; every indexed file under a folder that went away."""
        for root in self.roots:
            if root in self._file_roots:
                if path == root:
                    yield root, root.name
                continue
            if path == root or not path.is_relative_to(root):
                continue
            rel = path.relative_to(root).as_posix()
            if path.is_dir():
                yield from ((root, inner) for inner in _walk(root, path))
            elif path.exists() or content_type_for(path.name) is not None:
                if not ignored(rel):
                    yield root, rel
            elif not any(part.startswith(".") for part in PurePosixPath(rel).parts):
                # gone, with no file type: a folder deleted or renamed away? its indexed files
                prefix = rel + "/"
                rows = self._manifest().query(
                    "SELECT source_path FROM files WHERE root = ? AND substr(source_path, 1, ?) = ?",
                    (root.as_posix(), len(prefix), prefix),
                )
                yield from ((root, str(row[0])) for row in rows)

    def _manifest(self) -> Manifest:
        return self.engine.indexes.store(self.name).manifest

    def _needs_write(self, root: Path, rel: str) -> bool:
        """Whether the file differs from the index: new, changed (content hash) or gone."""
        record = self._manifest().file(rel)
        real = root if root.is_file() else root / rel
        try:
            data = real.read_bytes() if real.is_file() else None
        except OSError:
            return True  # the ingest says why it cannot be read
        if data is None:
            return record is not None and record.root == root.as_posix()
        return record is None or record.content_hash != sha256_hex(data)

    def _write_batch(self, on_batch: OnBatch, on_note: OnNote | None) -> None:
        """The pending files: the unchanged ones dropped, the rest written under one writer lock."""
        if self.permit.recheck is not None:
            refusal = self.permit.recheck()
            if refusal is not None:
                raise WatchRefused(f"the watch of {self.name!r} stopped: {refusal}")
        pending, self._pending = self._pending, {}
        batch = WatchBatch(self.batches + 1, first_event=min(pending.values()))
        todo = self._todo(sorted(pending), batch)
        if not todo:
            return
        started = time.monotonic()
        try:
            written = self._apply(todo, batch)
        except (IndexBusy, IndexStorageError) as exc:
            for key, first in pending.items():  # tried again with the next batch
                self._pending.setdefault(key, first)
            if on_note is not None:
                on_note(f"batch not written, tried again: {exc.message}")
            return
        if not written:
            return
        self.batches += 1
        batch.elapsed_s = time.monotonic() - started
        on_batch(batch)

    def _todo(self, keys: Iterable[tuple[Path, str]], batch: WatchBatch) -> dict[Path, list[str]]:
        """The files of ``keys`` that differ from the index, by root (the others counted unchanged)."""
        todo: dict[Path, list[str]] = {}
        for root, rel in keys:
            if not root.exists():  # the watched folder itself went away: the next watch refuses it
                continue
            if self._needs_write(root, rel):
                todo.setdefault(root, []).append(rel)
            else:
                batch.unchanged += 1
        return todo

    def _apply(self, todo: dict[Path, list[str]], batch: WatchBatch) -> bool:
        """One writer-lock acquisition for the batch; each root's files through ``index_update``.
        Under the lock the files are compared with the index again: another writer (the web viewer's
        save, an ``index add``) may have written them while this one waited.  Whether one was written."""
        locks = self.engine.indexes.locks(self.name)
        held = locks.writer(wait_s=self.wait_s) if locks is not None else contextlib.nullcontext()
        with held:
            todo = self._todo([(root, rel) for root, rels in todo.items() for rel in rels], batch)
            for root, rels in todo.items():
                batch.take(self.engine.index_update(self.name, root, rels))
        return bool(todo)


def _walk(root: Path, folder: Path) -> Iterable[str]:
    """The indexable files under ``folder`` (a folder that appeared under ``root``), relative to ``root``."""
    found: list[str] = []
    for directory, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            rel = (Path(directory) / filename).relative_to(root).as_posix()
            if not ignored(rel):
                found.append(rel)
    return found
