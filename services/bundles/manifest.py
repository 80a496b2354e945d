"""The bundle format: one zstd-compressed tar whose first member is a JSON manifest.

Layout of a bundle (``NAME.aries.tar.zst``)::

    aries-bundle.json   the manifest: format and Aries versions, the source workspace, the
                        embedder of each index, and every file (path, size, SHA-256, MIME type)
    aries-bundle.sig    optional: an ed25519 signature of the manifest's bytes
    <path> ...          every file of the manifest, in its order (sorted by path)

Members carry no time, owner or mode of their own (mtime 0, uid/gid 0, mode 0644), the manifest is
canonical JSON, and the compression level is fixed: the same workspace exports to the same bytes.
"""

from __future__ import annotations

import json
import mimetypes
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from services.errors import AriesError

FORMAT = "aries-bundle"
FORMAT_VERSION = 1
MANIFEST_NAME = "aries-bundle.json"
SIGNATURE_NAME = "aries-bundle.sig"
COMPRESSION_LEVEL = 10
CHUNK = 1 << 20
"""Bytes read or written at a time: memory stays bounded whatever the bundle's size."""


class BundleError(AriesError):
    """A bundle that cannot be written or is refused on import (one line, nothing left behind)."""

    exit_code = 2


@dataclass(frozen=True)
class BundleLimits:
    """Caps checked while a bundle is read, before anything is written past them.

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
class FileEntry:
    path: str
    size: int
    sha256: str
    mime: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "size": self.size, "mime": self.mime}


@dataclass
class Manifest:
    workspace: dict[str, Any]
    aries_version: str
    embedders: dict[str, str] = field(default_factory=dict)
    files: list[FileEntry] = field(default_factory=list)
    format_version: int = FORMAT_VERSION

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.files)

    def to_bytes(self) -> bytes:
        data = {
            "format": FORMAT,
            "format_version": self.format_version,
            "aries_version": self.aries_version,
            "workspace": self.workspace,
            "embedders": self.embedders,
            "file_count": len(self.files),
            "total_bytes": self.total_bytes,
            "files": [entry.to_json() for entry in self.files],
        }
        return (json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes, limits: BundleLimits) -> Manifest:
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BundleError(f"the bundle's manifest is not valid JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BundleError("not an Aries bundle: its first member is not an Aries manifest")
        version = data.get("format_version")
        if not isinstance(version, int) or version < 1:
            raise BundleError(f"the manifest's format_version is invalid: {version!r}")
        if version > FORMAT_VERSION:
            raise BundleError(
                f"the bundle has format version {version}; this Aries reads up to {FORMAT_VERSION} (upgrade Aries)"
            )
        workspace, files = data.get("workspace"), data.get("files")
        if not isinstance(workspace, dict) or not isinstance(files, list):
            raise BundleError("the manifest lacks its workspace or files")
        if len(files) > limits.max_members:
            raise BundleError(f"the bundle lists {len(files)} files; the cap is {limits.max_members}")
        entries: list[FileEntry] = []
        seen: set[str] = set()
        for item in files:
            if not isinstance(item, dict):
                raise BundleError("the manifest has a file entry that is not an object")
            path, size, digest = item.get("path"), item.get("size"), item.get("sha256")
            if not isinstance(path, str):
                raise BundleError("the manifest has a file entry without a path")
            check_member_path(path)
            if path in seen:
                raise BundleError(f"the manifest lists {path} twice")
            seen.add(path)
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise BundleError(f"the manifest gives {path} an invalid size: {size!r}")
            if size > limits.max_member_bytes:
                raise BundleError(f"{path}: {size} bytes is over the {limits.max_member_bytes}-byte cap per file")
            if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise BundleError(f"the manifest gives {path} an invalid sha256")
            entries.append(FileEntry(path, size, digest, str(item.get("mime") or "application/octet-stream")))
        manifest = cls(
            workspace=workspace,
            aries_version=str(data.get("aries_version", "?")),
            embedders={str(k): str(v) for k, v in (data.get("embedders") or {}).items()},
            files=entries,
            format_version=version,
        )
        if manifest.total_bytes > limits.max_total_bytes:
            raise BundleError(
                f"the bundle holds {manifest.total_bytes} bytes; the cap is {limits.max_total_bytes} bytes"
            )
        return manifest


_RESERVED = {MANIFEST_NAME, SIGNATURE_NAME}


def check_member_path(path: str) -> str:
    """Refuse a member path that could land outside the workspace or is not plainly relative."""
    if not path or len(path) > 1024:
        raise BundleError(f"member {path[:80]!r}: empty or over-long path")
    if path in _RESERVED:
        raise BundleError(f"member {path}: a reserved name listed as a file")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in path) or "\\" in path:
        raise BundleError(f"member {path!r}: control characters or backslashes in the path")
    if path != unicodedata.normalize("NFC", path):
        raise BundleError(f"member {path!r}: the path is not in Unicode normal form (NFC)")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise BundleError(f"member {path}: an absolute path")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise BundleError(f"member {path}: '..', '.' or empty segments in the path")
    return str(PurePosixPath(path))


_MIME = mimetypes.MimeTypes(filenames=())  # the built-in table only: the same answer on every machine
_EXTRA_MIME = {
    ".ndjson": "application/x-ndjson",
    ".db": "application/vnd.sqlite3",
    ".sqlite3": "application/vnd.sqlite3",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".md": "text/markdown",
}


def mime_type(path: str) -> str:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in _EXTRA_MIME:
        return _EXTRA_MIME[suffix]
    return _MIME.guess_type(path, strict=False)[0] or "application/octet-stream"
