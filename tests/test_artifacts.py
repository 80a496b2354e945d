import json
import multiprocessing
import os
from pathlib import Path

import pytest

from services.errors import CorruptFile, InvalidInput, NotFound
from services.workspace.artifacts import ArtifactRegistry


def test_add_records_metadata_and_stores_content(tmp_path: Path) -> None:
    source = tmp_path / "notes.md"
    source.write_text("# Notes\nhello\n")
    registry = ArtifactRegistry(tmp_path / "ws")
    artifact, created = registry.add_file(source, description="my notes", provenance={"kind": "cli", "command": "x"})
    assert created
    assert artifact.mime_type == "text/markdown"
    assert artifact.size_bytes == source.stat().st_size
    assert artifact.hash.startswith("sha256:") and len(artifact.hash) == 71
    assert artifact.description == "my notes" and artifact.provenance == {"kind": "cli", "command": "x"}
    assert registry.read_bytes(artifact) == source.read_bytes()
    manifest = json.loads(registry.manifest_path.read_text())
    assert manifest["artifacts"][0]["path"] == artifact.path
    for key in ("path", "created_at", "mime_type", "size_bytes", "hash", "description", "provenance"):
        assert key in manifest["artifacts"][0]


def test_identical_content_is_stored_once(tmp_path: Path) -> None:
    registry = ArtifactRegistry(tmp_path)
    first, created1 = registry.add_bytes(b"same", "a.txt")
    second, created2 = registry.add_bytes(b"same", "b.txt")
    assert created1 and not created2
    assert first.id == second.id and first.hash == second.hash
    assert second.aliases == ["b.txt"]  # the second name is kept
    assert registry.get("b.txt").id == first.id
    third, _ = registry.add_bytes(b"same", "b.txt")
    assert third.aliases == ["b.txt"]  # a name is kept once
    assert len(registry.list()) == 1
    assert len(list((tmp_path / "artifacts" / "objects").rglob("*"))) == 2  # one shard dir + one object


def test_binary_is_detected(tmp_path: Path) -> None:
    artifact, _ = ArtifactRegistry(tmp_path).add_bytes(b"\x00\x01\x02binary", "blob")
    assert artifact.mime_type == "application/octet-stream"


def test_missing_and_non_regular_sources_are_typed_errors(tmp_path: Path) -> None:
    registry = ArtifactRegistry(tmp_path / "ws")
    with pytest.raises(NotFound):
        registry.add_file(tmp_path / "missing")
    with pytest.raises(InvalidInput):
        registry.add_file(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput):
        registry.add_file(fifo)
    assert registry.list() == []


def test_corrupt_manifest_is_reported_not_overwritten(tmp_path: Path) -> None:
    registry = ArtifactRegistry(tmp_path)
    registry.add_bytes(b"one", "one.txt")
    registry.manifest_path.write_text("{not json")
    with pytest.raises(CorruptFile):
        registry.list()
    with pytest.raises(CorruptFile):
        registry.add_bytes(b"two", "two.txt")
    assert registry.manifest_path.read_text() == "{not json"


def test_verify_finds_missing_and_tampered_objects(tmp_path: Path) -> None:
    registry = ArtifactRegistry(tmp_path)
    a, _ = registry.add_bytes(b"alpha", "a.txt")
    b, _ = registry.add_bytes(b"beta", "b.txt")
    registry.object_path(a).unlink()
    path_b = registry.object_path(b)
    os.chmod(path_b, 0o644)
    path_b.write_bytes(b"tampered")
    problems = registry.verify()
    assert any("missing" in p for p in problems) and any("does not match" in p for p in problems)


def test_get_by_id_hash_or_name(tmp_path: Path) -> None:
    registry = ArtifactRegistry(tmp_path)
    a, _ = registry.add_bytes(b"alpha", "a.txt")
    assert registry.get(a.id) == a == registry.get(a.hash) == registry.get("a.txt")
    with pytest.raises(NotFound):
        registry.get("nothing")


def _writer(root: str, prefix: str, count: int) -> None:
    registry = ArtifactRegistry(Path(root))
    for i in range(count):
        registry.add_bytes(f"{prefix}-{i}".encode(), f"{prefix}-{i}.txt")
        registry.add_bytes(b"shared content", "shared.txt")


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), p, 25)) for p in ("left", "right")]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    names = sorted(a.name for a in ArtifactRegistry(tmp_path).list())
    expected = sorted([f"{p}-{i}.txt" for p in ("left", "right") for i in range(25)] + ["shared.txt"])
    assert names == expected
    assert ArtifactRegistry(tmp_path).verify() == []
