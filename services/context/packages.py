"""Context packages: a context tree exported to one file, and imported back safely (FR-006).

A package is an Aries archive (:mod:`services.archive.reader`, the same machinery as workspace
bundles, with a format of its own)::

    aries-context-package.json   the manifest: format ``aries-context-package`` version 1, the label
                                 of the exported root (e.g. its ``axiom://`` URI), every folder, and
                                 every file (path, size, SHA-256, MIME type)
    <path> ...                   every file of the manifest, sorted by path

The same tree exports to the same bytes. Tier files (``.abstract.md``, ``.overview.md``) travel
with the tree; other names beginning with ``.`` (reserved for Aries) and anything that is not a
regular file or folder stay behind and are listed in the report. An import is checked member by
member while it streams into a hidden staging folder beside the destination, and appears with one
rename only when whole; any refusal leaves the destination and its parent as they were. These
functions work on plain folders; mapping ``axiom://`` URIs to folders is the caller's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from services.archive.mime import mime_type
from services.archive.reader import FORMATS, ArchiveKind, ArchiveLimits, FileEntry, Progress, open_archive
from services.archive.reader import check_member_path as _check_path
from services.archive.reader import file_entries as _file_entries
from services.archive.writer import atomic_output, walk_tree, write_archive
from services.context.errors import ContextError
from services.files.staging import StagingArea, clean_stale_staging
from services.hashing import file_sha256

PACKAGE_FORMAT = "aries-context-package"
PACKAGE_FORMAT_VERSION = 1
MANIFEST_NAME = FORMATS[PACKAGE_FORMAT][0]
TIER_FILES = frozenset({".abstract.md", ".overview.md"})
PACKAGE_STAGING_PREFIX = ".package-import-"
"""Staging folders of imports, beside their destination (removed by :func:`clean_stale_package_staging`)."""
_FREE_MARGIN = 16 << 20


class PackageError(ContextError):
    """A package that cannot be written, or is refused on import (one line; nothing written)."""

    code = "package_refused"
    exit_code = 2


class DestinationNotEmpty(PackageError):
    """The import's destination holds something, and ``force`` was not given."""

    code = "destination_not_empty"


class PackageNotFound(PackageError):
    code = "package_not_found"


KIND = ArchiveKind(
    noun="package",
    format_id=PACKAGE_FORMAT,
    format_version=PACKAGE_FORMAT_VERSION,
    manifest_name=MANIFEST_NAME,
    error=PackageError,
    reserved=frozenset({MANIFEST_NAME}),
)


@dataclass
class PackageReport:
    package: str
    tree: str
    root_label: str
    files: int
    folders: int
    bytes: int
    sha256: str
    """Of the package file."""
    skipped: list[str] = field(default_factory=list)
    """What an export left behind, with the reason (``path (why)``)."""
    replaced: bool = False
    vectorize: bool = False


def _dot_reason(rel: str, folder: bool) -> str | None:
    """Why a path with a reserved (dot) name does not travel, or None if it does."""
    parts = rel.split("/")
    for index, part in enumerate(parts):
        if not part.startswith("."):
            continue
        if index == len(parts) - 1 and not folder and part in TIER_FILES:
            continue
        return "a name beginning with '.' is reserved for Aries; only tier files travel"
    return None


def _check_label(label: object) -> str:
    if not isinstance(label, str) or len(label) > 4096 or any(ord(ch) < 32 or ord(ch) == 127 for ch in label):
        raise PackageError("the package's root label must be one line of text (at most 4096 characters)")
    return label


@dataclass
class PackageManifest:
    root_label: str
    folders: list[str] = field(default_factory=list)
    files: list[FileEntry] = field(default_factory=list)
    format_version: int = PACKAGE_FORMAT_VERSION

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.files)

    def to_bytes(self) -> bytes:
        import json

        data = {
            "format": PACKAGE_FORMAT,
            "format_version": self.format_version,
            "root": self.root_label,
            "file_count": len(self.files),
            "total_bytes": self.total_bytes,
            "folders": self.folders,
            "files": [entry.to_json() for entry in self.files],
        }
        return (json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes, limits: ArchiveLimits) -> PackageManifest:
        from services.archive.reader import load_manifest_json

        data = load_manifest_json(raw, KIND)
        files = _file_entries(data.get("files"), limits, KIND)
        folders = data.get("folders", [])
        if not isinstance(folders, list) or not all(isinstance(folder, str) for folder in folders):
            raise PackageError("the manifest's folder list is not a list of paths")
        count = len(folders) + len(files)
        if count > limits.max_members:
            raise PackageError(f"the package lists {count} entries; the cap is {limits.max_members}")
        names = {entry.path for entry in files}
        seen: set[str] = set()
        for folder in folders:
            _check_path(folder, KIND)
            if folder in seen or folder in names:
                raise PackageError(f"the manifest lists {folder} twice")
            if any(str(parent) in names for parent in PurePosixPath(folder).parents):
                raise PackageError(f"the manifest lists {folder} inside a file")
            seen.add(folder)
        for path, folder in [(entry.path, False) for entry in files] + [(name, True) for name in folders]:
            reason = _dot_reason(path, folder)
            if reason is not None:
                raise PackageError(f"member {path}: {reason}")
        return cls(_check_label(data.get("root")), list(folders), files, data["format_version"])


def export_tree(
    source_dir: Path,
    out: Path,
    *,
    root_label: str,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> PackageReport:
    """Write the tree under ``source_dir`` to the package file ``out`` (atomically; same tree, same bytes)."""
    source = Path(source_dir).expanduser()
    if source.is_symlink() or not source.is_dir():
        raise PackageError(f"{source}: not a folder")
    out = Path(out).expanduser()
    if out.is_dir():
        raise PackageError(f"{out} is a folder; give the package's file name")
    if not out.parent.is_dir():
        raise PackageError(f"{out.parent}: no such folder")
    if os.path.lexists(out) and not overwrite:
        raise PackageError(f"{out} exists; choose another path or replace it (--force)")
    if out.resolve().is_relative_to(source.resolve()):
        raise PackageError("the package cannot be written inside the tree it exports")
    label = _check_label(root_label)
    try:
        walk = walk_tree(source, KIND, _dot_reason)
        entries = []
        for rel, path in walk.files:
            size, digest = file_sha256(path)
            entries.append(FileEntry(rel, size, digest, mime_type(rel)))
        manifest = PackageManifest(label, walk.folders, entries)
        sources = zip(entries, (path for _, path in walk.files), strict=True)
        with atomic_output(out) as handle:
            head = [(MANIFEST_NAME, manifest.to_bytes())]
            write_archive(handle, KIND, head, sources, total=manifest.total_bytes, progress=progress)
    except OSError as exc:
        raise PackageError(f"cannot export {source} to {out}: {exc.strerror or exc}") from None
    size, digest = file_sha256(out)
    return PackageReport(
        out.as_posix(), source.as_posix(), label, len(entries), len(walk.folders), size, digest, walk.left_out
    )


def clean_stale_package_staging(parent: Path) -> list[str]:
    """Remove the staging folders under ``parent`` left by imports that were killed.

    A destination that a ``force`` import had moved aside when it was killed is put back first.
    Returns the names removed.
    """
    return clean_stale_staging(Path(parent), PACKAGE_STAGING_PREFIX)


def _destination(dest_dir: Path) -> Path:
    dest = Path(dest_dir).expanduser().absolute()
    if dest.name in ("", ".", ".."):
        raise PackageError(f"{dest_dir}: not a folder name to import into")
    if dest.name.startswith(PACKAGE_STAGING_PREFIX):
        raise PackageError(f"{dest.name}: a name reserved for staging folders")
    if os.path.lexists(dest) and (dest.is_symlink() or not dest.is_dir()):
        raise PackageError(f"{dest} exists and is not a folder")
    return dest


def _holds_something(dest: Path) -> bool:
    if not dest.is_dir():
        return False
    with os.scandir(dest) as entries:
        return any(True for _ in entries)


def import_tree(
    package: Path,
    dest_dir: Path,
    *,
    force: bool = False,
    vectorize: bool = False,
    on_imported: Callable[[Path, bool], None] | None = None,
    limits: ArchiveLimits | None = None,
    progress: Progress | None = None,
) -> PackageReport:
    """Unpack ``package`` into ``dest_dir``: checked whole before it appears, all or nothing.

    ``dest_dir`` may be missing or empty; one that holds something is replaced only with
    ``force``, and only after the new tree is complete. ``on_imported(dest_dir, vectorize)`` runs
    once the tree is in place (the caller indexes it there).
    """
    limits = limits or ArchiveLimits()
    package = Path(package).expanduser()
    if not package.is_file():
        raise PackageNotFound(f"{package}: no such package")
    dest = _destination(dest_dir)
    had_content = _holds_something(dest)
    if had_content and not force:
        raise DestinationNotEmpty(f"{dest} is not empty; import elsewhere, or replace it with --force")
    if package.resolve().is_relative_to(dest.resolve()):
        raise PackageError("the package lies inside the folder it would replace; move it out first")
    created = _missing_parents(dest.parent)
    try:
        for folder in reversed(created):
            folder.mkdir()
        clean_stale_package_staging(dest.parent)
        with StagingArea(dest.parent, PACKAGE_STAGING_PREFIX) as staging, open_archive(package, KIND, limits) as reader:
            manifest = PackageManifest.from_bytes(reader.manifest_bytes(), limits)
            free = shutil.disk_usage(dest.parent).free
            if manifest.total_bytes + _FREE_MARGIN > free:
                raise PackageError(f"the package needs {manifest.total_bytes} bytes; {free} are free")
            tree = staging.create()
            for name in manifest.folders:
                (tree / name).mkdir(parents=True, exist_ok=True)
            reader.extract(manifest.files, tree, progress=progress)
            digest = reader.sha256()
            if _holds_something(dest) and not force:  # filled meanwhile
                raise DestinationNotEmpty(f"{dest} is not empty; import elsewhere, or replace it with --force")
            staging.install(dest)
    except OSError as exc:
        _remove_made(created)
        raise PackageError(f"cannot import into {dest}: {exc.strerror or exc}") from None
    except BaseException:
        _remove_made(created)
        raise
    report = PackageReport(
        package.as_posix(),
        dest.as_posix(),
        manifest.root_label,
        len(manifest.files),
        len(manifest.folders),
        manifest.total_bytes,
        digest,
        replaced=had_content,
        vectorize=vectorize,
    )
    if on_imported is not None:
        on_imported(dest, vectorize)
    return report


def _remove_made(created: list[Path]) -> None:
    """Undo the parent folders an import made (deepest first), if they are still empty."""
    for folder in created:
        if folder.is_dir() and not _holds_something(folder):
            folder.rmdir()


def _missing_parents(folder: Path) -> list[Path]:
    """The folders that must be made for ``folder`` to exist, deepest first."""
    missing: list[Path] = []
    while not os.path.lexists(folder):
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    if not folder.is_dir():
        raise PackageError(f"{folder} is not a folder")
    return missing


def describe(report: PackageReport) -> dict[str, Any]:
    """The report as plain data (for ``--json``)."""
    from dataclasses import asdict

    return asdict(report)
