"""The health of an index's vector store, and rebuilding it from the manifest.

A vector store can be damaged (disk full while Chroma wrote, a truncated HNSW segment) or
missing (the ``chroma/`` folder deleted: Chroma silently starts an empty one).  The check is
cheap and runs whenever an index is opened:

* the collection opens and counts its vectors;
* it holds at least one vector per chunk of the manifest (a journalled write adds vectors
  before the manifest names them and deletes replaced ones after, so fewer vectors than
  chunks is never a write in progress: it is loss);
* a probe query (the nearest neighbour of a stored vector) answers.

An index whose vectors are not ``ok`` answers queries from the keyword index only, with a
warning, until :func:`rebuild_vectors` has embedded every chunk of the manifest again (the
manifest holds each chunk's text, as it does for the keyword index).  The embedded store is
rebuilt in ``chroma.rebuild/`` and swapped in by renames, so a failure or a cancel leaves the
previous state; a Chroma server collection is rebuilt in place.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from services.files.atomic import fsync_dir
from services.retrieval.ingest import Cancelled, embed_chunks
from services.retrieval.models import Chunk
from services.retrieval.store_locks import DEFAULT_WRITE_WAIT_S
from services.retrieval.store_vectors import CHROMA_BATCH, open_chroma
from services.retrieval.store_writer import recover, writing
from services.workspace.paths import CHROMA_DIR

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

    from services.retrieval.embedders import Embedder
    from services.retrieval.store import IndexStore

REBUILD_FOLDER = "chroma.rebuild"
RETIRED_FOLDER = "chroma.old"
REBUILD_BATCH = 512
"""Chunks embedded and written per step of a rebuild (progress and cancel between steps)."""


ProgressFn = Callable[[int, int], None]


def _fill(
    collection: Collection,
    chunks: list[Chunk],
    embedder: Embedder,
    progress: ProgressFn | None,
    cancel: threading.Event | None,
) -> None:
    done = 0
    if progress is not None:
        progress(0, len(chunks))
    for start in range(0, len(chunks), REBUILD_BATCH):
        part = chunks[start : start + REBUILD_BATCH]
        vectors = embed_chunks(embedder, part, cancel)
        for offset in range(0, len(part), CHROMA_BATCH):
            piece = part[offset : offset + CHROMA_BATCH]
            collection.upsert(
                ids=[c.chunk_id for c in piece],
                embeddings=vectors[offset : offset + CHROMA_BATCH],  # type: ignore[arg-type]
                metadatas=[{"source_path": c.source_path} for c in piece],
            )
        done += len(part)
        if progress is not None:
            progress(done, len(chunks))


def rebuild_vectors(
    store: IndexStore,
    embedder: Embedder,
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    wait_s: float = DEFAULT_WRITE_WAIT_S,
    on_wait: Callable[[str], None] | None = None,
) -> int:
    """Embed every chunk of the manifest into a fresh vector store and swap it in.

    Holds the index's writer lock throughout (no other writer meanwhile; ``wait_s`` and
    ``on_wait`` as in :func:`~services.retrieval.store_writer.writing`), and its store lock while the new store is
    swapped in (no query of any process sees it half-swapped); the manifest's ``generation``
    moves, so other processes reopen the new store.

    Returns the number of vectors written.  Raises :class:`~services.retrieval.ingest.Cancelled`
    when ``cancel`` is set (nothing changed), and lets storage errors through (the caller turns
    them into one typed message; nothing changed either).
    """
    with writing(store, wait_s=wait_s, on_wait=on_wait, cancel=cancel):
        chunks = store.manifest.all_chunks()
        collection_name = str(store.manifest.get_meta("collection"))
        if store.directory is None or store.chroma_url:
            _rebuild_in_place(store, collection_name, chunks, embedder, progress, cancel)
        else:
            _rebuild_embedded(store, collection_name, chunks, embedder, progress, cancel)
        with store.manifest.transaction() as db:  # every chunk has its vector now: none is pending
            db.execute("DELETE FROM pending")
            store.bump_generation(db)
        with store.reading():
            store.vector_health = store.vector_check()
    recover(store)  # journal left by an interrupted write: ids without a chunk row go from Tantivy too
    return len(chunks)


def _rebuild_in_place(
    store: IndexStore,
    collection_name: str,
    chunks: list[Chunk],
    embedder: Embedder,
    progress: ProgressFn | None,
    cancel: threading.Event | None,
) -> None:
    # Embed first (the slow, cancellable part), then replace the collection's contents.
    vectors = embed_chunks(embedder, chunks, cancel)
    if cancel is not None and cancel.is_set():
        raise Cancelled
    with store.store_locked():
        if store.client is None:
            store.open_vectors()
        client = store.client
        assert client is not None
        with contextlib.suppress(Exception):
            client.delete_collection(collection_name)
        store.open_vectors()
        collection = store.vectors
        if progress is not None:
            progress(0, len(chunks))
        for start in range(0, len(chunks), CHROMA_BATCH):
            part = chunks[start : start + CHROMA_BATCH]
            collection.upsert(
                ids=[c.chunk_id for c in part],
                embeddings=vectors[start : start + CHROMA_BATCH],  # type: ignore[arg-type]
                metadatas=[{"source_path": c.source_path} for c in part],
            )
            if progress is not None:
                progress(min(start + CHROMA_BATCH, len(chunks)), len(chunks))
        with store.manifest.transaction() as db:
            store.bump_generation(db)


def _release(client: Any) -> None:
    close = getattr(client, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            close()


def _rebuild_embedded(
    store: IndexStore,
    collection_name: str,
    chunks: list[Chunk],
    embedder: Embedder,
    progress: ProgressFn | None,
    cancel: threading.Event | None,
) -> None:
    directory = store.directory
    assert directory is not None
    target = directory / REBUILD_FOLDER
    retired = directory / RETIRED_FOLDER
    shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(retired, ignore_errors=True)
    client, collection = open_chroma(store.name, directory, None, collection_name, None, folder=REBUILD_FOLDER)
    try:
        _fill(collection, chunks, embedder, progress, cancel)
    except BaseException:
        _release(client)
        shutil.rmtree(target, ignore_errors=True)
        raise
    _release(client)
    # Swap, under the store lock (no process is reading or writing the store meanwhile): the
    # damaged store goes aside, the new one takes its name, the old one is deleted.
    with store.store_locked():
        store.close_vectors()
        live = directory / CHROMA_DIR
        if live.exists():
            live.rename(retired)
        target.rename(live)
        fsync_dir(directory)
        shutil.rmtree(retired, ignore_errors=True)
        with store.manifest.transaction() as db:
            store.bump_generation(db)  # other processes reopen the new store
        store.open_vectors()
