"""One named index: a Tantivy BM25 index, a Chroma collection and a SQLite manifest.

Layout of ``<workspace>/indexes/<name>/`` (backend ``sqlite``)::

    manifest.db   SQLite (WAL): meta, roots, files, chunks (text + metadata), journal
    tantivy/      BM25 (``en_stem``: English Snowball stemming) over three fields per chunk:
                  ``text`` (the chunk), ``window`` (the chunk and its neighbours, so terms split
                  across a chunk boundary still meet) and ``context`` (title / section path),
                  and the chunk id twice: ``chunk_id`` (indexed and stored: deletes, checks) and
                  ``chunk_key`` (its 64 bits as a u64 fast field: what BM25 reads per hit);
                  rebuilt from the manifest when missing, broken or of an older layout.  Each
                  batch commits a segment and waits for the merges it starts (under the store
                  lock), so the segments stay few: a query pays per segment
    chroma/       embedded Chroma PersistentClient (unless a Chroma server is configured);
                  checked on open (``vector_health``): when damaged or missing, queries are
                  keyword-only until ``store_health.rebuild_vectors`` re-embeds the manifest's chunks

Queries are analysed like the index, English stop words are dropped (index-side they stay),
and the per-field BM25 scores are summed with ``FIELD_BOOSTS``; equal scores come in chunk id
order (not in Tantivy's document order, which depends on the segments).

The manifest is the source of truth: a chunk exists when its row is in ``chunks``.  Search
results from Tantivy and Chroma that have no row are dropped, so a file is visible either
with all of its new chunks or all of its old ones, never half.  Writes follow a journal:

1. the ids about to be written or replaced go into ``journal`` (committed);
2. the new chunks are written to Chroma and Tantivy (committed);
3. one SQLite transaction swaps the files' rows and chunk rows;
4. replaced chunks are deleted from Chroma and Tantivy;
5. the journal rows are deleted.

Opening an index, and every ingest before it writes, replays the journal when no other
process is writing (the writer lock is free): ids in it without a ``chunks`` row are deleted
from both stores.

Concurrency (see :mod:`services.retrieval.store_locks`): one ingest per index at a time
(the writer lock, held for its keyword phase, then taken per step of the vectors that follow:
:mod:`services.retrieval.backfill`; chunks in the ``pending`` table have no vector yet); every
use of the stores — one query, or one batch write (steps 1-5 above) — holds the store lock, so
a query sees the state before or after a batch and waits at most one batch write.  Each batch
bumps ``generation`` in the manifest; a process whose embedded Chroma client is older than the generation reopens it
before using it.  A new index's manifest is built in a temporary folder and renamed into
place, so an index is either absent or whole.  Where the index folder cannot be written the
store opens for reading only (``read_only``; see :mod:`services.retrieval.readonly`).

Backend ``memory`` keeps all three parts in RAM (Tantivy RAM directory, Chroma
``EphemeralClient`` with a collection of its own, SQLite ``:memory:``).

The parts live in ``store_manifest`` (SQLite: :class:`~services.retrieval.store_manifest.Manifest`,
held as ``IndexStore.manifest``), ``store_lexical`` (Tantivy) and ``store_vectors`` (Chroma);
:class:`IndexStore` holds them and the locks.  Writing (the journal above, and its replay) is
``store_writer``: ``writing(store)``, ``recover(store)``.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from services.retrieval.errors import IndexCorrupt, VectorStoreDamaged
from services.retrieval.faults import store_part
from services.retrieval.relevance import term_weight
from services.retrieval.store_check import Consistency, check_stores
from services.retrieval.store_lexical import (
    LEXICAL_FORMAT,
    bm25_search,
    open_lexical,
    query_analyzer,
    question_terms,
    stopwords,
)
from services.retrieval.store_locks import IndexLocks
from services.retrieval.store_manifest import (
    MANIFEST,
    SCHEMA,
    SCHEMA_VERSION,
    Manifest,
    create_manifest,
    damaged_manifest,
    migrate_schema,
    open_manifest,
)
from services.retrieval.store_vectors import OK, VectorHealth, check_vectors, dense_search, open_chroma, unopenable
from services.sqlite.readonly import writable

if TYPE_CHECKING:
    import tantivy
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection


class IndexStore:
    """Tantivy + Chroma + manifest for one index.  See the module docstring for the locking."""

    def __init__(
        self,
        name: str,
        directory: Path | None,
        *,
        chroma_url: str | None = None,
        create: bool = True,
    ) -> None:
        self.name = name
        self.directory = Path(directory) if directory is not None else None
        self.memory = directory is None
        self.chroma_url = chroma_url
        self.write_lock = threading.RLock()
        """Held by this process's writer of the index (see :func:`services.retrieval.store_writer.writing`)."""
        self._memory_lock = threading.RLock()
        self._held = threading.local()  # ``fresh``: this thread's outermost reading() opened the parts
        self._closed = False
        self.locks: IndexLocks | None = None
        self.read_only = False  # the folder cannot be written: see services.retrieval.readonly
        self._tantivy_index: tantivy.Index | None = None
        self._client_api: ClientAPI | None = None
        self._collection_api: Collection | None = None
        self._generation = -1
        if self.directory is not None:
            self.locks = IndexLocks(self.directory.parent, name)
            if not (self.directory / MANIFEST).is_file():
                if not create:
                    raise IndexCorrupt(f"index {name!r} has no manifest at {self.directory}")
                create_manifest(self.directory, name, chroma_url)
            self.read_only = not writable(self.directory)
            db = open_manifest(self.directory / MANIFEST, name, read_only=self.read_only)
            try:
                db.execute("SELECT key, value FROM meta LIMIT 1").fetchall()
            except sqlite3.DatabaseError as exc:
                db.close()
                raise damaged_manifest(name, exc) from None
            self.manifest = Manifest(db)
        else:
            self.manifest = Manifest.in_memory(name, chroma_url)
        version = self.manifest.get_meta("schema_version")
        if version != SCHEMA_VERSION and not (self.read_only and isinstance(version, int) and version < SCHEMA_VERSION):
            try:
                if isinstance(version, int) and 1 <= version < SCHEMA_VERSION:
                    self.manifest.db.executescript(SCHEMA)  # the tables added since (``failures``)
                migrate_schema(self.manifest, name)  # or IndexCorrupt for a version this Aries does not read
            except BaseException:
                self.manifest.close()
                raise
        self.vector_health = VectorHealth(OK, "")
        self._opened = False
        self._analyzer = query_analyzer()
        try:
            with self.reading():  # opens Tantivy and Chroma, and checks the vectors, under the store lock
                pass
        except BaseException:
            self._close_client()
            with contextlib.suppress(sqlite3.Error):
                self.manifest.close()
            raise

    # -- parts ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def store_locked(self, *, reader: bool = False) -> Iterator[None]:
        """Hold the store lock (a ``reader`` goes on without it where it cannot be taken) without opening anything."""
        lock = self.locks.store(reader=reader) if self.locks is not None else contextlib.nullcontext()
        with self._memory_lock, lock:
            yield

    @contextlib.contextmanager
    def reading(self, *, write: bool = False) -> Iterator[None]:
        """Hold the store lock (one query, or one batch ``write``) with Tantivy and Chroma open and current."""
        if self._closed:
            raise IndexCorrupt(f"index {self.name!r} is closed")
        with self.store_locked(reader=not write):
            outer = not getattr(self._held, "fresh", False)
            if outer:  # the outermost use in this thread: nobody writes until it lets go
                self._fresh()
                self._held.fresh = True
            try:
                yield
            finally:
                if outer:
                    self._held.fresh = False

    def _fresh(self) -> None:
        """Open the parts, or reopen them if another process wrote since they were opened.

        The first time (the store is being opened) the vector store is checked
        (``vector_health``); an embedded store that does not open leaves the index keyword-only
        (it is tried again only after another process wrote, e.g. rebuilt it), and one found
        damaged is checked again whenever it is reopened.
        """
        generation = int(self.manifest.get_meta("generation") or 0)
        stale = self.directory is not None and generation != self._generation
        first = not self._opened
        if self._tantivy_index is None or stale:
            self._tantivy_index, rebuilt = self._open_tantivy()
            if rebuilt:  # other processes' readers open the new files (they do not reload per query)
                with self.manifest.transaction() as db:
                    self.bump_generation(db)
                generation = self._generation
        if (self._collection_api is None and (first or stale)) or (stale and not self.chroma_url):
            self._close_client()
            try:
                self.open_vectors(opening=first)
            except IndexCorrupt as exc:  # an embedded store that does not open: keyword-only until rebuilt
                self.vector_health = unopenable(exc, self.directory if self.read_only else None)
            else:
                if first or not self.vector_health.ok:
                    self.vector_health = self.vector_check()
        self._opened = True
        self._generation = generation  # under the store lock: nobody else wrote since it was read

    def bump_generation(self, db: sqlite3.Connection) -> None:
        """Inside a write transaction: mark the stores as changed (other processes reopen; this one is current)."""
        self._generation = Manifest.bump_generation(db)

    @property
    def lexical(self) -> tantivy.Index:
        """The Tantivy index (use it under :meth:`reading`)."""
        if self._tantivy_index is None:
            raise IndexCorrupt(f"index {self.name!r}: the keyword index is not open")
        return self._tantivy_index

    @property
    def _collection(self) -> Collection:
        if self._collection_api is None:
            raise IndexCorrupt(f"index {self.name!r}: the vector store is not open")
        return self._collection_api

    def _open_tantivy(self) -> tuple[tantivy.Index, bool]:
        """Open the Tantivy index (and whether it was rebuilt on disk): rebuilt from the manifest if
        it is missing, stale or broken."""
        current = self.manifest.get_meta("lexical_format") == LEXICAL_FORMAT
        index, rebuilt = open_lexical(
            self.name, self.directory, current, self.manifest.iter_chunks, read_only=self.read_only
        )
        if rebuilt:
            self.manifest.set_meta(lexical_format=LEXICAL_FORMAT)
        return index, rebuilt

    def open_vectors(self, *, opening: bool = False) -> None:
        """(Re)open the Chroma client and collection.  Raises IndexCorrupt (embedded store) or
        VectorStoreUnavailable (server: while ``opening`` the store, its manifest is closed too,
        since the store does not open)."""
        db = self.manifest.db if opening and self.chroma_url else None
        collection = str(self.manifest.get_meta("collection"))
        self._client_api, self._collection_api = open_chroma(self.name, self.directory, self.chroma_url, collection, db)

    @property
    def client(self) -> ClientAPI | None:
        """The Chroma client, once open."""
        return self._client_api

    # -- vector store health (see services.retrieval.store_health) -----------------------------
    @property
    def vectors(self) -> Collection:
        """The Chroma collection (use it under :meth:`reading`); :class:`VectorStoreDamaged` when it did not open."""
        if self._collection_api is None:
            raise VectorStoreDamaged(self.vector_health.warning(self.name), index=self.name)
        return self._collection_api

    def check_vectors(self) -> VectorHealth:
        """Collection present, a vector per manifest chunk, a probe query that answers (under the store lock)."""
        with self.reading():
            return self.vector_check()

    def vector_check(self) -> VectorHealth:
        """:meth:`check_vectors` without taking the store lock (the caller holds it)."""
        if self._collection_api is None:
            return self.vector_health
        embedded, chunks = self.manifest.embedded_share()
        return check_vectors(self._collection_api, embedded, chunks)

    def close_vectors(self) -> None:
        """Release the Chroma client (it is reopened on the next :meth:`reading`)."""
        self._close_client()

    def _close_client(self) -> None:
        client, self._client_api, self._collection_api = self._client_api, None, None
        close = getattr(client, "close", None)
        if close is not None:  # clients of one path share a refcounted system: this releases ours
            with contextlib.suppress(Exception):
                close()

    # -- search ----------------------------------------------------------------------------
    def query_terms(self, text: str) -> list[str]:
        """Analysed query terms: stemmed like the index, stop words and repeats dropped."""
        stop = stopwords()
        terms = [term for term in self._analyzer.analyze(text) if term not in stop]
        if not terms:  # a query made only of stop words still searches for them
            terms = list(self._analyzer.analyze(text))
        return list(dict.fromkeys(terms))

    def keyword_weights(self, text: str) -> dict[str, float]:
        """The query's keyword terms (question words left out) and their weights in this index
        (:func:`~services.retrieval.relevance.term_weight`); call it under :meth:`reading`."""
        skip = question_terms()
        terms = [term for term in self.query_terms(text) if term not in skip]
        if not terms:
            return {}
        searcher = self.lexical.searcher()
        documents = int(searcher.num_docs)
        return {term: term_weight(documents, int(searcher.doc_freq("text", term))) for term in terms}

    def terms(self, text: str) -> frozenset[str]:
        """``text`` analysed like the index (stemmed, lower-case)."""
        return frozenset(self._analyzer.analyze(text))

    def bm25(self, text: str, top_n: int) -> list[tuple[str, float]]:
        terms = self.query_terms(text)
        if not terms:
            return []
        with self.reading():
            return bm25_search(self.lexical, terms, top_n)

    def dense(self, vector: list[float], top_n: int, *, held: bool = False) -> list[tuple[str, float]]:
        """Dense search; :class:`VectorStoreDamaged` (and the store marked so) when it fails.

        ``held``: the store lock is held for this search by another thread of the same query,
        which waits for it before it lets go (the engine searches Chroma while BM25 searches).
        """
        with contextlib.nullcontext() if held else self.reading():
            collection = self.vectors
            try:
                return dense_search(collection, vector, top_n)
            except Exception:
                if self.chroma_url:
                    raise
                self.vector_health = self.vector_check()
                if self.vector_health.ok:
                    raise
                raise VectorStoreDamaged(self.vector_health.warning(self.name), index=self.name) from None

    def consistency(self) -> Consistency:
        """Compare the manifest's chunk ids with the ids in Tantivy and in Chroma
        (:class:`VectorStoreDamaged` when the vector store does not open)."""
        with self.reading():
            try:
                return check_stores(
                    self.name,
                    self.manifest.chunk_ids(),
                    self.lexical,
                    self.vectors,
                    self.manifest.journal_size(),
                    self.manifest.pending_ids(),
                )
            except Exception as exc:
                if store_part(exc) != "the vector store (Chroma)" or self.chroma_url:
                    raise
                self.vector_health = self.vector_check()
                if self.vector_health.ok:
                    raise
                raise VectorStoreDamaged(self.vector_health.warning(self.name), index=self.name) from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.memory and self._client_api is not None:
            with contextlib.suppress(Exception):
                self._client_api.delete_collection(str(self.manifest.get_meta("collection")))
        self._close_client()
        self.manifest.close()

    def destroy(self) -> None:
        """Delete everything: the collection (also on a Chroma server) and the directory."""
        with self.store_locked():  # no other process is in the middle of a query or a batch
            if self._client_api is not None:
                with contextlib.suppress(Exception):
                    self._client_api.delete_collection(str(self.manifest.get_meta("collection")))
            self.close()
            if self.directory is not None and self.directory.exists():
                shutil.rmtree(self.directory)
