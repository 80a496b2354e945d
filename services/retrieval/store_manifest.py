"""The SQLite manifest of an index: schema, file and chunk records, reads and transactions.

The manifest is the source of truth of an index (see :mod:`services.retrieval.store`).
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
from typing import Any

from services.clock import utc_now
from services.retrieval.models import Chunk
from services.sqlite.check import StoreRefused, TableCheck, check_sqlite
from services.workspace.paths import MANIFEST_FILE

SCHEMA_VERSION = 3
"""2 added ``failures``, 3 ``pending`` (chunks searchable by keyword whose vectors are not written
yet); an older manifest is migrated when it is opened (the tables are created: none of its chunks
is pending)."""
MANIFEST = MANIFEST_FILE
SQL_BATCH = 500

SCHEMA = """
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
CREATE TABLE IF NOT EXISTS failures (
    source_path TEXT PRIMARY KEY,
    code TEXT NOT NULL,
    message TEXT NOT NULL,
    failed_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pending (chunk_id TEXT PRIMARY KEY);
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
    """A file's new state: written whole, with all its chunks and their vectors (``None``: keywords
    first, the chunks are marked pending and their vectors follow: :mod:`services.retrieval.backfill`)."""

    record: FileRecord
    chunks: list[Chunk]
    vectors: list[list[float]] | None


@dataclass(frozen=True)
class FileFailure:
    """An indexed file that failed to load on a later run: its previous chunks are kept."""

    path: str
    code: str
    message: str
    failed_at: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "code": self.code, "message": self.message, "failed_at": self.failed_at}


@dataclass(frozen=True)
class StoredChunk:
    chunk: Chunk
    file: FileRecord


class Manifest:
    """Reads and transactions on an index's manifest: one SQLite connection, shared by threads
    under a lock.  The :class:`~services.retrieval.store.IndexStore` of the index holds one."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.lock = threading.RLock()

    @classmethod
    def in_memory(cls, name: str, chroma_url: str | None) -> Manifest:
        """A new manifest in RAM (backend ``memory``)."""
        db = sqlite3.connect(":memory:", check_same_thread=False)
        db.executescript(SCHEMA)
        manifest = cls(db)
        with manifest.transaction() as tx:
            for key, value in initial_meta(name, chroma_url).items():
                tx.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))
        return manifest

    def close(self) -> None:
        with self.lock:
            self.db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``; rolled back on any error)."""
        with self.lock:
            try:
                self.db.execute("BEGIN IMMEDIATE")
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:  # SQLite may have rolled back itself (disk full, I/O error)
                    self.db.execute("ROLLBACK")
                raise

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.lock:
            return list(self.db.execute(sql, params).fetchall())

    def get_meta(self, key: str) -> Any:
        rows = self.query("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def set_meta(self, **values: Any) -> None:
        with self.transaction() as db:
            for key, value in values.items():
                db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    @staticmethod
    def bump_generation(db: sqlite3.Connection) -> int:
        """Inside a write transaction: move ``generation`` (other processes reopen their stores); the new value."""
        row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        value = int(json.loads(row[0])) + 1 if row else 1
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('generation', ?)", (json.dumps(value),))
        return value

    # -- reading ---------------------------------------------------------------------------
    def file(self, source_path: str) -> FileRecord | None:
        rows = self.query("SELECT * FROM files WHERE source_path = ?", (source_path,))
        return FileRecord(*rows[0]) if rows else None

    def files_under(self, root: str) -> list[FileRecord]:
        return [
            FileRecord(*row) for row in self.query("SELECT * FROM files WHERE root = ? ORDER BY source_path", (root,))
        ]

    def roots(self) -> list[str]:
        return [row[0] for row in self.query("SELECT root FROM roots ORDER BY root")]

    def add_root(self, root: str) -> None:
        now = utc_now()
        with self.transaction() as db:
            db.execute(
                "INSERT INTO roots(root, added_at, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT(root) DO UPDATE SET updated_at = excluded.updated_at",
                (root, now, now),
            )

    def failures(self) -> list[FileFailure]:
        """Files whose last load failed while their previous chunks stay searchable."""
        try:
            rows = self.query("SELECT source_path, code, message, failed_at FROM failures ORDER BY source_path")
        except sqlite3.OperationalError as exc:  # a version-1 manifest that could not be migrated (read-only)
            if "no such table: failures" not in str(exc):
                raise
            return []
        return [FileFailure(*row) for row in rows]

    def record_failures(self, failed: dict[str, tuple[str, str]], cleared: Sequence[str] = ()) -> None:
        """Mark ``failed`` (path → (code, message)); forget the failures of ``cleared`` paths."""
        if not failed and not cleared:
            return
        now = utc_now()
        with self.transaction() as db:
            db.executemany("DELETE FROM failures WHERE source_path = ?", [(path,) for path in cleared])
            db.executemany(
                "INSERT INTO failures(source_path, code, message, failed_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(source_path) DO UPDATE SET code = excluded.code, message = excluded.message, "
                "failed_at = excluded.failed_at",
                [(path, code, message, now) for path, (code, message) in sorted(failed.items())],
            )
            # a failure only means something while the file still has chunks
            db.execute("DELETE FROM failures WHERE source_path NOT IN (SELECT source_path FROM files)")

    def counts(self) -> tuple[int, int]:
        files = self.query("SELECT COUNT(*) FROM files")[0][0]
        chunks = self.query("SELECT COUNT(*) FROM chunks")[0][0]
        return int(files), int(chunks)

    def pending_count(self) -> int:
        """Chunks searchable by keyword whose vectors are not written yet (see :mod:`services.retrieval.backfill`)."""
        try:
            return int(self.query("SELECT COUNT(*) FROM pending")[0][0])
        except sqlite3.OperationalError as exc:  # an older manifest that could not be migrated (read-only)
            if "no such table: pending" not in str(exc):
                raise
            return 0

    def pending_ids(self) -> set[str]:
        """The ids counted by :meth:`pending_count`."""
        if not self.pending_count():
            return set()
        return {row[0] for row in self.query("SELECT chunk_id FROM pending")}

    def pending_among(self, ids: Sequence[str]) -> set[str]:
        """Those of ``ids`` whose vectors are pending."""
        found: set[str] = set()
        for start in range(0, len(ids), SQL_BATCH):
            batch = list(ids[start : start + SQL_BATCH])
            marks = ",".join("?" * len(batch))
            found.update(
                row[0] for row in self.query(f"SELECT chunk_id FROM pending WHERE chunk_id IN ({marks})", batch)
            )
        return found

    def pending_chunks(self, limit: int) -> list[Chunk]:
        """Up to ``limit`` chunks whose vectors are pending, in file and position order."""
        rows = self.query(
            "SELECT c.chunk_id, c.source_path, c.ordinal, c.text, c.context, c.start_offset, c.end_offset, c.page, "
            "c.section, c.hash, c.embedding_model FROM pending p JOIN chunks c ON c.chunk_id = p.chunk_id "
            "ORDER BY c.source_path, c.ordinal, c.chunk_id LIMIT ?",
            (limit,),
        )
        return [Chunk(*row) for row in rows]

    def embedded_share(self) -> tuple[int, int]:
        """(chunks with their vectors written, all chunks)."""
        pending = self.pending_count()
        chunks = self.counts()[1]
        return chunks - pending, chunks

    def chunk_ids(self) -> list[str]:
        return [row[0] for row in self.query("SELECT chunk_id FROM chunks ORDER BY source_path, ordinal")]

    def all_chunks(self) -> list[Chunk]:
        """Every chunk, ordered by file and position (what Tantivy and Chroma are rebuilt from)."""
        rows = self.query(
            "SELECT chunk_id, source_path, ordinal, text, context, start_offset, end_offset, page, section, hash, "
            "embedding_model FROM chunks ORDER BY source_path, ordinal"
        )
        return [Chunk(*row) for row in rows]

    def iter_chunks(self, page: int = 4096) -> Iterator[Chunk]:
        """:meth:`all_chunks` a page at a time (keyset paging on the ``chunks_by_source`` order, the
        chunk id breaking ties): a rebuild of Tantivy holds one page in memory, not the index."""
        columns = (
            "chunk_id, source_path, ordinal, text, context, start_offset, end_offset, page, section, hash, "
            "embedding_model"
        )
        order = "ORDER BY source_path, ordinal, chunk_id LIMIT ?"
        rows = self.query(f"SELECT {columns} FROM chunks {order}", (page,))
        while rows:
            for row in rows:
                yield Chunk(*row)
            if len(rows) < page:
                return
            last = rows[-1]
            rows = self.query(
                f"SELECT {columns} FROM chunks WHERE (source_path, ordinal, chunk_id) > (?, ?, ?) {order}",
                (last[1], last[2], last[0], page),
            )

    def journal_size(self) -> int:
        return int(self.query("SELECT COUNT(*) FROM journal")[0][0])

    def get_chunks(self, ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The live chunks among ``ids`` (unknown or replaced ids are absent)."""
        found: dict[str, StoredChunk] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), SQL_BATCH):
            batch = unique[start : start + SQL_BATCH]
            marks = ",".join("?" * len(batch))
            rows = self.query(
                "SELECT c.chunk_id, c.source_path, c.ordinal, c.text, c.context, c.start_offset, c.end_offset, "
                "c.page, c.section, c.hash, c.embedding_model, f.* FROM chunks c "
                f"JOIN files f ON f.source_path = c.source_path WHERE c.chunk_id IN ({marks})",
                batch,
            )
            for row in rows:
                chunk = Chunk(*row[:11])
                found[chunk.chunk_id] = StoredChunk(chunk, FileRecord(*row[11:]))
        return found


def read_index_info(directory: Path) -> dict[str, Any] | None:
    """Meta, roots and counts of the index in ``directory``, read without opening Tantivy or Chroma."""
    from services.sqlite.readonly import UnreadableWal, connect_readonly

    path = Path(directory) / MANIFEST
    if not path.is_file():
        return None
    try:
        db = connect_readonly(path)
    except (sqlite3.Error, UnreadableWal):
        return None
    try:
        meta = {key: json.loads(value) for key, value in db.execute("SELECT key, value FROM meta")}
        meta["roots"] = [row[0] for row in db.execute("SELECT root FROM roots ORDER BY root")]
        meta["files"] = int(db.execute("SELECT COUNT(*) FROM files").fetchone()[0])
        meta["chunks"] = int(db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        try:
            rows = db.execute("SELECT source_path, code, message, failed_at FROM failures ORDER BY source_path")
            meta["failed"] = [FileFailure(*row).to_dict() for row in rows]
        except sqlite3.OperationalError:  # a version-1 manifest not opened since: no failures table
            meta["failed"] = []
        try:
            meta["pending"] = int(db.execute("SELECT COUNT(*) FROM pending").fetchone()[0])
        except sqlite3.OperationalError:  # a manifest of before version 3: every chunk has its vector
            meta["pending"] = 0
        return meta
    except (sqlite3.Error, ValueError):
        return None
    finally:
        db.close()


def open_manifest(path: Path, name: str, *, read_only: bool) -> sqlite3.Connection:
    """The connection of an index's manifest (WAL); ``read_only`` where its folder cannot be
    written (see :func:`services.retrieval.readonly.connect_readonly`)."""
    if not read_only:
        db = sqlite3.connect(path, check_same_thread=False, timeout=30)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as exc:  # not a database, or a damaged one
            db.close()
            raise damaged_manifest(name, exc) from None
        return db
    from services.retrieval.errors import IndexStorageError
    from services.retrieval.readonly import why_unwritable
    from services.sqlite.readonly import UnreadableWal, connect_readonly

    try:
        return connect_readonly(path, timeout=30)
    except UnreadableWal:
        why = why_unwritable(path.parent)
        raise IndexStorageError(
            f"index {name!r}: cannot read it: its last writes are in {MANIFEST}-wal, which SQLite reads only "
            f"with {MANIFEST}-shm, and that file is missing and cannot be made ({why}); make the index folder "
            "writable once and open the index (nothing is lost)",
            index=name,
            reason=why,
        ) from None


def damaged_manifest(name: str, error: Exception) -> Exception:
    """The one line for an index whose manifest SQLite cannot read (and the way out)."""
    from services.retrieval.errors import IndexCorrupt

    return IndexCorrupt(
        f"index {name!r}: its manifest ({MANIFEST}) is damaged ({error}); rebuild the index from its folder: "
        f"aries rag index rebuild {name} --from FOLDER",
        index=name,
    )


def migrate_schema(manifest: Manifest, name: str) -> None:
    """Bring an older manifest to :data:`SCHEMA_VERSION` (its tables exist: ``SCHEMA`` ran)."""
    version = manifest.get_meta("schema_version")
    if version == SCHEMA_VERSION:
        return
    if isinstance(version, int) and 1 <= version < SCHEMA_VERSION:
        manifest.set_meta(schema_version=SCHEMA_VERSION)
        return
    from services.retrieval.errors import IndexCorrupt

    raise IndexCorrupt(
        f"index {name!r} has manifest schema version {version}; this Aries reads up to {SCHEMA_VERSION} "
        "(it was written by a newer Aries?)"
    )


def initial_meta(name: str, chroma_url: str | None) -> dict[str, object]:
    """The meta rows of a new index (``generation`` moves with every batch write)."""
    now = utc_now()
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "created_at": now,
        "updated_at": now,
        "collection": f"aries-{uuid.uuid4().hex}",
        "chroma_url": chroma_url,
        "generation": 0,
    }


def create_manifest(directory: Path, name: str, chroma_url: str | None) -> None:
    """Build a new index's manifest in a temporary folder and rename it into place (atomic)."""
    from services.files.atomic import fsync_dir

    parent = directory.parent
    parent.mkdir(parents=True, exist_ok=True)
    for stale in parent.glob(f".{directory.name}.creating-*"):  # left by a killed creation
        shutil.rmtree(stale, ignore_errors=True)
    temp = parent / f".{directory.name}.creating-{uuid.uuid4().hex[:12]}"
    temp.mkdir()
    try:
        db = sqlite3.connect(temp / MANIFEST)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
            with db:
                for key, value in initial_meta(name, chroma_url).items():
                    db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))
        finally:
            db.close()
        fsync_dir(temp)
        if directory.is_dir() and not (directory / MANIFEST).is_file():
            shutil.rmtree(directory)  # parts of an index whose manifest never existed: nothing to keep
        try:
            temp.rename(directory)
        except OSError:
            if not (directory / MANIFEST).is_file():
                raise
            # another process created it first: use that one
        fsync_dir(parent)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


# -- a manifest from outside, and the authority it holds (services.trust, services.bundles) ----------
REQUIRED_TABLES = ("meta", "roots", "files", "chunks")

IMPORT_CHECK = TableCheck(SCHEMA, frozenset({("meta", "value")}))
"""The manifest's tables as an import checks them (every meta value is JSON)."""


def check_imported(path: Path, rel: str) -> None:
    """Refuse (:class:`~services.sqlite.check.StoreRefused`, naming ``rel``) a manifest that arrived in
    a bundle unless it is what Aries writes: a whole SQLite database without triggers or views, the
    tables and column types of :data:`SCHEMA`, and a schema version this Aries reads."""
    check_sqlite(path, rel, [IMPORT_CHECK], required=REQUIRED_TABLES)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.Error as exc:
        raise StoreRefused(f"{rel} cannot be read ({exc}); the bundle is refused") from None
    finally:
        db.close()
    try:
        version = int(str(row[0])) if row is not None else SCHEMA_VERSION
    except ValueError:
        version = -1
    if not 1 <= version <= SCHEMA_VERSION:
        raise StoreRefused(
            f"{rel} has manifest schema version {row[0] if row else '?'}; this Aries reads 1 to "
            f"{SCHEMA_VERSION}; the bundle is refused"
        )


def clear_chroma_url(path: Path) -> None:
    """Forget the Chroma server recorded in the manifest at ``path`` (authority: it opens a connection)."""
    db = sqlite3.connect(path, timeout=5, isolation_level=None)
    try:
        db.execute("UPDATE meta SET value = 'null' WHERE key = 'chroma_url'")
    finally:
        db.close()


def take_roots(path: Path) -> list[list[str]]:
    """Remove and return the ``roots`` rows (root, added_at, updated_at) of the manifest at ``path``
    (one transaction): the folders an index re-reads are authority."""
    db = sqlite3.connect(path, timeout=10, isolation_level=None)
    try:
        db.execute("PRAGMA trusted_schema=OFF")
        db.execute("BEGIN IMMEDIATE")
        rows = [[str(c) for c in row] for row in db.execute("SELECT root, added_at, updated_at FROM roots")]
        db.execute("DELETE FROM roots")
        db.execute("COMMIT")
        return rows
    finally:
        db.close()


def put_roots(path: Path, rows: list[list[str]]) -> None:
    """Add ``roots`` rows (root, added_at, updated_at) to the manifest at ``path``; a root it has is kept."""
    db = sqlite3.connect(path, timeout=10, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT OR IGNORE INTO roots(root, added_at, updated_at) VALUES (?, ?, ?)", rows)
        db.execute("COMMIT")
    finally:
        db.close()


def embedding_model(path: Path) -> str | None:
    """The embedding model recorded in the manifest at ``path`` (read-only), or None when it has none
    or cannot be read."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'embedding_model'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return None if row is None else str(row[0]).strip('"')


def quick_check(path: Path) -> list[str]:
    """``PRAGMA quick_check(3)`` of the manifest at ``path``, read-only: ``["ok"]`` when it is whole.
    Raises :class:`sqlite3.Error` when it cannot be read."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return [str(row[0]) for row in db.execute("PRAGMA quick_check(3)").fetchall()]
    finally:
        db.close()
