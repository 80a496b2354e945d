"""Writing files into an index: the journalled sequence described in :mod:`services.retrieval.store`.

:func:`writing` makes this process the one writer of an index (after replaying a journal left by
an interrupted writer: :func:`recover`) and hands out a :class:`Writer`.  Each
:meth:`Writer.apply` is one batch: it holds the index's store lock and a Tantivy writer of its
own from step 1 to step 5 (so Tantivy merges and file deletions happen under the lock too), and
bumps the manifest's ``generation`` at its start and its end.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from services.clock import utc_now
from services.retrieval.errors import IndexBusy
from services.retrieval.readonly import not_writable
from services.retrieval.store import IndexStore
from services.retrieval.store_lexical import WRITER_HEAP, add_lexical
from services.retrieval.store_locks import DEFAULT_WRITE_WAIT_S
from services.retrieval.store_manifest import SQL_BATCH, FileUpdate
from services.retrieval.store_vectors import CHROMA_BATCH

if TYPE_CHECKING:
    import tantivy

    from services.retrieval.models import Chunk


@contextlib.contextmanager
def writing(
    store: IndexStore,
    *,
    wait_s: float = DEFAULT_WRITE_WAIT_S,
    on_wait: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> Iterator[Writer]:
    """Be the one writer of ``store`` (waiting for another Aries up to ``wait_s``) for a series of
    :meth:`Writer.apply` calls; a journal left by an interrupted writer is replayed first."""
    if store.read_only:
        raise not_writable(store.name, store.directory, "write to it")
    locked = (
        store.locks.writer(wait_s=wait_s, on_wait=on_wait, cancel=cancel)
        if store.locks is not None
        else contextlib.nullcontext()
    )
    with locked, store.write_lock:
        recover(store)
        yield Writer(store)


def recover(store: IndexStore) -> None:
    """Replay a journal left by an interrupted write, if no other process is writing now
    (run whenever an index is opened for use, and before every ingest writes)."""
    if store.read_only or not store.vector_health.ok:
        return  # replayed after the vectors are rebuilt (store_health.rebuild_vectors)
    if store.locks is not None and not store.locks.try_writer():
        return  # another process is writing; its journal is live, not left over
    try:
        with store.write_lock:
            if not store.manifest.journal_size():
                return
            with Writer(store).batch() as writer:
                pending = [row[0] for row in store.manifest.query("SELECT chunk_id FROM journal")]
                live = set(store.manifest.get_chunks(pending))
                writer.delete_from_stores([chunk_id for chunk_id in pending if chunk_id not in live])
                writer.commit()
                with store.manifest.transaction() as db:
                    db.execute("DELETE FROM journal")
                    store.bump_generation(db)
    finally:
        if store.locks is not None:
            store.locks.release_writer()


class Writer:
    """Writes into ``store``; the caller holds the writer lock (:func:`writing`)."""

    def __init__(self, store: IndexStore) -> None:
        self.store = store
        self._tantivy_writer: tantivy.IndexWriter | None = None

    @property
    def writer(self) -> tantivy.IndexWriter:
        """The Tantivy writer of the batch in progress (only inside :meth:`batch`)."""
        if self._tantivy_writer is None:
            raise RuntimeError("no batch in progress: use Writer.batch()")
        return self._tantivy_writer

    @contextlib.contextmanager
    def batch(self) -> Iterator[Writer]:
        """The store lock and a Tantivy writer for one batch; merges finish before the lock is released."""
        if self._tantivy_writer is not None:  # nested: the outer batch holds everything
            yield self
            return
        with self.store.reading(write=True):
            index = self.store.lexical
            try:
                tantivy_writer = index.writer(heap_size=WRITER_HEAP, num_threads=1)
            except ValueError as exc:
                raise IndexBusy(f"index {self.store.name!r} is being written by another process: {exc}") from exc
            self._tantivy_writer = tantivy_writer
            done = False
            try:
                yield self
                done = True
            finally:
                self._tantivy_writer = None
                if not done:  # uncommitted documents of a failed batch are dropped
                    with contextlib.suppress(ValueError, RuntimeError):
                        tantivy_writer.rollback()
                # The merges the commits started finish here (a rollback would kill them: every
                # batch would stay a segment of its own, and a query pays per segment).
                with contextlib.suppress(ValueError, RuntimeError):
                    tantivy_writer.wait_merging_threads()
                del tantivy_writer
                index.reload()

    def commit(self) -> None:
        self.writer.commit()

    def delete_from_stores(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        for start in range(0, len(ids), CHROMA_BATCH):
            self.store.vectors.delete(ids=list(ids[start : start + CHROMA_BATCH]))
        for chunk_id in ids:
            self.writer.delete_documents_by_term("chunk_id", chunk_id)

    def apply(self, updates: Sequence[FileUpdate], removals: Sequence[str] = ()) -> int:
        """Write ``updates`` and drop the files in ``removals``; returns the chunks removed."""
        affected = [u.record.source_path for u in updates] + list(removals)
        if not affected:
            return 0
        with self.batch():
            return self._apply(updates, removals, affected)

    def _apply(self, updates: Sequence[FileUpdate], removals: Sequence[str], affected: list[str]) -> int:
        new_chunks = [c for u in updates for c in u.chunks]
        new_ids = [c.chunk_id for c in new_chunks]
        old_ids = self._journal(affected, new_ids)  # 1. every chunk id touched, journaled first
        self._add_chunks(updates, new_chunks)  # 2. new chunks into both stores
        self._swap_rows(updates, affected, new_chunks)  # 3. swap the manifest rows in one transaction
        # 4. drop what was replaced, 5. clear the journal
        stale = sorted(old_ids.difference(new_ids))
        if stale:
            self.delete_from_stores(stale)
            self.writer.commit()
        with self.store.manifest.transaction() as db:
            db.execute("DELETE FROM journal")
            self.store.bump_generation(db)
        return len(stale)

    def _journal(self, affected: list[str], new_ids: list[str]) -> set[str]:
        """The ids of the chunks the files in ``affected`` have now; they and ``new_ids`` go into the
        journal (after an interrupted write, :func:`recover` drops those the manifest does not hold)."""
        store = self.store
        old_ids: set[str] = set()
        for start in range(0, len(affected), SQL_BATCH):
            batch = affected[start : start + SQL_BATCH]
            marks = ",".join("?" * len(batch))
            old_ids.update(
                row[0]
                for row in store.manifest.query(f"SELECT chunk_id FROM chunks WHERE source_path IN ({marks})", batch)
            )
        with store.manifest.transaction() as db:
            db.executemany("INSERT OR IGNORE INTO journal(chunk_id) VALUES (?)", [(i,) for i in (*new_ids, *old_ids)])
            store.bump_generation(db)
        return old_ids

    def _add_chunks(self, updates: Sequence[FileUpdate], new_chunks: list[Chunk]) -> None:
        """The chunks of ``updates`` into the vector store (those that come with vectors) and the
        lexical index (committed)."""
        embedded = [u for u in updates if u.vectors is not None]
        self.upsert_vectors([c for u in embedded for c in u.chunks], [v for u in embedded for v in u.vectors or ()])
        for update in updates:
            for chunk in update.chunks:
                self.writer.delete_documents_by_term("chunk_id", chunk.chunk_id)
            add_lexical(self.writer, update.chunks)
        self.writer.commit()

    def upsert_vectors(self, chunks: Sequence[Chunk], vectors: Sequence[list[float]]) -> None:
        """``vectors`` of ``chunks`` into the vector store (under the store lock)."""
        for start in range(0, len(chunks), CHROMA_BATCH):
            part = chunks[start : start + CHROMA_BATCH]
            self.store.vectors.upsert(
                ids=[c.chunk_id for c in part],
                embeddings=list(vectors[start : start + CHROMA_BATCH]),  # type: ignore[arg-type]
                metadatas=[{"source_path": c.source_path} for c in part],
            )

    def put_vectors(self, chunks: Sequence[Chunk], vectors: Sequence[list[float]]) -> int:
        """One step of the vectors that follow the keywords: the vectors of those of ``chunks``
        still pending (a chunk replaced or dropped since it was read is left out) go into the
        vector store, then their pending marks go, with the same journal as :meth:`apply`
        (an interrupted step leaves them pending: the next one writes them again).  Returns
        the vectors written."""
        with self.store.reading(write=True):
            pending = self.store.manifest.pending_among([chunk.chunk_id for chunk in chunks])
            keep = [i for i, chunk in enumerate(chunks) if chunk.chunk_id in pending]
            if not keep:
                return 0
            ids = [chunks[i].chunk_id for i in keep]
            with self.store.manifest.transaction() as db:
                db.executemany("INSERT OR IGNORE INTO journal(chunk_id) VALUES (?)", [(i,) for i in ids])
                self.store.bump_generation(db)
            self.upsert_vectors([chunks[i] for i in keep], [vectors[i] for i in keep])
            with self.store.manifest.transaction() as db:
                for start in range(0, len(ids), SQL_BATCH):
                    batch = ids[start : start + SQL_BATCH]
                    db.execute(f"DELETE FROM pending WHERE chunk_id IN ({','.join('?' * len(batch))})", batch)
                db.execute("DELETE FROM journal")
                self.store.bump_generation(db)
            return len(ids)

    def _swap_rows(self, updates: Sequence[FileUpdate], affected: list[str], new_chunks: list[Chunk]) -> None:
        """The manifest rows of the files in ``affected`` replaced by those of ``updates``, in one transaction."""
        now = utc_now()
        with self.store.manifest.transaction() as db:
            for start in range(0, len(affected), SQL_BATCH):
                batch = affected[start : start + SQL_BATCH]
                marks = ",".join("?" * len(batch))
                db.execute(
                    "DELETE FROM pending WHERE chunk_id IN "
                    f"(SELECT chunk_id FROM chunks WHERE source_path IN ({marks}))",
                    batch,
                )
                db.execute(f"DELETE FROM chunks WHERE source_path IN ({marks})", batch)
                db.execute(f"DELETE FROM files WHERE source_path IN ({marks})", batch)
            db.executemany(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        u.record.source_path,
                        u.record.root,
                        u.record.content_hash,
                        u.record.size,
                        u.record.content_type,
                        u.record.last_modified,
                        u.record.title,
                        u.record.config_key,
                        len(u.chunks),
                        now,
                    )
                    for u in updates
                ],
            )
            db.executemany(
                "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        c.chunk_id,
                        c.source_path,
                        c.ordinal,
                        c.text,
                        c.context,
                        c.start_offset,
                        c.end_offset,
                        c.page,
                        c.section,
                        c.hash,
                        c.embedding_model,
                    )
                    for c in new_chunks
                ],
            )
            db.executemany(
                "INSERT OR IGNORE INTO pending(chunk_id) VALUES (?)",
                [(c.chunk_id,) for u in updates if u.vectors is None for c in u.chunks],
            )
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('updated_at', ?)", (json.dumps(now),))
