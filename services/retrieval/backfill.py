"""Keywords first, vectors behind: filling in the vectors of chunks already searchable by keyword.

``rag index add`` writes each batch of parsed and chunked files to the manifest and Tantivy at
once, with their chunks marked *pending* in the manifest (``pending`` table); the chunks are
searchable by keyword from that commit on.  :func:`fill_vectors` then embeds the pending chunks
a batch at a time and writes each batch as its own step: embedded with no lock held, then under
the writer lock (taken per batch, so a watch or a viewer's save waits at most one write) the
vectors of the chunks still pending go into Chroma and their marks go, journalled like any
write (:meth:`~services.retrieval.store_writer.Writer.put_vectors`).  A hybrid query meanwhile
fuses BM25 over every chunk with dense search over the embedded part, and says how much that is
(``dense: 43 % of this index``).

A partly embedded index is a state, not damage: the health checks count only the embedded
chunks.  A kill during the fill leaves the rest pending; the next ``rag index add`` (or a watch,
or the TUI's background worker once the workspace is open: :func:`pending_indexes`) continues
it.  A one-shot query never does.  One filler per index at a time (``NAME.vectors.lock``): a
second one leaves the work to the first.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from services.files.crashpoints import crash_point
from services.retrieval.ingest import Cancelled, embed_chunks
from services.retrieval.store_locks import DEFAULT_WRITE_WAIT_S
from services.retrieval.store_manifest import MANIFEST, read_index_info
from services.retrieval.store_vectors import vectors_share
from services.retrieval.store_writer import writing

if TYPE_CHECKING:
    from services.retrieval.embedders import Embedder
    from services.retrieval.store import IndexStore

CRASH_VARIABLE = "ARIES_INDEX_VECTORS_FAULT"
"""``step``: SIGKILL once a step of vectors is written (``step:sleep=S`` pauses); see services.files.crashpoints."""
FILL_BATCH = 1024
"""Chunks embedded per step (as many as an ingest batch: ``ingest.FLUSH_CHUNKS``)."""

FillProgress = Callable[[int, int], None]
"""``(chunks with vectors, chunks in the index)`` after each embedding group and each step."""


@dataclass
class FillReport:
    """What one :func:`fill_vectors` did."""

    written: int = 0
    """Vectors written by this fill."""
    pending: int = 0
    """Chunks still without vectors when it ended (cancelled, or another filler at work)."""
    chunks: int = 0
    busy: bool = False
    """Another Aries (or thread) was filling the index: this one left it to it."""
    cancelled: bool = False

    @property
    def share(self) -> float:
        """The share (0…1) of the index's chunks with vectors."""
        return 1.0 if not self.chunks else (self.chunks - self.pending) / self.chunks

    def note(self) -> str:
        """``vectors: 43 %``."""
        return vectors_share(self.chunks - self.pending, self.chunks)


def fill_vectors(
    store: IndexStore,
    embedder: Embedder,
    *,
    progress: FillProgress | None = None,
    cancel: threading.Event | None = None,
    wait_s: float = DEFAULT_WRITE_WAIT_S,
    on_wait: Callable[[str], None] | None = None,
    batch: int | None = None,
) -> FillReport:
    """Embed and write the pending vectors of ``store`` (see the module docstring), ``batch``
    chunks a step (default :data:`FILL_BATCH`); stops between embedding groups when ``cancel``
    is set (the written steps stay)."""
    report = FillReport()
    while True:
        held = store.locks.filler() if store.locks is not None else contextlib.nullcontext(True)
        with held as mine:
            if not mine:  # the filler at work writes these too: it looks again once it lets go
                report.busy = True
                break
            _fill(store, embedder, report, progress, cancel, wait_s, on_wait, batch or FILL_BATCH)
        # An ingest that found this filler busy may have marked chunks just before it let go
        if report.cancelled or not store.manifest.pending_chunks(1):
            break
    report.chunks = store.manifest.counts()[1]
    report.pending = store.manifest.pending_count()
    return report


def _fill(
    store: IndexStore,
    embedder: Embedder,
    report: FillReport,
    progress: FillProgress | None,
    cancel: threading.Event | None,
    wait_s: float,
    on_wait: Callable[[str], None] | None,
    size: int,
) -> None:
    """The steps of :func:`fill_vectors`, once this process is the index's filler."""
    from services.retrieval.store_locks import WaitCancelled

    while True:
        chunks = store.manifest.pending_chunks(size)
        if not chunks:
            return
        try:
            vectors = embed_chunks(embedder, chunks, cancel, _counting(progress, *store.manifest.embedded_share()))
            if cancel is not None and cancel.is_set():
                raise Cancelled
            with writing(store, wait_s=wait_s, on_wait=on_wait, cancel=cancel) as writer:
                report.written += writer.put_vectors(chunks, vectors)
        except (Cancelled, WaitCancelled):
            report.cancelled = True
            return
        crash_point(CRASH_VARIABLE, "step")  # the crash tests: killed between two steps
        if progress is not None:
            progress(*store.manifest.embedded_share())


def _counting(progress: FillProgress | None, embedded: int, total: int) -> Callable[[int], None] | None:
    """The ``on_group`` of one step: progress after each embedding group."""
    if progress is None:
        return None

    def on_group(count: int) -> None:
        nonlocal embedded
        embedded += count
        progress(min(embedded, total), total)

    return on_group


def pending_indexes(indexes_dir: Path) -> list[str]:
    """The indexes under ``indexes_dir`` with vectors pending (read from their manifests only:
    nothing heavy is imported or opened)."""
    if not indexes_dir.is_dir():
        return []
    names: list[str] = []
    for entry in sorted(indexes_dir.iterdir()):
        if entry.name.startswith(".") or not (entry / MANIFEST).is_file():
            continue
        info = read_index_info(entry)
        if info is not None and int(info.get("pending") or 0) > 0:
            names.append(entry.name)
    return names
