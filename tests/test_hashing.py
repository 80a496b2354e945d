"""SHA-256 in one place (services.hashing): the forms Aries records, and nobody else hashing by hand."""

from __future__ import annotations

import ast
import hashlib
import io
from pathlib import Path

from services.hashing import (
    HashingReader,
    canonical_json,
    content_hash,
    file_sha256,
    sha256_hex,
    sha256_parts,
    sha256_tagged,
)

ROOT = Path(__file__).resolve().parents[1]


def test_sha256_is_computed_only_in_services_hashing() -> None:
    """No module of the product calls hashlib.sha256 itself (blake2b feature hashing is not a record)."""
    found = []
    for package in ("app", "screens", "widgets", "services"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "services/hashing.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr == "sha256":
                    if isinstance(node.value, ast.Name) and node.value.id == "hashlib":
                        found.append(f"{rel}:{node.lineno}")
                if isinstance(node, ast.ImportFrom) and node.module == "hashlib":
                    found.append(f"{rel}:{node.lineno}")
    assert found == []


def test_the_recorded_forms() -> None:
    assert sha256_hex("é") == hashlib.sha256("é".encode()).hexdigest() == sha256_hex("é".encode())
    assert sha256_tagged(b"x") == "sha256:" + hashlib.sha256(b"x").hexdigest()
    assert sha256_parts(["a", b"b", "c"]) == sha256_hex("abc")
    assert canonical_json({"b": 1, "a": ["é", 2.5]}) == '{"a":["é",2.5],"b":1}'
    assert content_hash({"b": 1, "a": 2}) == content_hash({"a": 2, "b": 1}) == sha256_tagged('{"a":2,"b":1}')
    assert canonical_json({"p": Path("/x")}) == '{"p":"/x"}'  # what JSON has no type for: str()


def test_files_and_streams(tmp_path: Path) -> None:
    data = bytes(range(256)) * 5000  # more than one block
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_sha256(path) == (len(data), hashlib.sha256(data).hexdigest())
    reader = HashingReader(io.BytesIO(data))
    assert reader.read(10) == data[:10] and reader.count == 10
    while reader.read(4096):
        pass
    assert reader.count == len(data) and reader.hexdigest() == hashlib.sha256(data).hexdigest()
