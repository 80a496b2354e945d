"""Writing Aries archives (bundles, context packages): the walk, the hashes, one deterministic stream.

The same tree always writes the same bytes: files in byte order of their paths, member headers
with no time, owner or mode of their own, canonical manifests, a fixed zstd level.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from services.archive.reader import COMPRESSION_LEVEL, ArchiveKind, FileEntry, Progress, path_problem
from services.files.atomic import fsync_dir
from services.hashing import HashingReader


@dataclass
class Walk:
    """What an exporter found under its root: regular files and folders to write, and what it left out."""

    files: list[tuple[str, Path]] = field(default_factory=list)
    """(relative path, real path), in byte order of the relative path."""
    folders: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


def walk_tree(root: Path, kind: ArchiveKind, skip: Callable[[str, bool], str | None]) -> Walk:
    """Every regular file and folder under ``root`` (links never followed), sorted.

    ``skip(relative path, is a folder)`` returns why the format never carries it (listed in
    ``left_out``; ``""`` drops it silently) or None to keep it. Links, devices, FIFOs, sockets and
    names no archive may hold are left out and listed with the reason.
    """
    walk = Walk()

    def unreadable(error: OSError) -> None:
        where = Path(error.filename).relative_to(root).as_posix() if error.filename else "?"
        walk.left_out.append(f"{where} (unreadable: {error.strerror or error})")

    for directory, dirnames, filenames in os.walk(root, onerror=unreadable, followlinks=False):
        base = Path(directory)
        for dirname in sorted(dirnames):
            path = base / dirname
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                dirnames.remove(dirname)
                walk.left_out.append(f"{rel} (a link)")
            elif (reason := skip(rel, True)) is not None:
                dirnames.remove(dirname)
                if reason:
                    walk.left_out.append(f"{rel} ({reason})")
            elif (problem := path_problem(rel, kind)) is not None:
                dirnames.remove(dirname)
                walk.left_out.append(f"{rel} ({problem})")
            else:
                walk.folders.append(rel)
        for filename in filenames:
            path = base / filename
            rel = path.relative_to(root).as_posix()
            if (reason := skip(rel, False)) is not None:
                if reason:
                    walk.left_out.append(f"{rel} ({reason})")
                continue
            mode = path.lstat().st_mode
            if not stat.S_ISREG(mode):
                walk.left_out.append(f"{rel} ({'a link' if stat.S_ISLNK(mode) else 'not a regular file'})")
            elif (problem := path_problem(rel, kind)) is not None:
                walk.left_out.append(f"{rel} ({problem})")
            else:
                walk.files.append((rel, path))
    walk.files.sort(key=lambda item: item[0].encode("utf-8"))
    walk.folders.sort(key=lambda rel: rel.encode("utf-8"))
    walk.left_out.sort()
    return walk


@contextlib.contextmanager
def atomic_output(dest: Path) -> Iterator[IO[bytes]]:
    """A file written beside ``dest`` and renamed onto it only when whole (removed on failure)."""
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


def tar_info(name: str, size: int) -> tarfile.TarInfo:
    """A member header with no time, owner or mode of its own: the same file, the same bytes."""
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info


class _Verified(HashingReader):
    """A file read for the tar that must still have the size and hash the manifest promised."""

    def __init__(self, handle: IO[bytes], entry: FileEntry, kind: ArchiveKind) -> None:
        super().__init__(handle)
        self.entry = entry
        self.kind = kind

    def check(self) -> None:
        if self.handle.read(1) or self.count != self.entry.size or self.hexdigest() != self.entry.sha256:
            self.kind.fail(f"{self.entry.path} changed while it was exported; export again")


def write_archive(
    out: IO[bytes],
    kind: ArchiveKind,
    head: Iterable[tuple[str, bytes]],
    files: Iterable[tuple[FileEntry, Path]],
    *,
    total: int,
    progress: Progress | None = None,
) -> None:
    """Write the members ``head`` (the manifest first), then every file, as one zstd tar stream.

    The compression level is fixed and the headers carry nothing of the machine: the same input
    writes the same bytes. Each file is hashed again as it is copied and must match its entry.
    """
    import zstandard

    compressor = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL, threads=0, write_checksum=True)
    done = 0
    with compressor.stream_writer(out, closefd=False) as zstd_out:
        with tarfile.open(fileobj=zstd_out, mode="w|", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
            for name, data in head:
                tar.addfile(tar_info(name, len(data)), io.BytesIO(data))
            for entry, path in files:
                if progress is not None:
                    progress(done, total, entry.path)
                with path.open("rb") as handle:
                    reader = _Verified(handle, entry, kind)
                    tar.addfile(tar_info(entry.path, entry.size), reader)
                    reader.check()
                done += entry.size
    if progress is not None:
        progress(total, total, "")
