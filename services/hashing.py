"""SHA-256, the one hash Aries records, in the forms it records it.

* ``sha256_hex(data)``: the hex digest of bytes, or of text as UTF-8 (artifact ids, etags, chunk ids);
* ``sha256_tagged(data)``: the same prefixed ``sha256:`` (audit hashes, plan and policy hashes, the
  cloud bridge's prompt hashes);
* ``sha256_parts(parts)``: the hex digest of a sequence of pieces, as if they were one string;
* ``file_sha256(path)``: a file's size and hex digest, read in blocks;
* ``canonical_json(value)`` and ``content_hash(value)``: a JSON value in one canonical form (sorted
  keys, no spaces, UTF-8 kept, ``str()`` for what JSON has no type for) and its tagged hash;
* ``HashingReader``: a binary stream read through, counting and hashing what passes (archives).

Every digest Aries stores or compares comes from here, so the same bytes always give the same
value, whichever part of Aries computed it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

BLOCK = 1 << 20
"""Bytes read at a time from a file or stream."""


def sha256_hex(data: bytes | str) -> str:
    """The hex SHA-256 of ``data`` (text is hashed as UTF-8)."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def sha256_tagged(data: bytes | str) -> str:
    """``sha256:<hex>`` of ``data`` (text is hashed as UTF-8)."""
    return "sha256:" + sha256_hex(data)


def sha256_parts(parts: Iterable[bytes | str]) -> str:
    """The hex SHA-256 of ``parts`` one after the other (text hashed as UTF-8)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8") if isinstance(part, str) else part)
    return digest.hexdigest()


def file_sha256(path: Path) -> tuple[int, str]:
    """(size in bytes, hex SHA-256) of the file at ``path``, read in blocks."""
    with Path(path).open("rb") as handle:
        reader = HashingReader(handle)
        while reader.read(BLOCK):
            pass
    return reader.count, reader.hexdigest()


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON: sorted keys, no spaces, non-ASCII kept, ``str()`` for other types."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_hash(value: Any) -> str:
    """``sha256:<hex>`` of ``value``'s canonical JSON."""
    return sha256_tagged(canonical_json(value))


class HashingReader:
    """Reads ``handle`` through, counting and hashing the bytes that pass."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.count = 0
        self._digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        block = self.handle.read(size)
        self.count += len(block)
        self._digest.update(block)
        return block

    def hexdigest(self) -> str:
        """The hex SHA-256 of the bytes read so far."""
        return self._digest.hexdigest()


__all__ = [
    "BLOCK",
    "HashingReader",
    "canonical_json",
    "content_hash",
    "file_sha256",
    "sha256_hex",
    "sha256_parts",
    "sha256_tagged",
]
