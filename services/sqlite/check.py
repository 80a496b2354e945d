"""Checking a SQLite database that arrives from outside (a bundle) before anything opens it.

Generic: this module knows no table of Aries.  Each store exports the :class:`TableCheck` of its own
tables (its schema and the text columns where it keeps JSON) and its file's import check runs
:func:`check_sqlite` with them (``services.retrieval.store_manifest.check_imported`` for an index
manifest; ``services.audit.db.check_imported`` for ``audit.db``, whose tables come from several stores).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from services.errors import AriesError

SQLITE_MAGIC = b"SQLite format 3\x00"

__all__ = ["Column", "StoreRefused", "TableCheck", "Tables", "check_sqlite", "checkpoint", "is_sqlite", "tables_of"]


class StoreRefused(AriesError):
    """A store in a bundle that is not what Aries wrote: the import is refused (one line)."""

    code = "store_refused"
    exit_code = 2


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    notnull: bool


Tables = dict[str, list[Column]]
"""Table name → the columns Aries reads from it."""


@dataclass(frozen=True)
class TableCheck:
    """What the import check needs to know of one store's tables."""

    schema: str
    """The store's ``CREATE TABLE`` script."""
    json_columns: frozenset[tuple[str, str]] = frozenset()
    """``(table, column)`` of the text columns that hold JSON besides the ``*_json`` ones (Aries decodes
    them when it reads a row)."""


def is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def tables_of(*schemas: str) -> Tables:
    """The tables (and their columns) that ``schemas`` (``CREATE TABLE`` scripts) create."""
    db = sqlite3.connect(":memory:")
    try:
        for schema in schemas:
            db.executescript(schema)
        return _columns(db)
    finally:
        db.close()


def _columns(db: sqlite3.Connection) -> Tables:
    tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {
        table: [Column(str(r[1]), str(r[2]).upper(), bool(r[3])) for r in db.execute(f'PRAGMA table_info("{table}")')]
        for table in tables
    }


_TYPES = {"TEXT": ("text",), "INTEGER": ("integer",), "REAL": ("real", "integer")}


def _bad_values(db: sqlite3.Connection, table: str, column: Column, json_columns: frozenset[tuple[str, str]]) -> int:
    """Rows whose ``column`` Aries could not read as the type it wrote (SQLite keeps any type)."""
    allowed = _TYPES.get(column.type)
    if allowed is None:
        return 0
    kinds = [f"'{kind}'" for kind in allowed] + ([] if column.notnull else ["'null'"])
    condition = f'typeof("{column.name}") NOT IN ({", ".join(kinds)})'
    if column.name.endswith("_json") or (table, column.name) in json_columns:
        condition += f' OR ("{column.name}" IS NOT NULL AND NOT json_valid("{column.name}"))'
    row = db.execute(f'SELECT COUNT(*) FROM "{table}" WHERE {condition}').fetchone()
    return int(row[0])


def _refuse_code(db: sqlite3.Connection, rel: str) -> None:
    """Integrity, and no triggers or views (Aries never writes them; a trigger would run on its writes)."""
    problems = [str(row[0]) for row in db.execute("PRAGMA integrity_check(5)")]
    if problems != ["ok"]:
        raise StoreRefused(f"{rel} is damaged (integrity_check: {'; '.join(problems)[:200]}); the bundle is refused")
    code = [
        f"{kind} {name}"
        for kind, name in db.execute("SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view')")
    ]
    if code:
        raise StoreRefused(
            f"{rel} holds {', '.join(code[:3])}: Aries never writes triggers or views; the bundle is refused"
        )


def _check_tables(
    db: sqlite3.Connection,
    rel: str,
    expected: Tables,
    required: tuple[str, ...],
    json_columns: frozenset[tuple[str, str]],
) -> None:
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
                f"{rel}: table {table} lacks {', '.join(missing)}: it is not what Aries wrote; the bundle is refused"
            )
        for column in wanted:
            bad = _bad_values(db, table, column, json_columns)
            if bad:
                raise StoreRefused(
                    f"{rel}: {bad} row(s) of {table}.{column.name} hold values Aries never writes; "
                    "the bundle is refused"
                )


def check_sqlite(path: Path, rel: str, checks: Sequence[TableCheck], *, required: tuple[str, ...] = ()) -> None:
    """Refuse ``path`` (shown as ``rel``) unless it is a whole SQLite database Aries can read safely:
    integrity, no triggers or views, and in each table of ``checks`` every column Aries reads, holding
    values of the type Aries wrote (valid JSON where it keeps JSON); ``required`` tables must exist."""
    if not is_sqlite(path):
        raise StoreRefused(f"{rel} is not a SQLite database; the bundle is refused")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        raise StoreRefused(f"{rel} cannot be opened ({exc}); the bundle is refused") from None
    try:
        db.execute("PRAGMA trusted_schema=OFF")
        db.execute("PRAGMA cell_size_check=ON")
        _refuse_code(db, rel)
        if checks:
            expected = tables_of(*(check.schema for check in checks))
            json_columns = frozenset().union(*(check.json_columns for check in checks))
            _check_tables(db, rel, expected, required, json_columns)
    except sqlite3.Error as exc:
        raise StoreRefused(f"{rel} cannot be read ({exc}); the bundle is refused") from None
    finally:
        db.close()


def checkpoint(database: Path) -> None:
    """Fold the write-ahead log of ``database`` into it (``wal_checkpoint(TRUNCATE)``); raises
    :class:`sqlite3.Error`."""
    db = sqlite3.connect(database, timeout=5)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
