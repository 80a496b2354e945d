"""Embedding staged files and writing them to an index, whole files at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from services.retrieval.embedders import Embedder
from services.retrieval.models import Chunk
from services.retrieval.store_manifest import FileRecord, FileUpdate
from services.retrieval.store_writer import Writer

EMBED_GROUP = 32
"""Chunks embedded per call (one model batch); a cancel, or a query waiting for the model, waits at most this long."""
FLUSH_CHUNKS = 1024
"""A batch is written once this many chunks are staged."""
FLUSH_FILES = 256


class Cancelled(Exception):
    """Raised inside a flush when the cancel event is set; nothing of the batch was written."""


@dataclass
class Batch:
    """Files that were read and chunked but not written yet."""

    files: list[tuple[FileRecord, list[Chunk]]] = field(default_factory=list)
    removals: list[str] = field(default_factory=list)

    @property
    def chunk_count(self) -> int:
        return sum(len(chunks) for _, chunks in self.files)

    def full(self) -> bool:
        return self.chunk_count >= FLUSH_CHUNKS or len(self.files) >= FLUSH_FILES

    def __bool__(self) -> bool:
        return bool(self.files or self.removals)


def embed_chunks(
    embedder: Embedder,
    chunks: Sequence[Chunk],
    cancel: threading.Event | None = None,
    on_group: Callable[[int], None] | None = None,
) -> list[list[float]]:
    """Vectors for ``chunks`` (in their order), embedded in groups of similar length.

    Grouping by length keeps padding low, as one big encoder call would, while the small
    groups let a cancel take effect within seconds.
    """
    order = sorted(range(len(chunks)), key=lambda i: (-len(chunks[i].embed_text), i))
    vectors: list[list[float]] = [[] for _ in chunks]
    for start in range(0, len(order), EMBED_GROUP):
        if cancel is not None and cancel.is_set():
            raise Cancelled
        group = order[start : start + EMBED_GROUP]
        for position, vector in zip(group, embedder.embed([chunks[i].embed_text for i in group]), strict=True):
            vectors[position] = vector
        if on_group is not None:
            on_group(len(group))
    return vectors


def flush(
    writer: Writer,
    embedder: Embedder | None,
    batch: Batch,
    cancel: threading.Event | None = None,
    on_group: Callable[[int], None] | None = None,
) -> int:
    """Embed and write ``batch``; returns the number of chunks removed.  Clears the batch.

    Without an ``embedder`` the batch is written keywords first: its chunks are searchable by
    keyword from this write on and marked pending for their vectors (:mod:`services.retrieval.backfill`)."""
    updates: list[FileUpdate] = []
    if embedder is None:
        updates = [FileUpdate(record, file_chunks, None) for record, file_chunks in batch.files]
    else:
        chunks = [c for _, file_chunks in batch.files for c in file_chunks]
        vectors = embed_chunks(embedder, chunks, cancel, on_group)
        if cancel is not None and cancel.is_set():
            raise Cancelled
        position = 0
        for record, file_chunks in batch.files:
            updates.append(FileUpdate(record, file_chunks, vectors[position : position + len(file_chunks)]))
            position += len(file_chunks)
    removed = writer.apply(updates, batch.removals)
    batch.files.clear()
    batch.removals.clear()
    return removed
