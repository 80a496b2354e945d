"""The MIME type a manifest records for a member path: the same answer on every machine."""

from __future__ import annotations

import mimetypes
from pathlib import PurePosixPath

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
    """The type of ``path`` by its suffix alone (never by the machine's tables or the file's bytes)."""
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in _EXTRA_MIME:
        return _EXTRA_MIME[suffix]
    return _MIME.guess_type(path, strict=False)[0] or "application/octet-stream"
