"""Ingest of the retrieval engine: scanning a folder, reading files safely, loading and writing them.

:class:`Ingestor` is one part of the :class:`~services.retrieval.engine.RetrievalEngine` (held
as ``engine.ingestor``); it opens stores through the engine's :class:`~services.retrieval.engine_indexes.Indexes`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from services.clock import format_ts
from services.errors import NotFound
from services.hashing import sha256_hex
from services.retrieval.chunking import ChunkConfig, chunk_document, default_counter
from services.retrieval.engine_indexes import Indexes, ProgressCallback, derive_index_name, file_issue
from services.retrieval.errors import (
    LIMIT_CODES,
    DuplicateSource,
    EmptyDocument,
    FileTooLarge,
    IndexStorageError,
    IngestError,
    MalformedDocument,
    UnsafePath,
    UnsupportedType,
)
from services.retrieval.faults import storage_guard
from services.retrieval.ingest import Batch, Cancelled, flush
from services.retrieval.loaders import SANDBOXED_TYPES, content_type_for, load_bytes
from services.retrieval.models import Document, FileIssue, IngestReport, ProgressEvent
from services.retrieval.store_locks import DEFAULT_WRITE_WAIT_S, WaitCancelled
from services.retrieval.store_manifest import FileRecord
from services.retrieval.store_writer import writing
from services.text.names import validate_name

if TYPE_CHECKING:
    from services.retrieval.backfill import FillReport
    from services.retrieval.embedders import Embedder
    from services.retrieval.models import Chunk
    from services.retrieval.sandbox import LoaderSandbox
    from services.retrieval.store import IndexStore
    from services.retrieval.store_writer import Writer


class Ingestor:
    """Incremental, whole-file atomic indexing of files and folders into the indexes of ``indexes``."""

    def __init__(self, indexes: Indexes, chunk_config: ChunkConfig) -> None:
        self.indexes = indexes
        self.settings = indexes.settings
        self.chunk_config = chunk_config
        self._sandbox: LoaderSandbox | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None

    def sandboxed(self) -> LoaderSandbox:
        """The loader subprocess for PDF, EPUB and HTML (started on first use, kept until :meth:`close`)."""
        from services.retrieval.sandbox import LoaderSandbox

        with self._lock:
            if self._sandbox is None:
                self._sandbox = LoaderSandbox(self.settings.limits)
            return self._sandbox

    # -- ingest ----------------------------------------------------------------------------
    def add(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        wait_s: float = DEFAULT_WRITE_WAIT_S,
        include_hidden: tuple[str, ...] = (),
        exclude_top: tuple[str, ...] = (),
        activate: bool = True,
    ) -> IngestReport:
        """:meth:`add_files`, after rebuilding a damaged or missing vector store from the manifest
        (unchanged files are never re-embedded, so this is what brings them back); a full or
        read-only disk is one :class:`IndexStorageError` and the index keeps its previous state.
        Both wait for another writer of the index as ``wait_s`` says."""
        indexes = self.indexes
        given = Path(os.fspath(path)).expanduser()
        label = name if name is not None else (derive_index_name(given.resolve()) if given.exists() else "?")
        directory = indexes.index_dir(label) if self.settings.backend != "memory" and label != "?" else None
        rebuilt = 0
        try:
            with storage_guard(label, directory, "write to it"):
                if label != "?" and given.exists() and indexes.exists(label):
                    store = indexes.store(label)
                    if not indexes.vector_health(store).ok:
                        try:
                            rebuilt = indexes.repair(label, progress=progress, cancel=cancel, wait_s=wait_s)
                        except Cancelled:
                            return IngestReport(index=label, root=given.as_posix(), cancelled=True)
                report = self.add_files(
                    path,
                    name,
                    progress=progress,
                    cancel=cancel,
                    wait_s=wait_s,
                    include_hidden=include_hidden,
                    exclude_top=exclude_top,
                    activate=activate,
                )
        except IndexStorageError:
            indexes.forget(label)  # reopened on next use: the journal is replayed then
            raise
        report.vectors_rebuilt = rebuilt
        return report

    def add_files(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        wait_s: float = DEFAULT_WRITE_WAIT_S,
        include_hidden: tuple[str, ...] = (),
        exclude_top: tuple[str, ...] = (),
        activate: bool = True,
    ) -> IngestReport:
        """Index a file or a folder (recursively) into ``name``; incremental and whole-file atomic.

        Unchanged files (same content hash and chunking) are skipped, changed ones replaced,
        files gone from the folder dropped.  Unreadable files are listed in ``report.errors``
        with a typed error; files over a limit of ``settings.limits`` (size, text, chunks,
        pages, nesting, memory or time: codes in :data:`LIMIT_CODES`), links that leave the
        root, unsupported types and special files in ``report.skipped``.  Setting ``cancel``
        stops between files (and between embedding groups): files already written stay, the batch
        in progress is not written.

        One writer per index: while another Aries (process or thread) writes ``name``, this
        one reports a ``wait`` progress event (its ``path`` is the message to show), waits up
        to ``wait_s`` seconds and then raises :class:`IndexBusy`; ``cancel`` stops the wait.

        The folder walk skips names beginning with ``.`` except the file names in
        ``include_hidden``, and skips the top-level folders named in ``exclude_top`` (the context
        index uses both: tier files in, ``temp``/``queue`` out).  ``activate=False`` leaves the
        workspace's active index alone (by default a first index becomes the active one).
        """
        started = time.monotonic()
        given = Path(os.fspath(path)).expanduser()
        if not given.exists():
            raise NotFound(f"{given}: no such file or folder")
        root = given.resolve(strict=True)
        name = validate_name(name, "index") if name is not None else derive_index_name(root)
        # before anything is created: refuse a bad root cleanly
        candidates, skipped = self._scan(root, include_hidden, exclude_top)
        report = IngestReport(index=name, root=root.as_posix())

        def waiting(message: str) -> None:  # another Aries writes this index: say so, as a progress event
            if progress is not None:
                progress(ProgressEvent("wait", 0, 0, message))

        # One writer per index, across processes, from before the index is created (see store_locks).
        locks = self.indexes.locks(name)
        held = locks.writer(wait_s=wait_s, on_wait=waiting, cancel=cancel) if locks else contextlib.nullcontext()
        try:
            with held:  # the keyword phase: every file read, chunked and searchable by keyword
                self._add_locked(root, name, candidates, skipped, report, started, progress, cancel, activate=activate)
        except WaitCancelled:
            report.cancelled = True
            report.elapsed_s = round(time.monotonic() - started, 3)
            return report
        return self._behind(name, report, started, progress, cancel, wait_s)

    def update(
        self,
        name: str,
        root: str | os.PathLike[str],
        paths: list[str],
        *,
        wait_s: float = DEFAULT_WRITE_WAIT_S,
    ) -> IngestReport:
        """Re-read only ``paths`` (POSIX paths relative to ``root``, one of the roots index ``name``
        was built from): changed files re-chunked and re-embedded, unchanged ones skipped, files
        gone from ``root`` dropped, every other file of the index left alone.  The same whole-file
        atomic ingest and one-writer lock as :meth:`add` (which walks the whole folder)."""
        started = time.monotonic()
        name = validate_name(name, "index")
        if not self.indexes.exists(name):
            raise NotFound(f"no index named {name!r}")
        base = Path(os.fspath(root)).resolve(strict=True)
        if base.as_posix() not in self.indexes.store(name).manifest.roots():
            raise NotFound(f"{base} is not a root of index {name!r}")
        candidates: list[tuple[str, Path]] = []
        skipped: list[FileIssue] = []
        for rel in sorted(set(paths)):
            real = (base.parent / rel) if base.is_file() else (base / rel)
            if base.is_file() and rel != base.name:
                continue
            if content_type_for(rel) is None:
                skipped.append(file_issue(rel, UnsupportedType(f"{rel}: unsupported file type")))
                continue
            resolved = real.resolve()
            if resolved != base and not resolved.is_relative_to(base):
                skipped.append(file_issue(rel, UnsafePath(f"{rel}: the path leads outside the root ({resolved})")))
                continue
            if resolved.is_file():
                candidates.append((rel, resolved))
        report = IngestReport(index=name, root=base.as_posix())
        locks = self.indexes.locks(name)
        held = locks.writer(wait_s=wait_s) if locks else contextlib.nullcontext()
        with held:
            self._add_locked(
                base, name, candidates, skipped, report, started, None, None, activate=False, only=frozenset(paths)
            )
        return self._behind(name, report, started, None, None, wait_s)

    def fill(
        self,
        name: str,
        *,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        wait_s: float = DEFAULT_WRITE_WAIT_S,
    ) -> FillReport:
        """Write the vectors still pending in index ``name`` (an add, update or fill that was
        killed or cancelled left them): the resume entry point of a watcher or the TUI's
        background worker.  Each batch takes the writer lock on its own; progress events are
        ``vectors`` (chunks with vectors, chunks)."""
        from services.retrieval.backfill import fill_vectors

        name = validate_name(name, "index")
        if not self.indexes.exists(name):
            raise NotFound(f"no index named {name!r}")
        store = self.indexes.store(name)
        embedder = self.indexes.check_model(store)
        emit = _emitter(progress)

        def waiting(message: str) -> None:
            emit("wait", 0, 0, message)

        with storage_guard(name, store.directory, "write its vectors"):
            return fill_vectors(
                store,
                embedder,
                progress=lambda done, total: emit("vectors", done, total),
                cancel=cancel,
                wait_s=wait_s,
                on_wait=waiting,
            )

    def _behind(
        self,
        name: str,
        report: IngestReport,
        started: float,
        progress: ProgressCallback | None,
        cancel: threading.Event | None,
        wait_s: float,
    ) -> IngestReport:
        """After the keyword phase of ``report``: its time, then the vectors behind (those of
        this ingest and any an earlier one left pending), unless it was cancelled."""
        report.keywords_s = round(time.monotonic() - started, 3)
        if not report.cancelled:
            filled = self.fill(name, progress=progress, cancel=cancel, wait_s=wait_s)
            report.vectors_written = filled.written
            report.vectors_elsewhere = filled.busy
            report.cancelled = filled.cancelled
        report.vectors_pending = self.indexes.store(name).manifest.pending_count()
        report.elapsed_s = round(time.monotonic() - started, 3)
        if progress is not None and not report.cancelled:
            progress(ProgressEvent("done", report.chunks_added, report.chunks_added))
        return report

    def _add_locked(
        self,
        root: Path,
        name: str,
        candidates: list[tuple[str, Path]],
        skipped: list[FileIssue],
        report: IngestReport,
        started: float,
        progress: ProgressCallback | None,
        cancel: threading.Event | None,
        *,
        activate: bool = True,
        only: frozenset[str] | None = None,
    ) -> IngestReport:
        store = self.indexes.store(name, create=True)
        embedder = self.indexes.check_model(
            store, record=True
        )  # records model, backend and quantization in a new index
        target = _Target(store, root.as_posix(), self.chunk_config.key(default_counter()), embedder.model_id)
        emit = _emitter(progress)
        report.skipped.extend(skipped)
        emit("scan", len(candidates), len(candidates))
        store.manifest.add_root(target.root_key)
        known = _known_records(store, target.root_key, only)
        stages = _Stages(report, None, cancel, emit, len(candidates))  # keywords first: vectors behind
        with writing(store) as writer:
            try:
                for number, (rel, real) in enumerate(candidates, start=1):
                    if cancel is not None and cancel.is_set():
                        raise Cancelled
                    emit("file", number, len(candidates), rel)
                    self._take(target, rel, real, known.get(rel), stages, writer)
                gone = sorted(set(known) - stages.kept - set(stages.batch.removals))
                if only is not None:  # an update of a few files: only those may be dropped
                    gone = [path for path in gone if path in only]
                stages.batch.removals.extend(gone)
                report.removed.extend(gone)
                if stages.batch:
                    stages.write(writer)
                stages.settle()
            except Cancelled:
                with contextlib.suppress(Cancelled):
                    stages.settle()  # a batch that was written before the cancel is booked
                report.cancelled = True
                report.removed = [path for path in report.removed if store.manifest.file(path) is None]
            finally:
                stages.close()
        store.manifest.record_failures(stages.failed, cleared=[*report.unchanged, *report.updated, *report.removed])
        if activate and not report.cancelled and self.indexes.active is None:
            self.indexes.set_active(name)
            report.activated = True
        report.elapsed_s = round(time.monotonic() - started, 3)
        emit("keywords", len(candidates), len(candidates))
        return report

    def _take(
        self, target: _Target, rel: str, real: Path, known: FileRecord | None, stages: _Stages, writer: Writer
    ) -> None:
        """File ``rel`` of one ingest: refused, kept unchanged, kept after a failed load, or staged."""
        report = stages.report
        existing = known or target.store.manifest.file(rel)
        if existing is not None and existing.root != target.root_key:
            duplicate = DuplicateSource(f"{rel} is already indexed from {existing.root}; use another index")
            report.errors.append(file_issue(rel, duplicate))
            return
        try:
            staged = self._stage(target, rel, real, existing)
        except IngestError as exc:
            # over a limit: skipped (with the limit named); anything else: failed
            (report.skipped if exc.code in LIMIT_CODES else report.errors).append(file_issue(rel, exc))
            if existing is not None:  # its previous chunks stay searchable until it loads again
                stages.kept.add(rel)
                stages.failed[rel] = (exc.code, exc.message)
                report.kept.append(rel)
            return
        stages.kept.add(rel)
        if staged is None:
            report.unchanged.append(rel)
        else:
            stages.add(writer, staged, is_new=existing is None)

    def _stage(
        self, target: _Target, rel: str, real: Path, existing: FileRecord | None
    ) -> tuple[FileRecord, list[Chunk]] | None:
        """The record and the chunks of file ``rel`` (at ``real``); None when it is unchanged since
        ``existing`` (same content hash, same chunking); an :class:`IngestError` when it cannot be."""
        chunk_key = target.chunk_key
        limits = self.settings.limits
        data, mtime = self._read(real)
        content_hash = sha256_hex(data)
        if existing is not None and existing.content_hash == content_hash and existing.config_key == chunk_key:
            return None
        content_type = content_type_for(rel) or "text/plain"
        document = self._load(content_type, data)
        chunks = chunk_document(
            document,
            rel,
            embedding_model=target.model_id,
            config=self.chunk_config,
            max_chunks=limits.max_chunks,
            deadline=time.monotonic() + limits.timeout_s,
        )
        if not chunks:
            raise EmptyDocument("the file has no text")
        record = FileRecord(
            source_path=rel,
            root=target.root_key,
            content_hash=content_hash,
            size=len(data),
            content_type=document.content_type,
            last_modified=format_ts(datetime.fromtimestamp(mtime, UTC)),
            title=document.title,
            config_key=chunk_key,
        )
        return record, chunks

    def _scan(
        self, root: Path, include_hidden: tuple[str, ...] = (), exclude_top: tuple[str, ...] = ()
    ) -> tuple[list[tuple[str, Path]], list[FileIssue]]:
        """(relative POSIX path, real path) of the files to read, sorted; and what was skipped.

        Names beginning with ``.`` are skipped unless they are files named in ``include_hidden``;
        folders named in ``exclude_top`` directly under ``root`` are skipped."""
        skipped: list[FileIssue] = []
        if root.is_file():
            if content_type_for(root.name) is None:
                raise UnsupportedType(
                    f"{root.name}: unsupported file type (supported: PDF, EPUB, Markdown, text, HTML)"
                )
            return [(root.name, root)], skipped
        found: list[tuple[str, Path]] = []
        for directory, dirnames, filenames in os.walk(root, followlinks=False):
            base = Path(directory)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            if exclude_top and base == root:
                dirnames[:] = [d for d in dirnames if d not in exclude_top]
            for dirname in list(dirnames):
                link = base / dirname
                if link.is_symlink():
                    dirnames.remove(dirname)
                    rel = link.relative_to(root).as_posix()
                    target = link.resolve()
                    reason = (
                        UnsafePath(f"{rel}: the link points outside the root ({target})")
                        if not target.is_relative_to(root)
                        else UnsupportedType(f"{rel}: links to folders are not followed")
                    )
                    skipped.append(file_issue(rel, reason))
            for filename in sorted(filenames):
                if filename.startswith(".") and filename not in include_hidden:
                    continue
                path = base / filename
                rel = path.relative_to(root).as_posix()
                if content_type_for(filename) is None:
                    skipped.append(file_issue(rel, UnsupportedType(f"{rel}: unsupported file type")))
                    continue
                real = path.resolve()
                if not real.is_relative_to(root):
                    skipped.append(file_issue(rel, UnsafePath(f"{rel}: the link points outside the root ({real})")))
                    continue
                try:
                    mode = real.stat().st_mode
                except OSError as exc:
                    skipped.append(file_issue(rel, MalformedDocument(f"{rel}: cannot stat: {exc.strerror}")))
                    continue
                if not stat.S_ISREG(mode):
                    skipped.append(file_issue(rel, UnsupportedType(f"{rel}: not a regular file")))
                    continue
                found.append((rel, real))
        found.sort(key=lambda item: PurePosixPath(item[0]).parts)
        return found, skipped

    def _read(self, real: Path) -> tuple[bytes, float]:
        """The file's bytes (opened without following a last-moment link) and its mtime."""
        limit = self.settings.limits.max_file_bytes
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(real, flags)
        except OSError as exc:
            raise MalformedDocument(f"cannot open: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise UnsupportedType("not a regular file")
            if info.st_size > limit:
                raise FileTooLarge(f"{info.st_size} bytes is over the {limit}-byte limit")
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise FileTooLarge(f"the file grew over the {limit}-byte limit while it was read")
        if not data:
            raise EmptyDocument("the file is empty")
        return data, info.st_mtime

    def _load(self, content_type: str, data: bytes) -> Document:
        if content_type in SANDBOXED_TYPES:
            return self.sandboxed().load(content_type, data)
        return load_bytes(content_type, data, self.settings.limits)


def _emitter(progress: ProgressCallback | None) -> Callable[..., None]:
    """``emit(stage, done, total, where=None)``: a progress event, when someone listens."""

    def emit(stage: str, done: int, total: int, where: str | None = None) -> None:
        if progress is not None:
            progress(ProgressEvent(stage, done, total, where))

    return emit


def _known_records(store: IndexStore, root_key: str, only: frozenset[str] | None) -> dict[str, FileRecord]:
    """The manifest's records of the files under ``root_key`` (only those in ``only``, when given)."""
    if only is None:
        return {record.source_path: record for record in store.manifest.files_under(root_key)}
    # an update of a few files (a save in the viewer): their records only, not the whole root's
    found = (store.manifest.file(path) for path in sorted(only))
    return {record.source_path: record for record in found if record is not None and record.root == root_key}


@dataclass(frozen=True)
class _Target:
    """Where one ingest writes: the index's store, the root, the chunking (its key) and the embedding model."""

    store: IndexStore
    root_key: str
    chunk_key: str
    model_id: str


class _Stages:
    """The two overlapping stages of one ingest: the ingesting thread reads, parses and chunks the next
    batch while a writer thread embeds and writes the previous one (at most one batch in flight)."""

    def __init__(
        self,
        report: IngestReport,
        embedder: Embedder | None,
        cancel: threading.Event | None,
        emit: Callable[..., None],
        total: int,
    ) -> None:
        self.report = report
        self.embedder = embedder
        self.cancel = cancel
        self.emit = emit
        self.total = total
        self.kept: set[str] = set()  # files that stay in the index (written, unchanged or kept after a failure)
        self.failed: dict[str, tuple[str, str]] = {}  # indexed files that failed to load: chunks kept, marked failed
        self.batch = Batch()
        self.pending: list[tuple[str, bool, int]] = []  # (source path, is new, chunks) of the unwritten batch
        self.in_flight: tuple[Future[int], list[tuple[str, bool, int]]] | None = None
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-writer")

    def add(self, writer: Writer, staged: tuple[FileRecord, list[Chunk]], *, is_new: bool) -> None:
        """Stage one read and chunked file; a full batch goes to the writer thread."""
        record, chunks = staged
        self.batch.files.append((record, chunks))
        self.pending.append((record.source_path, is_new, len(chunks)))
        if self.batch.full():
            self.write(writer)

    def write(self, writer: Writer) -> None:
        """Hand the staged batch to the writer thread (once the batch in flight is settled)."""
        self.settle()
        full, booked = self.batch, self.pending
        self.batch, self.pending = Batch(), []
        on_group = self._progress_of(full.chunk_count)
        self.in_flight = (self.pool.submit(flush, writer, self.embedder, full, self.cancel, on_group), booked)

    def settle(self) -> None:
        """Wait for the batch in flight and book it in the report (its errors are raised here)."""
        if self.in_flight is None:
            return
        future, booked = self.in_flight
        self.in_flight = None
        self.report.chunks_removed += future.result()
        for source_path, is_new, count in booked:
            (self.report.added if is_new else self.report.updated).append(source_path)
            self.report.chunks_added += count
        self.emit("commit", len(self.kept), self.total)

    def close(self) -> None:
        """After an error in the ingesting thread, the batch in flight ends before the lock goes."""
        if self.in_flight is not None:
            with contextlib.suppress(BaseException):
                self.in_flight[0].result()
        self.pool.shutdown(wait=True)

    def _progress_of(self, total: int) -> Callable[[int], None]:
        embedded = 0

        def on_group(count: int) -> None:
            nonlocal embedded
            embedded += count
            self.emit("embed", embedded, total)

        return on_group
