"""Export a workspace to one deterministic ``.tar.zst`` bundle (see :mod:`services.bundles.manifest`)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sqlite3
import stat
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from services.atomic import fsync_dir
from services.bundles.manifest import (
    CHUNK,
    COMPRESSION_LEVEL,
    MANIFEST_NAME,
    SIGNATURE_NAME,
    BundleError,
    FileEntry,
    Manifest,
    mime_type,
)

if TYPE_CHECKING:
    from services.workspaces import Workspace

Progress = Callable[[int, int, str], None]
"""(bytes done, bytes in all, current path)."""

# What a bundle never carries: who holds the workspace, SQLite's side files (the databases are
# checkpointed first), lock files and the temp files of interrupted writes.
_SKIP_TOP = {".aries.lock", ".aries-session.json"}
_SKIP_SUFFIXES = ("-wal", "-shm", "-journal", ".lock")


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
    if rel in _SKIP_TOP or name.endswith(_SKIP_SUFFIXES):
        return True
    return name.startswith(".") and name.endswith(".tmp")


def _checkpoint(root: Path) -> None:
    """Fold every SQLite write-ahead log into its database, so the ``.db`` files are whole."""
    for path in sorted(root.rglob("*")):
        if path.name.endswith("-wal") and path.is_file() and not path.is_symlink():
            database = path.with_name(path.name[: -len("-wal")])
            if not database.is_file():
                continue
            try:
                db = sqlite3.connect(database, timeout=5)
                try:
                    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    db.close()
            except sqlite3.Error as exc:
                raise BundleError(f"{path.relative_to(root)}: cannot checkpoint the database ({exc})") from None


def _files(root: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """(relative path, real path) of every regular file to export, sorted; and what was left out."""
    found: list[tuple[str, Path]] = []
    left_out: list[str] = []
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(directory)
        for dirname in list(dirnames):
            if (base / dirname).is_symlink():
                dirnames.remove(dirname)
                left_out.append(f"{(base / dirname).relative_to(root).as_posix()} (a link)")
        for filename in filenames:
            path = base / filename
            rel = path.relative_to(root).as_posix()
            if _skipped(rel):
                continue
            mode = path.lstat().st_mode
            if not stat.S_ISREG(mode):
                left_out.append(f"{rel} ({'a link' if stat.S_ISLNK(mode) else 'not a regular file'})")
                continue
            found.append((rel, path))
    found.sort(key=lambda item: item[0].encode("utf-8"))
    return found, sorted(left_out)


def _hash(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def _embedders(root: Path) -> dict[str, str]:
    """The embedding model of each index, from its manifest (what a reader needs to query it)."""
    found: dict[str, str] = {}
    indexes = root / "indexes"
    if not indexes.is_dir():
        return found
    for index in sorted(indexes.iterdir()):
        database = index / "manifest.db"
        if not database.is_file():
            continue
        try:
            db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
            try:
                row = db.execute("SELECT value FROM meta WHERE key = 'embedding_model'").fetchone()
            finally:
                db.close()
        except sqlite3.Error:
            continue
        if row is not None:
            found[index.name] = str(row[0]).strip('"')
    return found


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info


class _Verified:
    """A file read for the tar that must still have the size and hash the manifest promised."""

    def __init__(self, handle: IO[bytes], entry: FileEntry) -> None:
        self.handle = handle
        self.entry = entry
        self.digest = hashlib.sha256()
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        block = self.handle.read(size)
        self.digest.update(block)
        self.count += len(block)
        return block

    def check(self) -> None:
        if self.handle.read(1) or self.count != self.entry.size or self.digest.hexdigest() != self.entry.sha256:
            raise BundleError(f"{self.entry.path} changed while it was exported; export again")


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


@contextlib.contextmanager
def _atomic_output(dest: Path) -> Iterator[IO[bytes]]:
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_dir(dest.parent)


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
    import zstandard

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
    files, left_out = _files(root)
    entries: list[FileEntry] = []
    for rel, path in files:
        size, digest = _hash(path)
        entries.append(FileEntry(rel, size, digest, mime_type(rel)))
    meta = {
        "name": workspace.name,
        "created_at": workspace.meta.get("created_at"),
        "profile": workspace.profile,
    }
    manifest = Manifest(workspace=meta, aries_version=aries_version, embedders=_embedders(root), files=entries)
    raw = manifest.to_bytes()
    signature = _sign(raw, Path(signing_key).expanduser()) if signing_key is not None else None
    total, done = manifest.total_bytes, 0
    compressor = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL, threads=0, write_checksum=True)
    with _atomic_output(dest) as out:
        with compressor.stream_writer(out, closefd=False) as zstd_out:
            with tarfile.open(fileobj=zstd_out, mode="w|", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
                tar.addfile(_info(MANIFEST_NAME, len(raw)), io.BytesIO(raw))
                if signature is not None:
                    tar.addfile(_info(SIGNATURE_NAME, len(signature)), io.BytesIO(signature))
                for entry, (_, path) in zip(entries, files, strict=True):
                    if progress is not None:
                        progress(done, total, entry.path)
                    with path.open("rb") as handle:
                        reader = _Verified(handle, entry)
                        tar.addfile(_info(entry.path, entry.size), reader)
                        reader.check()
                    done += entry.size
    if progress is not None:
        progress(total, total, "")
    size, digest = _hash(dest)
    return ExportReport(dest.as_posix(), len(entries), size, digest, signature is not None, left_out)
