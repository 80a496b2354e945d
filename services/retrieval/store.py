"""One named index: a Tantivy BM25 index, a Chroma collection and a SQLite manifest.

Layout of ``<workspace>/indexes/<name>/`` (backend ``sqlite``)::

    manifest.db   SQLite (WAL): meta, roots, files, chunks (text + metadata), journal
    tantivy/      BM25 (``en_stem``: English Snowball stemming) over three fields per chunk:
                  ``text`` (the chunk), ``window`` (the chunk and its neighbours, so terms split
                  across a chunk boundary still meet) and ``context`` (title / section path);
                  rebuilt from the manifest when missing, broken or of an older layout
    chroma/       embedded Chroma PersistentClient (unless a Chroma server is configured);
                  checked on open (``vector_health``): when damaged or missing, queries are
                  keyword-only until ``store_health.rebuild_vectors`` re-embeds the manifest's chunks

Queries are analysed like the index, English stop words are dropped (index-side they stay),
and the per-field BM25 scores are summed with ``FIELD_BOOSTS``.

The manifest is the source of truth: a chunk exists when its row is in ``chunks``.  Search
results from Tantivy and Chroma that have no row are dropped, so a file is visible either
with all of its new chunks or all of its old ones, never half.  Writes follow a journal:

1. the ids about to be written or replaced go into ``journal`` (committed);
2. the new chunks are written to Chroma and Tantivy (committed);
3. one SQLite transaction swaps the files' rows and chunk rows;
4. replaced chunks are deleted from Chroma and Tantivy;
5. the journal rows are deleted.

Opening an index replays the journal: ids in it without a ``chunks`` row are deleted from
both stores.  Backend ``memory`` keeps all three parts in RAM (Tantivy RAM directory, Chroma
``EphemeralClient`` with a collection of its own, SQLite ``:memory:``).

The parts live in ``store_manifest`` (SQLite), ``store_lexical`` (Tantivy), ``store_vectors``
(Chroma) and ``store_writer`` (the journalled write); :class:`IndexStore` puts them together.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from services.clock import utc_now
from services.retrieval.errors import IndexBusy, IndexCorrupt, VectorStoreDamaged
from services.retrieval.models import Chunk
from services.retrieval.store_lexical import (
    BM25_WINDOW,
    FIELD_BOOSTS,
    LEXICAL_FORMAT,
    WRITER_HEAP,
    add_lexical,
    bm25_search,
    query_analyzer,
    stopwords,
    tantivy_schema,
)
from services.retrieval.store_manifest import (
    _SCHEMA,
    MANIFEST,
    SCHEMA_VERSION,
    SQL_BATCH,
    FileRecord,
    FileUpdate,
    Manifest,
    StoredChunk,
    migrate_schema,
    read_index_info,
)
from services.retrieval.store_vectors import (
    CHROMA_BATCH,
    HNSW,
    OK,
    VectorHealth,
    check_vectors,
    dense_search,
    open_chroma,
    unopenable,
)
from services.retrieval.store_writer import Writer

if TYPE_CHECKING:
    import tantivy
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

__all__ = [
    "BM25_WINDOW",
    "CHROMA_BATCH",
    "FIELD_BOOSTS",
    "HNSW",
    "LEXICAL_FORMAT",
    "MANIFEST",
    "SCHEMA_VERSION",
    "SQL_BATCH",
    "WRITER_HEAP",
    "FileRecord",
    "FileUpdate",
    "IndexStore",
    "StoredChunk",
    "VectorHealth",
    "Writer",
    "_schema",
    "query_analyzer",
    "read_index_info",
]

_schema = tantivy_schema  # the name services.workspace_check imports


class IndexStore(Manifest):
    """Tantivy + Chroma + manifest for one index.  Writes are serialised; reads are concurrent."""

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
        self._write_lock = threading.RLock()
        self._db_lock = threading.RLock()
        self._closed = False
        if self.directory is not None:
            if not create and not (self.directory / MANIFEST).is_file():
                raise IndexCorrupt(f"index {name!r} has no manifest at {self.directory}")
            self.directory.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.directory / MANIFEST, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        else:
            self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.executescript(_SCHEMA)
        if self.get_meta("schema_version") is None:
            with self._tx() as db:
                now = utc_now()
                for key, value in (
                    ("schema_version", SCHEMA_VERSION),
                    ("name", name),
                    ("created_at", now),
                    ("updated_at", now),
                    ("collection", f"aries-{uuid.uuid4().hex}"),
                    ("chroma_url", chroma_url),
                ):
                    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))
        else:
            migrate_schema(self, name)
        self._tantivy = self._open_tantivy()
        self._client: ClientAPI | None = None
        self._collection: Collection | None = None
        self.vector_health = VectorHealth(OK, "")
        try:
            self._client, self._collection = self._open_chroma(opening=True)
        except IndexCorrupt as exc:  # an embedded store that does not open: keyword-only until rebuilt
            self.vector_health = unopenable(exc)
        else:
            self.vector_health = self.check_vectors()
        self._analyzer = query_analyzer()
        self._recover()

    # -- parts ---------------------------------------------------------------------------
    def _open_tantivy(self) -> tantivy.Index:
        """Open the Tantivy index; rebuild it from the manifest if it is missing, stale or broken."""
        import tantivy

        if self.directory is None:
            return tantivy.Index(tantivy_schema())
        path = self.directory / "tantivy"
        if self.get_meta("lexical_format") == LEXICAL_FORMAT and path.is_dir():
            try:
                return tantivy.Index(tantivy_schema(), path=str(path), reuse=True)
            except ValueError:
                pass  # unreadable: rebuilt below from the manifest, which holds every chunk's text
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir()
        index = tantivy.Index(tantivy_schema(), path=str(path), reuse=False)
        self._fill_lexical(index)
        self.set_meta(lexical_format=LEXICAL_FORMAT)
        return index

    def _fill_lexical(self, index: tantivy.Index) -> None:
        """Write every live chunk into an empty Tantivy index (no embedding needed)."""
        rows = self._query(
            "SELECT chunk_id, source_path, ordinal, text, context, start_offset, end_offset, page, section, hash, "
            "embedding_model FROM chunks ORDER BY source_path, ordinal"
        )
        if not rows:
            return
        try:
            writer = index.writer(heap_size=WRITER_HEAP, num_threads=1)
        except ValueError as exc:
            raise IndexBusy(f"index {self.name!r} is being written by another process: {exc}") from exc
        file_chunks: list[Chunk] = []
        for row in rows:
            chunk = Chunk(*row)
            if file_chunks and file_chunks[-1].source_path != chunk.source_path:
                add_lexical(writer, file_chunks)
                file_chunks = []
            file_chunks.append(chunk)
        add_lexical(writer, file_chunks)
        writer.commit()
        writer.wait_merging_threads()
        index.reload()

    def _open_chroma(self, *, opening: bool = False) -> tuple[ClientAPI, Collection]:
        """Raises IndexCorrupt (embedded store) or VectorStoreUnavailable (server: while ``opening``
        the store, its manifest is closed too, since the store does not open)."""
        db = self._db if opening and self.chroma_url else None
        return open_chroma(self.name, self.directory, self.chroma_url, str(self.get_meta("collection")), db)

    # -- vector store health (see services.retrieval.store_health) -----------------------------
    @property
    def vectors(self) -> Collection:
        """The Chroma collection; :class:`VectorStoreDamaged` when it did not open."""
        if self._collection is None:
            raise VectorStoreDamaged(self.vector_health.warning(self.name), index=self.name)
        return self._collection

    def check_vectors(self) -> VectorHealth:
        """Collection present, a vector per manifest chunk, a probe query that answers."""
        if self._collection is None:
            return self.vector_health
        return check_vectors(self._collection, self.counts()[1])

    # -- search ----------------------------------------------------------------------------
    def query_terms(self, text: str) -> list[str]:
        """Analysed query terms: stemmed like the index, stop words and repeats dropped."""
        stop = stopwords()
        terms = [term for term in self._analyzer.analyze(text) if term not in stop]
        if not terms:  # a query made only of stop words still searches for them
            terms = list(self._analyzer.analyze(text))
        return list(dict.fromkeys(terms))

    def bm25(self, text: str, top_n: int) -> list[tuple[str, float]]:
        terms = self.query_terms(text)
        if not terms:
            return []
        return bm25_search(self._tantivy, terms, top_n)

    def dense(self, vector: list[float], top_n: int) -> list[tuple[str, float]]:
        """Dense search; :class:`VectorStoreDamaged` (and the store marked so) when it fails."""
        collection = self.vectors
        try:
            return dense_search(collection, vector, top_n)
        except Exception as exc:
            if self.chroma_url:
                raise
            self.vector_health = unopenable(exc) if self._collection is None else self.check_vectors()
            if self.vector_health.ok:
                raise
            raise VectorStoreDamaged(self.vector_health.warning(self.name), index=self.name) from None

    # -- writing ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self) -> Iterator[Writer]:
        """Hold the write lock and a Tantivy writer for a series of :meth:`Writer.apply` calls."""
        with self._write_lock:
            try:
                writer = self._tantivy.writer(heap_size=WRITER_HEAP, num_threads=1)
            except ValueError as exc:
                raise IndexBusy(f"index {self.name!r} is being written by another process: {exc}") from exc
            try:
                yield Writer(self, writer)
            finally:
                with contextlib.suppress(ValueError, RuntimeError):
                    writer.wait_merging_threads()
                del writer
                self._tantivy.reload()

    def _recover(self) -> None:
        if not self.vector_health.ok:
            return  # replayed after the vectors are rebuilt (store_health.rebuild_vectors)
        pending = [row[0] for row in self._query("SELECT chunk_id FROM journal")]
        if not pending:
            return
        try:
            with self.writing() as writer:
                # Holding the writer lock means no other process is in the middle of a write,
                # so every journal entry belongs to an interrupted one.
                pending = [row[0] for row in self._query("SELECT chunk_id FROM journal")]
                live = set(self.get_chunks(pending))
                writer.delete_from_stores([chunk_id for chunk_id in pending if chunk_id not in live])
                writer.commit()
                with self._tx() as db:
                    db.execute("DELETE FROM journal")
        except IndexBusy:
            return  # another process is writing; its journal is live, not left over

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.memory and self._client is not None and self._collection is not None:
            with contextlib.suppress(Exception):
                self._client.delete_collection(self._collection.name)
        close = getattr(self._client, "close", None)
        if close is not None:  # clients of one path share a refcounted system: this releases ours
            with contextlib.suppress(Exception):
                close()
        with self._db_lock:
            self._db.close()

    def destroy(self) -> None:
        """Delete everything: the collection (also on a Chroma server) and the directory."""
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.delete_collection(str(self.get_meta("collection")))
        self.close()
        if self.directory is not None and self.directory.exists():
            shutil.rmtree(self.directory)
