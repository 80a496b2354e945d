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
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from services.clock import format_ts
from services.errors import NotFound
from services.hashing import sha256_hex
from services.names import validate_name
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

if TYPE_CHECKING:
    from services.retrieval.sandbox import LoaderSandbox


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
            with held:
                return self._add_locked(
                    root, name, candidates, skipped, report, started, progress, cancel, activate=activate
                )
        except WaitCancelled:
            report.cancelled = True
            report.elapsed_s = round(time.monotonic() - started, 3)
            return report

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
            return self._add_locked(
                base, name, candidates, skipped, report, started, None, None, activate=False, only=frozenset(paths)
            )

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
        counter = default_counter()
        chunk_key = self.chunk_config.key(counter)
        limits = self.settings.limits
        root_key = root.as_posix()

        def emit(stage: str, done: int, total: int, where: str | None = None) -> None:
            if progress is not None:
                progress(ProgressEvent(stage, done, total, where))

        report.skipped.extend(skipped)
        emit("scan", len(candidates), len(candidates))
        store.manifest.add_root(root_key)
        if only is None:
            known = {record.source_path: record for record in store.manifest.files_under(root_key)}
        else:  # an update of a few files (a save in the viewer): their records only, not the whole root's
            found = (store.manifest.file(path) for path in sorted(only))
            known = {record.source_path: record for record in found if record is not None and record.root == root_key}
        kept: set[str] = set()
        failed: dict[str, tuple[str, str]] = {}  # indexed files that failed to load: chunks kept, marked failed
        batch = Batch()
        pending: list[tuple[str, bool, int]] = []  # (source path, is new, chunks) of the unwritten batch
        # Two stages overlap: this thread reads, parses and chunks the next batch while the writer
        # thread embeds and writes the previous one (at most one batch in flight).
        in_flight: tuple[Future[int], list[tuple[str, bool, int]]] | None = None
        writer_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-writer")

        def progress_of(total: int) -> Callable[[int], None]:
            embedded = 0

            def on_group(count: int) -> None:
                nonlocal embedded
                embedded += count
                emit("embed", embedded, total)

            return on_group

        def settle() -> None:
            """Wait for the batch in flight and book it in the report (its errors are raised here)."""
            nonlocal in_flight
            if in_flight is None:
                return
            future, booked = in_flight
            in_flight = None
            report.chunks_removed += future.result()
            for source_path, is_new, count in booked:
                (report.added if is_new else report.updated).append(source_path)
                report.chunks_added += count
            emit("commit", len(kept), len(candidates))

        def write(writer: Any) -> None:
            nonlocal batch, pending, in_flight
            settle()
            full, booked = batch, pending
            batch, pending = Batch(), []
            on_group = progress_of(full.chunk_count)
            in_flight = (writer_pool.submit(flush, writer, embedder, full, cancel, on_group), booked)

        with writing(store) as writer:
            try:
                for number, (rel, real) in enumerate(candidates, start=1):
                    if cancel is not None and cancel.is_set():
                        raise Cancelled
                    emit("file", number, len(candidates), rel)
                    existing = known.get(rel) or store.manifest.file(rel)
                    if existing is not None and existing.root != root_key:
                        report.errors.append(
                            file_issue(
                                rel,
                                DuplicateSource(f"{rel} is already indexed from {existing.root}; use another index"),
                            )
                        )
                        continue
                    try:
                        data, mtime = self._read(real)
                        content_hash = sha256_hex(data)
                        if (
                            existing is not None
                            and existing.content_hash == content_hash
                            and existing.config_key == chunk_key
                        ):
                            kept.add(rel)
                            report.unchanged.append(rel)
                            continue
                        content_type = content_type_for(rel) or "text/plain"
                        document = self._load(content_type, data)
                        chunks = chunk_document(
                            document,
                            rel,
                            embedding_model=embedder.model_id,
                            config=self.chunk_config,
                            max_chunks=limits.max_chunks,
                            deadline=time.monotonic() + limits.timeout_s,
                        )
                        if not chunks:
                            raise EmptyDocument("the file has no text")
                    except IngestError as exc:
                        # over a limit: skipped (with the limit named); anything else: failed
                        (report.skipped if exc.code in LIMIT_CODES else report.errors).append(file_issue(rel, exc))
                        if existing is not None:  # its previous chunks stay searchable until it loads again
                            kept.add(rel)
                            failed[rel] = (exc.code, exc.message)
                            report.kept.append(rel)
                        continue
                    record = FileRecord(
                        source_path=rel,
                        root=root_key,
                        content_hash=content_hash,
                        size=len(data),
                        content_type=document.content_type,
                        last_modified=format_ts(datetime.fromtimestamp(mtime, UTC)),
                        title=document.title,
                        config_key=chunk_key,
                    )
                    kept.add(rel)
                    batch.files.append((record, chunks))
                    pending.append((rel, existing is None, len(chunks)))
                    if batch.full():
                        write(writer)
                gone = sorted(set(known) - kept - set(batch.removals))
                if only is not None:  # an update of a few files: only those may be dropped
                    gone = [path for path in gone if path in only]
                batch.removals.extend(gone)
                report.removed.extend(gone)
                if batch:
                    write(writer)
                settle()
            except Cancelled:
                with contextlib.suppress(Cancelled):
                    settle()  # a batch that was written before the cancel is booked
                report.cancelled = True
                report.removed = [path for path in report.removed if store.manifest.file(path) is None]
            finally:
                if in_flight is not None:  # an error in this thread: the batch in flight ends before the lock goes
                    with contextlib.suppress(BaseException):
                        in_flight[0].result()
                writer_pool.shutdown(wait=True)
        store.manifest.record_failures(failed, cleared=[*report.unchanged, *report.updated, *report.removed])
        if activate and not report.cancelled and self.indexes.active is None:
            self.indexes.set_active(name)
            report.activated = True
        report.elapsed_s = round(time.monotonic() - started, 3)
        emit("done", len(candidates), len(candidates))
        return report

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
