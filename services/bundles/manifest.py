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

from dataclasses import dataclass, field
from typing import Any

from services.archive import reader as archive
from services.archive.mime import mime_type
from services.archive.reader import ArchiveKind, FileEntry
from services.errors import AriesError

FORMAT = "aries-bundle"
FORMAT_VERSION = 1
MANIFEST_NAME, _ = archive.FORMATS[FORMAT]
SIGNATURE_NAME = "aries-bundle.sig"

BundleLimits = archive.ArchiveLimits
"""Caps checked while a bundle is read (see :class:`services.archive.reader.ArchiveLimits`)."""

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "KIND",
    "MANIFEST_NAME",
    "SIGNATURE_NAME",
    "BundleError",
    "BundleLimits",
    "Manifest",
    "check_member_path",
    "mime_type",
]


class BundleError(AriesError):
    """A bundle that cannot be written or is refused on import (one line, nothing left behind)."""

    exit_code = 2


KIND = ArchiveKind(
    noun="bundle",
    format_id=FORMAT,
    format_version=FORMAT_VERSION,
    manifest_name=MANIFEST_NAME,
    error=BundleError,
    reserved=frozenset({MANIFEST_NAME, SIGNATURE_NAME}),
)


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
        import json

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
        data = archive.load_manifest_json(raw, KIND)
        workspace, files = data.get("workspace"), data.get("files")
        if not isinstance(workspace, dict) or not isinstance(files, list):
            raise BundleError("the manifest lacks its workspace or files")
        return cls(
            workspace=workspace,
            aries_version=str(data.get("aries_version", "?")),
            embedders={str(k): str(v) for k, v in (data.get("embedders") or {}).items()},
            files=archive.file_entries(files, limits, KIND),
            format_version=data["format_version"],
        )


def check_member_path(path: str) -> str:
    """Refuse a member path that could land outside the workspace or is not plainly relative."""
    return archive.check_member_path(path, KIND)
