"""What every Aries archive shares: one zstd-compressed tar whose first member is a JSON manifest.

Workspace bundles (:mod:`services.bundles`) and context packages (:mod:`services.context.packages`)
are both written and read here: the member-path rules, the manifest's file list, deterministic tar
writing, hashing, the caps, and the reader that checks every member while it streams into a
staging folder (:mod:`services.files.staging`). Each format is an :class:`ArchiveKind` (its manifest
name, format id, error class and the noun its messages use).
"""

from __future__ import annotations

import contextlib
import re
import tarfile
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, NoReturn, cast

from services.errors import AriesError
from services.hashing import HashingReader

COMPRESSION_LEVEL = 10
CHUNK = 1 << 20
"""Bytes read or written at a time: memory stays bounded whatever the archive's size."""

FORMATS = {
    "aries-bundle": ("aries-bundle.json", "a workspace bundle (import it with `aries workspace import`)"),
    "aries-context-package": (
        "aries-context-package.json",
        "a context package (import it with `aries context import`)",
    ),
}
"""Every archive format of Aries: format id → (manifest name, what it is), so each reader can say
clearly that it was given the other kind."""

Progress = Callable[[int, int, str], None]
"""(bytes done, bytes in all, current path)."""


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps checked while an archive is read, before anything is written past them.

    A member's bytes are written only when its declared size fits these caps and the free disk
    space; a member that is longer than the manifest says is refused at the first extra byte, so a
    decompression bomb stops at the smaller of the caps and its own declared size.
    """

    max_manifest_bytes: int = 64 << 20
    max_members: int = 200_000
    max_member_bytes: int = 8 << 30
    max_total_bytes: int = 64 << 30
    max_ratio: int = 5_000
    """Decompressed over compressed bytes, checked once more than ``ratio_floor`` bytes came out."""
    ratio_floor: int = 256 << 20
    max_window_bytes: int = 1 << 27
    """The largest zstd window accepted (128 MiB): the decompressor's memory bound."""


@dataclass(frozen=True)
class ArchiveKind:
    noun: str
    format_id: str
    format_version: int
    manifest_name: str
    error: type[AriesError]
    reserved: frozenset[str]
    """Names that are never files of the archive (its manifest, its signature)."""

    def fail(self, message: str) -> NoReturn:
        raise self.error(message)


@dataclass(frozen=True)
class FileEntry:
    path: str
    size: int
    sha256: str
    mime: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "size": self.size, "mime": self.mime}


# -- member paths ------------------------------------------------------------------------------
_ENCODED = re.compile(r"%(25)*(2e|2f|5c|00)", re.IGNORECASE)
_LOOKALIKES = frozenset("\u2215\u2044\u29f5\u29f8\u29f9\u2216\u2571\u2572\u0337\u0338\u1735\u3033")
"""Look-alikes of ``/``, ``.`` and ``\\`` that NFKC does not map to them (the same table as the
``axiom://`` URI rules); those NFKC maps to them are refused too."""


def _lookalike(char: str) -> bool:
    if ord(char) < 128:
        return False
    return char in _LOOKALIKES or any(c in "./\\" for c in unicodedata.normalize("NFKC", char))


def check_member_path(path: str, kind: ArchiveKind) -> str:
    """Refuse a member path that could land outside the tree or is not plainly relative."""
    if not path or len(path) > 1024:
        kind.fail(f"member {path[:80]!r}: empty or over-long path")
    if path in kind.reserved:
        kind.fail(f"member {path}: a reserved name listed as a file")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in path) or "\\" in path:
        kind.fail(f"member {path!r}: control characters or backslashes in the path")
    if path != unicodedata.normalize("NFC", path):
        kind.fail(f"member {path!r}: the path is not in Unicode normal form (NFC)")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        kind.fail(f"member {path}: an absolute path")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        kind.fail(f"member {path}: '..', '.' or empty segments in the path")
    if any(len(part.encode("utf-8")) > 255 for part in parts):
        kind.fail(f"member {path[:80]!r}: a name over 255 bytes")
    if _ENCODED.search(path):
        kind.fail(f"member {path}: a percent-encoded '.', '/', '\\' or NUL in the path")
    for char in path:
        if _lookalike(char):
            kind.fail(f"member {path!r}: U+{ord(char):04X}, a look-alike of '.', '/' or '\\', in the path")
    return str(PurePosixPath(path))


def path_problem(path: str, kind: ArchiveKind) -> str | None:
    """Why ``path`` could not be a member (for an exporter that skips such files), or None."""
    try:
        check_member_path(path, kind)
    except AriesError as exc:
        return exc.message
    return None


# -- manifests ---------------------------------------------------------------------------------
def load_manifest_json(raw: bytes, kind: ArchiveKind) -> dict[str, Any]:
    """The manifest as a dict whose format id and version this Aries reads."""
    import json

    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        kind.fail(f"the {kind.noun}'s manifest is not valid JSON ({exc})")
    if not isinstance(data, dict):
        kind.fail(f"not an Aries {kind.noun}: its first member is not an Aries manifest")
    found = data.get("format")
    if found != kind.format_id:
        if isinstance(found, str) and found in FORMATS:
            kind.fail(f"this is {FORMATS[found][1]}, not {_a(kind.noun)}")
        kind.fail(f"not an Aries {kind.noun}: its first member is not an Aries manifest (format {found!r})")
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        kind.fail(f"the manifest's format_version is invalid: {version!r}")
    if version > kind.format_version:
        kind.fail(
            f"the {kind.noun} has format version {version}; this Aries reads up to {kind.format_version} "
            "(upgrade Aries)"
        )
    return data


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


def file_entries(items: object, limits: ArchiveLimits, kind: ArchiveKind) -> list[FileEntry]:
    """The manifest's file list, every entry checked (path rules, duplicates, sizes, caps, hashes)."""
    if not isinstance(items, list):
        kind.fail("the manifest lacks its file list")
    if len(items) > limits.max_members:
        kind.fail(f"the {kind.noun} lists {len(items)} files; the cap is {limits.max_members}")
    entries: list[FileEntry] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            kind.fail("the manifest has a file entry that is not an object")
        path, size, digest = item.get("path"), item.get("size"), item.get("sha256")
        if not isinstance(path, str):
            kind.fail("the manifest has a file entry without a path")
        check_member_path(path, kind)
        if path in seen:
            kind.fail(f"the manifest lists {path} twice")
        seen.add(path)
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            kind.fail(f"the manifest gives {path} an invalid size: {size!r}")
        if size > limits.max_member_bytes:
            kind.fail(f"{path}: {size} bytes is over the {limits.max_member_bytes}-byte cap per file")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            kind.fail(f"the manifest gives {path} an invalid sha256")
        entries.append(FileEntry(path, size, digest, str(item.get("mime") or "application/octet-stream")))
    folders = {str(parent) for entry in entries for parent in PurePosixPath(entry.path).parents}
    clash = sorted(seen & folders)
    if clash:
        kind.fail(f"the manifest lists {clash[0]} both as a file and as a folder")
    total = sum(entry.size for entry in entries)
    if total > limits.max_total_bytes:
        kind.fail(f"the {kind.noun} holds {total} bytes; the cap is {limits.max_total_bytes} bytes")
    return entries


# -- reading -----------------------------------------------------------------------------------
def member_kind(member: tarfile.TarInfo) -> str | None:
    """What a member is when it is not a regular file, else None."""
    if member.issym():
        return "a symbolic link"
    if member.islnk():
        return "a hard link"
    if member.isdir():
        return "a directory"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    if not member.isfile():
        return "not a regular file"
    return None


class ArchiveReader:
    """One pass over an archive: the manifest first, then every member checked as it is written."""

    def __init__(self, stream: IO[bytes], counted: HashingReader, kind: ArchiveKind, limits: ArchiveLimits) -> None:
        self.counted = counted
        self.kind = kind
        self.limits = limits
        self.tar = tarfile.open(fileobj=stream, mode="r|", encoding="utf-8")
        self._members = iter(self.tar)

    def sha256(self) -> str:
        """The whole compressed file's SHA-256 (reads what the decompressor left, if anything)."""
        while self.counted.read(CHUNK):
            pass
        return self.counted.hexdigest()

    def manifest_bytes(self) -> bytes:
        kind = self.kind
        first = next(self._members, None)
        if first is None or first.name != kind.manifest_name or not first.isfile():
            for format_id, (name, what) in FORMATS.items():
                if first is not None and first.name == name and format_id != kind.format_id:
                    kind.fail(f"this is {what}, not {_a(kind.noun)}")
            kind.fail(f"not an Aries {kind.noun}: its first member is not {kind.manifest_name}")
        return self.read_small(first, self.limits.max_manifest_bytes)

    def read_small(self, member: tarfile.TarInfo, limit: int) -> bytes:
        if member.size > limit:
            self.kind.fail(f"member {member.name}: {member.size} bytes is over its {limit}-byte cap")
        handle = self.tar.extractfile(member)
        if handle is None:
            self.kind.fail(f"member {member.name} is not a regular file")
        data = handle.read(limit + 1)
        if len(data) != member.size:
            self.kind.fail(f"the {self.kind.noun} is truncated")
        return data

    def extract(
        self,
        entries: list[FileEntry],
        into: Path,
        *,
        progress: Progress | None = None,
        special: Callable[[tarfile.TarInfo, int], bool] | None = None,
    ) -> None:
        """Write every member listed in ``entries`` under ``into``; refuse anything else.

        ``special(member, position)`` may take a member that is not a file of the manifest (a
        signature) and return True. Nothing is written outside ``into``, and every file is checked
        against its size and SHA-256 as it is written.
        """
        kind, limits = self.kind, self.limits
        expected = {entry.path: entry for entry in entries}
        total = sum(entry.size for entry in entries)
        done, seen = 0, set()
        for position, member in enumerate(self._members, start=2):
            if position > limits.max_members + 2:
                kind.fail(f"the {kind.noun} has more than {limits.max_members} members")
            if special is not None and special(member, position):
                continue
            path = member.name
            what = member_kind(member)
            if what is not None:
                kind.fail(f"member {path}: {what}; {_a(kind.noun)} holds regular files only")
            check_member_path(path, kind)
            if path in seen:
                kind.fail(f"member {path} appears twice")
            entry = expected.get(path)
            if entry is None:
                kind.fail(f"member {path} is not in the manifest")
            if member.size != entry.size:
                kind.fail(f"member {path}: {member.size} bytes, the manifest says {entry.size}")
            seen.add(path)
            if progress is not None:
                progress(done, total, path)
            self._write_member(member, entry, into, done)
            done += entry.size
        missing = sorted(set(expected) - seen)
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            kind.fail(f"the manifest lists {missing[0]}{more}, missing from the {kind.noun}")
        if progress is not None:
            progress(total, total, "")

    def _write_member(self, member: tarfile.TarInfo, entry: FileEntry, into: Path, done: int) -> None:
        import os

        kind, limits = self.kind, self.limits
        source = self.tar.extractfile(member)
        if source is None:
            kind.fail(f"member {entry.path} is not a regular file")
        target = into / entry.path
        member_bytes = HashingReader(source)
        written = 0
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("xb") as out:
                while block := member_bytes.read(CHUNK):
                    written += len(block)
                    if written > entry.size:
                        kind.fail(f"member {entry.path} is longer than the manifest says")
                    total = done + written
                    if total > limits.ratio_floor and total > limits.max_ratio * max(self.counted.count, 1):
                        kind.fail(
                            f"the {kind.noun} expands more than {limits.max_ratio}:1 (a decompression bomb?); "
                            f"stopped at {total} bytes"
                        )
                    out.write(block)
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            kind.fail(f"cannot write {entry.path}: {exc.strerror or exc}")
        if written != entry.size:
            kind.fail(f"the {kind.noun} is truncated")
        if member_bytes.hexdigest() != entry.sha256:
            kind.fail(f"member {entry.path}: its SHA-256 does not match the manifest")


@contextlib.contextmanager
def open_archive(path: Path, kind: ArchiveKind, limits: ArchiveLimits) -> Iterator[ArchiveReader]:
    """``with open_archive(...) as reader:`` — a truncated or corrupt stream is one typed error."""
    import zstandard

    with path.open("rb") as raw:
        counted = HashingReader(raw)  # counted for the ratio cap, hashed whole
        decompressor = zstandard.ZstdDecompressor(max_window_size=limits.max_window_bytes)
        try:
            with decompressor.stream_reader(cast("IO[bytes]", counted), read_size=CHUNK, closefd=False) as stream:
                yield ArchiveReader(cast("IO[bytes]", stream), counted, kind, limits)
        except (zstandard.ZstdError, tarfile.TarError, EOFError) as exc:
            kind.fail(f"the {kind.noun} is truncated or corrupt ({exc})")
