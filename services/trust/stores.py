"""Stores that arrive from outside are checked before anything opens them.

On import (:func:`check_imported_stores`, run on the staging folder before the workspace appears):

* **The SQLite files Aries opens** (``audit.db``, each index's ``manifest.db``) must be SQLite
  databases that pass ``PRAGMA integrity_check``, hold no triggers or views (Aries never writes them;
  a trigger would run on Aries's own writes), are not from a newer schema, and have, in every table
  Aries knows, every column it reads holding values of the type it writes (valid JSON where it keeps
  JSON: SQLite itself keeps any value in any column).
  SQLite side files (``-wal``, ``-shm``, ``-journal``) are refused: an export checkpoints the databases
  and never carries them, and SQLite would replay them into a database after it was checked. Any
  failure **refuses the import**, naming the file and the reason. Each store runs its own check
  (``services.audit.db.check_imported`` with the tables of the stores that share ``audit.db``;
  ``services.retrieval.store_manifest.check_imported``): this module holds no SQL.
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
from pathlib import Path

from services.sqlite.check import StoreRefused as StoreRefused
from services.workspace.paths import AUDIT_FILE, SQLITE_SIDE_SUFFIXES, WorkspacePaths

REBUILT = "its keyword and vector stores are rebuilt from its manifest (never read from a bundle)"


def _check_audit(path: Path, rel: str) -> None:
    """``audit.db``: the tables of every store that writes one (each exports its own check)."""
    from services.audit.db import check_imported
    from services.bridge.audit import IMPORT_CHECK as CLOUD
    from services.profiles.audit import IMPORT_CHECK as SWITCHES
    from services.retrieval.audit import IMPORT_CHECK as RETRIEVALS

    check_imported(path, rel, [CLOUD, SWITCHES, RETRIEVALS])


def _keep_only_manifests(layout: WorkspacePaths) -> dict[str, str]:
    """Remove everything of each index but its manifest; return, for each index with one, why its
    derived stores will be rebuilt."""
    rebuild: dict[str, str] = {}
    # Derived: never carried by an export, and a bundle's own is not kept — the conversation search index
    # is rebuilt here, and exports/ (documents opened in a browser as Aries' own) are made again.
    for derived in (layout.cache, layout.exports):
        if derived.is_dir() and not derived.is_symlink():
            shutil.rmtree(derived)
        elif derived.exists() or derived.is_symlink():
            derived.unlink()
    for index in sorted(layout.indexes.iterdir()) if layout.indexes.is_dir() else []:
        if not index.is_dir():
            continue
        manifest = layout.index(index.name).manifest
        for entry in sorted(index.iterdir()):
            if entry == manifest:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        if manifest.is_file():
            rebuild[index.name] = REBUILT
    return rebuild


def check_imported_stores(tree: Path) -> dict[str, str]:
    """Check every store of the workspace folder ``tree`` (an import's staging folder); return, for
    each index, why its derived stores will be rebuilt. Raises :class:`StoreRefused`."""
    from services.retrieval.store_manifest import check_imported, clear_chroma_url

    files = sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
    for path in files:
        if path.name.endswith(SQLITE_SIDE_SUFFIXES):
            raise StoreRefused(
                f"{path.relative_to(tree).as_posix()}: a SQLite side file (an export never carries one); "
                "the bundle is refused"
            )
    layout = WorkspacePaths(tree)
    rebuild = _keep_only_manifests(layout)
    manifests = {layout.index(name).manifest for name in rebuild}
    for path in sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(tree).as_posix()
        if rel == AUDIT_FILE:
            _check_audit(path, rel)
        elif path in manifests:
            check_imported(path, rel)
            clear_chroma_url(path)
    return rebuild
