"""Stores that arrive from outside are checked before anything opens them.

On import (:func:`check_imported_stores`, run on the staging folder before the workspace appears):

* **The SQLite files Aries opens** (``audit.db``, each index's ``manifest.db``) must be SQLite
  databases that pass ``PRAGMA integrity_check``, hold no triggers or views (Aries never writes them;
  a trigger would run on Aries's own writes), are not from a newer schema, and have, in every table
  Aries knows, every column it reads holding values of the type it writes (valid JSON where it keeps
  JSON: SQLite itself keeps any value in any column).
  SQLite side files (``-wal``, ``-shm``, ``-journal``) are refused: an export checkpoints the databases
  and never carries them, and SQLite would replay them into a database after it was checked. Any
  failure **refuses the import**, naming the file and the reason.
* **Keyword (Tantivy) and vector (Chroma) stores are never read from a bundle.** They are derived from
  the manifest (which holds every chunk's text), so an imported index keeps only its checked
  ``manifest.db``; the keyword index is rebuilt from it when the index is first opened, and the
  vectors by ``aries rag index repair NAME`` (which ``aries workspace import`` runs right after the
  import). Hostile Tantivy meta files and corrupt HNSW segments are therefore never parsed. An index's
  recorded Chroma server (``meta.chroma_url``, authority: it opens a connection) is cleared: the rebuilt
  vectors live in the workspace's embedded store.
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from services.errors import AriesError

SQLITE_MAGIC = b"SQLite format 3\x00"
SIDE_SUFFIXES = ("-wal", "-shm", "-journal")
MANIFEST = "manifest.db"
REBUILT = "its keyword and vector stores are rebuilt from its manifest (never read from a bundle)"


class StoreRefused(AriesError):
    """A store in a bundle that is not what Aries wrote: the import is refused (one line)."""

    code = "store_refused"
    exit_code = 2


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _audit_tables() -> dict[str, list[Column]]:
    """Every table Aries keeps in ``audit.db`` → the columns it reads."""
    from services.audit_db import CONTEXT_REQUESTS_SCHEMA as REQUESTS
    from services.audit_db import CONTEXT_TRACES_SCHEMA as TRACES
    from services.audit_db import PLAN_RUNS_SCHEMA as PLANS
    from services.audit_db import SCHEMA
    from services.bridge.audit import _SCHEMA as CLOUD
    from services.profiles.audit import _SCHEMA as SWITCHES
    from services.retrieval.audit import _SCHEMA as RETRIEVALS

    return _tables_of(SCHEMA, CLOUD, REQUESTS, TRACES, PLANS, SWITCHES, RETRIEVALS)


def _manifest_tables() -> dict[str, list[Column]]:
    from services.retrieval.store_manifest import _SCHEMA

    return _tables_of(_SCHEMA)


def _tables_of(*schemas: str) -> dict[str, list[Column]]:
    db = sqlite3.connect(":memory:")
    try:
        for schema in schemas:
            db.executescript(schema)
        return _columns(db)
    finally:
        db.close()


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    notnull: bool


def _columns(db: sqlite3.Connection) -> dict[str, list[Column]]:
    tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {
        table: [Column(str(r[1]), str(r[2]).upper(), bool(r[3])) for r in db.execute(f'PRAGMA table_info("{table}")')]
        for table in tables
    }


_TYPES = {"TEXT": ("text",), "INTEGER": ("integer",), "REAL": ("real", "integer")}
JSON_COLUMNS = {
    ("meta", "value"),  # an index manifest's meta values
    ("retrievals", "params"),
    ("retrievals", "results"),
    ("cloud_calls", "redactions"),
    ("profile_switches", "tools"),
    ("context_requests", "counts"),
    ("context_traces", "data"),
}
"""Text columns that hold JSON besides the ``*_json`` ones: Aries decodes them when it reads a row."""


def _bad_values(db: sqlite3.Connection, table: str, column: Column) -> int:
    """Rows whose ``column`` Aries could not read as the type it wrote (SQLite keeps any type)."""
    allowed = _TYPES.get(column.type)
    if allowed is None:
        return 0
    kinds = [f"'{kind}'" for kind in allowed] + ([] if column.notnull else ["'null'"])
    condition = f'typeof("{column.name}") NOT IN ({", ".join(kinds)})'
    if column.name.endswith("_json") or (table, column.name) in JSON_COLUMNS:
        condition += f' OR ("{column.name}" IS NOT NULL AND NOT json_valid("{column.name}"))'
    row = db.execute(f'SELECT COUNT(*) FROM "{table}" WHERE {condition}').fetchone()
    return int(row[0])


def check_sqlite(
    path: Path, rel: str, expected: dict[str, list[Column]] | None, *, required: tuple[str, ...] = ()
) -> None:
    """Refuse ``path`` (shown as ``rel``) unless it is a whole SQLite database Aries can read safely:
    integrity, no triggers or views, and in each table Aries knows every column it reads, holding
    values of the type Aries wrote (valid JSON where it keeps JSON)."""
    if not _is_sqlite(path):
        raise StoreRefused(f"{rel} is not a SQLite database; the bundle is refused")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        raise StoreRefused(f"{rel} cannot be opened ({exc}); the bundle is refused") from None
    try:
        db.execute("PRAGMA trusted_schema=OFF")
        db.execute("PRAGMA cell_size_check=ON")
        problems = [str(row[0]) for row in db.execute("PRAGMA integrity_check(5)")]
        if problems != ["ok"]:
            raise StoreRefused(
                f"{rel} is damaged (integrity_check: {'; '.join(problems)[:200]}); the bundle is refused"
            )
        code = [
            f"{kind} {name}"
            for kind, name in db.execute("SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view')")
        ]
        if code:
            raise StoreRefused(
                f"{rel} holds {', '.join(code[:3])}: Aries never writes triggers or views; the bundle is refused"
            )
        if expected is None:
            return
        found = _columns(db)
        for table in required:
            if table not in found:
                raise StoreRefused(f"{rel} has no table {table}: it is not what Aries wrote; the bundle is refused")
        for table, columns in sorted(found.items()):
            have = {c.name for c in columns}
            wanted = expected.get(table, [])
            missing = [c.name for c in wanted if c.name not in have]
            if missing:
                raise StoreRefused(
                    f"{rel}: table {table} lacks {', '.join(missing)}: it is not what Aries wrote; "
                    "the bundle is refused"
                )
            for column in wanted:
                bad = _bad_values(db, table, column)
                if bad:
                    raise StoreRefused(
                        f"{rel}: {bad} row(s) of {table}.{column.name} hold values Aries never writes; "
                        "the bundle is refused"
                    )
    except sqlite3.Error as exc:
        raise StoreRefused(f"{rel} cannot be read ({exc}); the bundle is refused") from None
    finally:
        db.close()


def _check_versions(path: Path, rel: str) -> None:
    """Schema versions this Aries can read (a newer one is refused now, not at first use)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        if rel == "audit.db":
            from services.audit_db import SCHEMA_VERSION

            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise StoreRefused(
                    f"audit.db has schema version {version}; this Aries reads up to {SCHEMA_VERSION} "
                    "(exported by a newer Aries?); the bundle is refused"
                )
        else:
            from services.retrieval.store_manifest import SCHEMA_VERSION as MANIFEST_VERSION

            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            try:
                version = int(str(row[0])) if row is not None else MANIFEST_VERSION
            except ValueError:
                version = -1
            if not 1 <= version <= MANIFEST_VERSION:
                raise StoreRefused(
                    f"{rel} has manifest schema version {row[0] if row else '?'}; this Aries reads 1 to "
                    f"{MANIFEST_VERSION}; the bundle is refused"
                )
    except sqlite3.Error as exc:
        raise StoreRefused(f"{rel} cannot be read ({exc}); the bundle is refused") from None
    finally:
        db.close()


def _clear_chroma_url(database: Path) -> None:
    db = sqlite3.connect(database, timeout=5, isolation_level=None)
    try:
        db.execute("UPDATE meta SET value = 'null' WHERE key = 'chroma_url'")
    finally:
        db.close()


def check_imported_stores(tree: Path) -> dict[str, str]:
    """Check every store of the workspace folder ``tree`` (an import's staging folder); return, for
    each index, why its derived stores will be rebuilt. Raises :class:`StoreRefused`."""
    files = sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
    for path in files:
        if path.name.endswith(SIDE_SUFFIXES):
            raise StoreRefused(
                f"{path.relative_to(tree).as_posix()}: a SQLite side file (an export never carries one); "
                "the bundle is refused"
            )
    rebuild: dict[str, str] = {}
    derived = tree / "cache"  # never carried by an export; a bundle's own is not read: rebuilt here
    if derived.is_dir() and not derived.is_symlink():
        shutil.rmtree(derived)
    elif derived.exists() or derived.is_symlink():
        derived.unlink()
    indexes = tree / "indexes"
    for index in sorted(indexes.iterdir()) if indexes.is_dir() else []:
        if not index.is_dir():
            continue
        for entry in sorted(index.iterdir()):
            if entry.name == MANIFEST:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        if (index / MANIFEST).is_file():
            rebuild[index.name] = REBUILT
    audit, manifests = None, None
    for path in sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(tree).as_posix()
        if rel == "audit.db":
            audit = audit or _audit_tables()
            check_sqlite(path, rel, audit)
            _check_versions(path, rel)
        elif rel.startswith("indexes/") and path.name == MANIFEST and rel.count("/") == 2:
            manifests = manifests or _manifest_tables()
            check_sqlite(path, rel, manifests, required=("meta", "roots", "files", "chunks"))
            _check_versions(path, rel)
            _clear_chroma_url(path)
    return rebuild
