"""Tantivy's own check of its segment files, done before Tantivy opens them.

Every file Tantivy writes for a segment (``<segment id>.idx``, ``.term``, ``.pos``, ``.store``,
``.fast``, ``.fieldnorm``, ``<segment id>.<opstamp>.del``) ends in a footer: a JSON object
``{"version": …, "crc": CRC-32 of the bytes before the footer}``, its length (u32, little-endian)
and the magic number 1337 (u32). Tantivy opens a file whose footer is cut or garbled with a Rust
panic, and the panic's message goes straight to the process's stderr — through the TUI's screen, or
as a backtrace in the CLI — before Python can turn it into an error. Checking the footers and the
CRC first (zlib's CRC-32 is Tantivy's ``crc32fast``) turns a damaged file into a rebuild with one
notice instead. It reads every segment file once per open of the index: tens of milliseconds for
the 100,000 messages of ``bench/history_search.py``.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from pathlib import Path

MAGIC = 1337
SEGMENT_FILE = re.compile(r"^[0-9a-f]{32}(\.\d+)?\.(idx|term|pos|store|fast|fieldnorm|del)$")
_CHUNK = 1 << 20


def damaged_files(directory: Path) -> list[str]:
    """The names of the segment files under ``directory`` whose footer or CRC is wrong, sorted."""
    damaged = []
    try:
        names = sorted(entry.name for entry in directory.iterdir() if SEGMENT_FILE.match(entry.name))
    except OSError:
        return []
    for name in names:
        if not _sound(directory / name):
            damaged.append(name)
    return damaged


def _sound(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            if size < 8:
                return False
            handle.seek(size - 8)
            length, magic = struct.unpack("<II", handle.read(8))
            if magic != MAGIC or length > size - 8:
                return False
            body = size - 8 - length
            handle.seek(body)
            footer = json.loads(handle.read(length))
            handle.seek(0)
            crc, left = 0, body
            while left:
                chunk = handle.read(min(_CHUNK, left))
                if not chunk:
                    return False
                crc, left = zlib.crc32(chunk, crc), left - len(chunk)
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(footer, dict) and footer.get("crc") == crc


__all__ = ["MAGIC", "damaged_files"]
