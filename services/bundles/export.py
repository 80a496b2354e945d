"""Export a workspace to one deterministic ``.tar.zst`` bundle (see :mod:`services.bundles.manifest`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from services.archive.reader import FileEntry, Progress
from services.archive.writer import atomic_output, walk_tree, write_archive
from services.bundles.manifest import KIND, MANIFEST_NAME, SIGNATURE_NAME, BundleError, Manifest, mime_type
from services.conversation.hold import HOLDS_DIR
from services.hashing import file_sha256
from services.workspace.paths import (
    CACHE_DIR,
    EXPORTS_DIR,
    LEASE_FILES,
    QUARANTINE_DIR,
    SQLITE_SIDE_SUFFIXES,
    TRANSCRIPTS_DIR,
    WorkspacePaths,
)

if TYPE_CHECKING:
    from services.workspace.manager import Workspace

# What a bundle never carries: who holds the workspace, SQLite's side files (the databases are
# checkpointed first), lock files and the temp files of interrupted writes.
_SKIP_TOP = set(LEASE_FILES)
_QUARANTINE = QUARANTINE_DIR  # imported authority the operator has not trusted: it is not this workspace's
_SKIP_SUFFIXES = (*SQLITE_SIDE_SUFFIXES, ".lock")
_DERIVED = CACHE_DIR  # derived stores (the conversation search index): rebuilt from the transcripts
_EXPORTS = EXPORTS_DIR  # conversations exported as documents: made again from the transcripts, never carried
_HOLDS = f"{TRANSCRIPTS_DIR}/{HOLDS_DIR}/"  # who holds a conversation now: this machine's processes only


@dataclass
class ExportReport:
    path: str
    files: int
    bytes: int
    sha256: str
    signed: bool
    skipped: list[str] = field(default_factory=list)


def _skipped(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    if rel in _SKIP_TOP or name.endswith(_SKIP_SUFFIXES) or rel.startswith(_HOLDS):
        return True
    return name.startswith(".") and name.endswith(".tmp")


def _checkpoint(root: Path) -> None:
    """Fold every SQLite write-ahead log into its database, so the ``.db`` files are whole."""
    import sqlite3

    from services.sqlite.check import checkpoint

    for path in sorted(root.rglob("*")):
        if path.name.endswith("-wal") and path.is_file() and not path.is_symlink():
            database = path.with_name(path.name[: -len("-wal")])
            if not database.is_file():
                continue
            try:
                checkpoint(database)
            except sqlite3.Error as exc:
                raise BundleError(f"{path.relative_to(root)}: cannot checkpoint the database ({exc})") from None


def _embedders(root: Path) -> dict[str, str]:
    """The embedding model of each index, from its manifest (what a reader needs to query it)."""
    from services.retrieval.store_manifest import embedding_model

    found: dict[str, str] = {}
    layout = WorkspacePaths(root)
    if not layout.indexes.is_dir():
        return found
    for folder in sorted(layout.indexes.iterdir()):
        database = layout.index(folder.name).manifest
        if not database.is_file():
            continue
        model = embedding_model(database)
        if model is not None:
            found[folder.name] = model
    return found


def _sign(manifest: bytes, key_path: Path) -> bytes:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise BundleError(f"cannot read the signing key {key_path}: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BundleError(f"{key_path} is not an ed25519 private key")
    return key.sign(manifest)


def export_workspace(
    workspace: Workspace,
    dest: Path,
    *,
    aries_version: str,
    signing_key: Path | None = None,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> ExportReport:
    """Write ``workspace`` to ``dest`` (a file, or a folder that gets ``NAME.aries.tar.zst``).

    The caller holds the workspace's lease, so nothing writes it meanwhile; a file that changes
    anyway is caught (its hash is checked again as it is written) and the export fails whole.
    """
    dest = Path(dest).expanduser()
    if dest.is_dir():
        dest = dest / f"{workspace.name}.aries.tar.zst"
    if not dest.parent.is_dir():
        raise BundleError(f"{dest.parent}: no such folder")
    if dest.exists() and not overwrite:
        raise BundleError(f"{dest} exists; choose another path or pass --force")
    root = workspace.root
    if dest.resolve().is_relative_to(root.resolve()):
        raise BundleError("the bundle cannot be written inside the workspace it exports")
    _checkpoint(root)

    def skip(rel: str, folder: bool) -> str | None:
        if folder and rel == _QUARANTINE:
            return "settings quarantined since the import, never trusted here"
        if folder and rel in (_DERIVED, _EXPORTS):
            return ""  # derived: rebuilt (exported again) from the transcripts, nothing to say
        return "" if not folder and _skipped(rel) else None

    walk = walk_tree(root, KIND, skip)
    entries: list[FileEntry] = []
    for rel, path in walk.files:
        size, digest = file_sha256(path)
        entries.append(FileEntry(rel, size, digest, mime_type(rel)))
    meta = {
        "name": workspace.name,
        "created_at": workspace.meta.get("created_at"),
        "profile": workspace.profile,
    }
    manifest = Manifest(workspace=meta, aries_version=aries_version, embedders=_embedders(root), files=entries)
    raw = manifest.to_bytes()
    signature = _sign(raw, Path(signing_key).expanduser()) if signing_key is not None else None
    head = [(MANIFEST_NAME, raw)] + ([(SIGNATURE_NAME, signature)] if signature is not None else [])
    sources = zip(entries, (path for _, path in walk.files), strict=True)
    with atomic_output(dest) as out:
        write_archive(out, KIND, head, sources, total=manifest.total_bytes, progress=progress)
    size, digest = file_sha256(dest)
    return ExportReport(dest.as_posix(), len(entries), size, digest, signature is not None, walk.left_out)
