"""One named index: a Tantivy BM25 index, a Chroma collection and a SQLite manifest.

Layout of ``<workspace>/indexes/<name>/`` (backend ``sqlite``)::

    manifest.db   SQLite (WAL): meta, roots, files, chunks (text + metadata), journal
    tantivy/      BM25 (``en_stem``: English Snowball stemming) over three fields per chunk:
                  ``text`` (the chunk), ``window`` (the chunk and its neighbours, so terms split
                  across a chunk boundary still meet) and ``context`` (title / section path);
                  rebuilt from the manifest when missing, broken or of an older layout
    chroma/       embedded Chroma PersistentClient (unless a Chroma server is configured)

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
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from services.clock import utc_now
from services.retrieval.errors import IndexBusy, IndexCorrupt, VectorStoreUnavailable
from services.retrieval.models import Chunk
from services.retrieval.settings import parse_chroma_url

if TYPE_CHECKING:
    import tantivy
    from chromadb.api import ClientAPI
    from chromadb.api.collection_configuration import CreateCollectionConfiguration
    from chromadb.api.models.Collection import Collection

SCHEMA_VERSION = 1
MANIFEST = "manifest.db"
WRITER_HEAP = 64 * 1024 * 1024
CHROMA_BATCH = 1000
SQL_BATCH = 500
BM25_WINDOW = 1
"""Neighbouring chunks on each side that a chunk's ``window`` field also holds."""
FIELD_BOOSTS = {"text": 0.2, "window": 1.0, "context": 0.5}
"""BM25 is summed over the fields with these weights (``text`` ranks the chunk among its neighbours)."""
LEXICAL_FORMAT = f"2:en_stem:text+window{BM25_WINDOW}+context"
"""Changes whenever the Tantivy schema or what goes into it changes; a mismatch triggers a rebuild."""
HNSW = {"space": "cosine", "ef_construction": 200, "ef_search": 200, "max_neighbors": 16}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS roots (root TEXT PRIMARY KEY, added_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    source_path TEXT PRIMARY KEY,
    root TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    last_modified TEXT,
    title TEXT,
    config_key TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    indexed_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS files_by_root ON files(root);
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id TEXT PRIMARY KEY,
    source_path TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    context TEXT NOT NULL,
    start_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL,
    page INTEGER,
    section TEXT,
    hash TEXT NOT NULL,
    embedding_model TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_source ON chunks(source_path, ordinal);
CREATE TABLE IF NOT EXISTS journal (chunk_id TEXT PRIMARY KEY);
"""


@dataclass(frozen=True)
class FileRecord:
    source_path: str
    root: str
    content_hash: str
    size: int
    content_type: str
    last_modified: str | None
    title: str | None
    config_key: str
    chunks: int = 0
    indexed_at: str = ""


@dataclass(frozen=True)
class FileUpdate:
    """A file's new state: written whole, with all its chunks and their vectors."""

    record: FileRecord
    chunks: list[Chunk]
    vectors: list[list[float]]


@dataclass(frozen=True)
class StoredChunk:
    chunk: Chunk
    file: FileRecord


def query_analyzer() -> tantivy.TextAnalyzer:
    """The same analysis as Tantivy's built-in ``en_stem``: simple, remove_long(40), lowercase, stem."""
    import tantivy

    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


_STOPWORDS: frozenset[str] | None = None


def _stopwords() -> frozenset[str]:
    """English stop words, stemmed like the index (dropped from queries only)."""
    global _STOPWORDS
    if _STOPWORDS is None:
        import tantivy

        plain = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.lowercase()).build()
        stop = (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.stopword("english"))
            .build()
        )
        probe = (
            "a an and are as at be but by for if in into is it no not of on or such that the their then there "
            "these they this to was will with"
        )
        kept = set(stop.analyze(probe))
        removed = [word for word in plain.analyze(probe) if word not in kept]
        analyzer = query_analyzer()
        _STOPWORDS = frozenset(token for word in removed for token in analyzer.analyze(word))
    return _STOPWORDS


def _schema() -> tantivy.Schema:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("chunk_id", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("context", stored=False, tokenizer_name="en_stem", index_option="freq")
    builder.add_text_field("text", stored=False, tokenizer_name="en_stem", index_option="freq")
    builder.add_text_field("window", stored=False, tokenizer_name="en_stem", index_option="freq")
    return builder.build()


class IndexStore:
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
        elif self.get_meta("schema_version") != SCHEMA_VERSION:
            raise IndexCorrupt(f"index {name!r} has schema version {self.get_meta('schema_version')}; expected 1")
        self._tantivy = self._open_tantivy()
        self._client, self._collection = self._open_chroma()
        self._analyzer = query_analyzer()
        self._recover()

    # -- parts ---------------------------------------------------------------------------
    def _open_tantivy(self) -> tantivy.Index:
        """Open the Tantivy index; rebuild it from the manifest if it is missing, stale or broken."""
        import tantivy

        if self.directory is None:
            return tantivy.Index(_schema())
        path = self.directory / "tantivy"
        if self.get_meta("lexical_format") == LEXICAL_FORMAT and path.is_dir():
            try:
                return tantivy.Index(_schema(), path=str(path), reuse=True)
            except ValueError:
                pass  # unreadable: rebuilt below from the manifest, which holds every chunk's text
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir()
        index = tantivy.Index(_schema(), path=str(path), reuse=False)
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
                _add_lexical(writer, file_chunks)
                file_chunks = []
            file_chunks.append(chunk)
        _add_lexical(writer, file_chunks)
        writer.commit()
        writer.wait_merging_threads()
        index.reload()

    def _open_chroma(self) -> tuple[ClientAPI, Collection]:
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        client: ClientAPI
        try:
            if self.chroma_url:
                host, port, ssl = parse_chroma_url(self.chroma_url)
                client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
            elif self.directory is None:
                client = chromadb.EphemeralClient(settings=settings)
            else:
                client = chromadb.PersistentClient(path=str(self.directory / "chroma"), settings=settings)
            collection = client.get_or_create_collection(
                str(self.get_meta("collection")),
                embedding_function=None,
                configuration=cast("CreateCollectionConfiguration", {"hnsw": HNSW}),
                metadata={"aries_index": self.name},
            )
        except Exception as exc:
            self._db.close()
            if self.chroma_url:
                raise VectorStoreUnavailable(f"cannot use the Chroma server at {self.chroma_url}: {exc}") from exc
            raise IndexCorrupt(f"index {self.name!r}: cannot open the Chroma store: {exc}") from exc
        return client, collection

    # -- manifest helpers ------------------------------------------------------------------
    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._db_lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._db_lock:
            return list(self._db.execute(sql, params).fetchall())

    def get_meta(self, key: str) -> Any:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def set_meta(self, **values: Any) -> None:
        with self._tx() as db:
            for key, value in values.items():
                db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    # -- reading ---------------------------------------------------------------------------
    def file(self, source_path: str) -> FileRecord | None:
        rows = self._query("SELECT * FROM files WHERE source_path = ?", (source_path,))
        return FileRecord(*rows[0]) if rows else None

    def files_under(self, root: str) -> list[FileRecord]:
        return [
            FileRecord(*row) for row in self._query("SELECT * FROM files WHERE root = ? ORDER BY source_path", (root,))
        ]

    def roots(self) -> list[str]:
        return [row[0] for row in self._query("SELECT root FROM roots ORDER BY root")]

    def add_root(self, root: str) -> None:
        now = utc_now()
        with self._tx() as db:
            db.execute(
                "INSERT INTO roots(root, added_at, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT(root) DO UPDATE SET updated_at = excluded.updated_at",
                (root, now, now),
            )

    def counts(self) -> tuple[int, int]:
        files = self._query("SELECT COUNT(*) FROM files")[0][0]
        chunks = self._query("SELECT COUNT(*) FROM chunks")[0][0]
        return int(files), int(chunks)

    def chunk_ids(self) -> list[str]:
        return [row[0] for row in self._query("SELECT chunk_id FROM chunks ORDER BY source_path, ordinal")]

    def get_chunks(self, ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The live chunks among ``ids`` (unknown or replaced ids are absent)."""
        found: dict[str, StoredChunk] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), SQL_BATCH):
            batch = unique[start : start + SQL_BATCH]
            marks = ",".join("?" * len(batch))
            rows = self._query(
                "SELECT c.chunk_id, c.source_path, c.ordinal, c.text, c.context, c.start_offset, c.end_offset, "
                "c.page, c.section, c.hash, c.embedding_model, f.* FROM chunks c "
                f"JOIN files f ON f.source_path = c.source_path WHERE c.chunk_id IN ({marks})",
                batch,
            )
            for row in rows:
                chunk = Chunk(
                    chunk_id=row[0],
                    source_path=row[1],
                    ordinal=row[2],
                    text=row[3],
                    context=row[4],
                    start_offset=row[5],
                    end_offset=row[6],
                    page=row[7],
                    section=row[8],
                    hash=row[9],
                    embedding_model=row[10],
                )
                found[chunk.chunk_id] = StoredChunk(chunk, FileRecord(*row[11:]))
        return found

    # -- search ----------------------------------------------------------------------------
    def query_terms(self, text: str) -> list[str]:
        """Analysed query terms: stemmed like the index, stop words and repeats dropped."""
        stop = _stopwords()
        terms = [term for term in self._analyzer.analyze(text) if term not in stop]
        if not terms:  # a query made only of stop words still searches for them
            terms = list(self._analyzer.analyze(text))
        return list(dict.fromkeys(terms))

    def bm25(self, text: str, top_n: int) -> list[tuple[str, float]]:
        import tantivy

        terms = self.query_terms(text)
        if not terms:
            return []
        schema = self._tantivy.schema
        clauses = []
        for term in terms:
            for field, boost in FIELD_BOOSTS.items():
                if boost > 0:
                    query = tantivy.Query.term_query(schema, field, term)
                    if boost != 1.0:
                        query = tantivy.Query.boost_query(query, boost)
                    clauses.append((tantivy.Occur.Should, query))
        query = tantivy.Query.boolean_query(clauses)
        self._tantivy.reload()  # see commits made by other processes at once
        searcher = self._tantivy.searcher()
        result = searcher.search(query, limit=top_n, count=False)
        out: list[tuple[str, float]] = []
        seen: set[str] = set()
        for score, address in result.hits:
            chunk_id = searcher.doc(address)["chunk_id"][0]
            if chunk_id not in seen:
                seen.add(chunk_id)
                out.append((str(chunk_id), float(score)))
        return out

    def dense(self, vector: list[float], top_n: int) -> list[tuple[str, float]]:
        queries: list[Sequence[float] | Sequence[int]] = [vector]
        reply = self._collection.query(query_embeddings=queries, n_results=top_n, include=["distances"])
        ids = reply["ids"][0]
        distances = (reply.get("distances") or [[]])[0]
        return [(str(i), 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)]

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
        if self.memory:
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
        with contextlib.suppress(Exception):
            self._client.delete_collection(self._collection.name)
        self.close()
        if self.directory is not None and self.directory.exists():
            shutil.rmtree(self.directory)


def _add_lexical(writer: tantivy.IndexWriter, chunks: Sequence[Chunk]) -> None:
    """Add one file's chunks (in order) to Tantivy: own text, neighbourhood window, context."""
    import tantivy

    for position, chunk in enumerate(chunks):
        document = tantivy.Document()
        document.add_text("chunk_id", chunk.chunk_id)
        document.add_text("context", chunk.context)
        document.add_text("text", chunk.text)
        window = chunks[max(0, position - BM25_WINDOW) : position + BM25_WINDOW + 1]
        document.add_text("window", "\n".join(c.text for c in window))
        writer.add_document(document)


class Writer:
    def __init__(self, store: IndexStore, writer: tantivy.IndexWriter) -> None:
        self.store = store
        self.writer = writer

    def commit(self) -> None:
        self.writer.commit()

    def delete_from_stores(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        for start in range(0, len(ids), CHROMA_BATCH):
            self.store._collection.delete(ids=list(ids[start : start + CHROMA_BATCH]))
        for chunk_id in ids:
            self.writer.delete_documents_by_term("chunk_id", chunk_id)

    def apply(self, updates: Sequence[FileUpdate], removals: Sequence[str] = ()) -> int:
        """Write ``updates`` and drop the files in ``removals``; returns the chunks removed."""
        store = self.store
        affected = [u.record.source_path for u in updates] + list(removals)
        if not affected:
            return 0
        old_ids: set[str] = set()
        for start in range(0, len(affected), SQL_BATCH):
            batch = affected[start : start + SQL_BATCH]
            marks = ",".join("?" * len(batch))
            old_ids.update(
                row[0] for row in store._query(f"SELECT chunk_id FROM chunks WHERE source_path IN ({marks})", batch)
            )
        new_chunks = [c for u in updates for c in u.chunks]
        new_vectors = [v for u in updates for v in u.vectors]
        new_ids = [c.chunk_id for c in new_chunks]
        with store._tx() as db:
            db.executemany("INSERT OR IGNORE INTO journal(chunk_id) VALUES (?)", [(i,) for i in (*new_ids, *old_ids)])
        # 2. new chunks into both stores
        for start in range(0, len(new_chunks), CHROMA_BATCH):
            part = new_chunks[start : start + CHROMA_BATCH]
            store._collection.upsert(
                ids=[c.chunk_id for c in part],
                embeddings=new_vectors[start : start + CHROMA_BATCH],  # type: ignore[arg-type]
                metadatas=[{"source_path": c.source_path} for c in part],
            )
        for update in updates:
            for chunk in update.chunks:
                self.writer.delete_documents_by_term("chunk_id", chunk.chunk_id)
            _add_lexical(self.writer, update.chunks)
        self.writer.commit()
        # 3. swap the manifest rows in one transaction
        now = utc_now()
        with store._tx() as db:
            for start in range(0, len(affected), SQL_BATCH):
                batch = affected[start : start + SQL_BATCH]
                marks = ",".join("?" * len(batch))
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
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('updated_at', ?)", (json.dumps(now),))
        # 4. drop what was replaced, 5. clear the journal
        stale = sorted(old_ids.difference(new_ids))
        if stale:
            self.delete_from_stores(stale)
            self.writer.commit()
        with store._tx() as db:
            db.execute("DELETE FROM journal")
        return len(stale)


def read_index_info(directory: Path) -> dict[str, Any] | None:
    """Meta, roots and counts of the index in ``directory``, read without opening Tantivy or Chroma."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error:
        return None
    try:
        meta = {key: json.loads(value) for key, value in db.execute("SELECT key, value FROM meta")}
        meta["roots"] = [row[0] for row in db.execute("SELECT root FROM roots ORDER BY root")]
        meta["files"] = int(db.execute("SELECT COUNT(*) FROM files").fetchone()[0])
        meta["chunks"] = int(db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        return meta
    except (sqlite3.Error, ValueError):
        return None
    finally:
        db.close()
