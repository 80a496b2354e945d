"""The conversation search index is derived: never exported, never read from a bundle, rebuilt."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import zstandard

from services.bundles.export import export_workspace
from services.bundles.importer import import_bundle
from services.conversation import AssistantAnswer, Conversation, UserMessage
from services.history_search.query import search
from services.history_search.store import HistoryIndex
from services.workspace.manager import WorkspaceManager


def _members(bundle: Path) -> list[str]:
    raw = zstandard.ZstdDecompressor().stream_reader(bundle.open("rb"))
    with tarfile.open(fileobj=raw, mode="r|") as tar:
        return [member.name for member in tar]


def test_an_export_leaves_the_index_out_and_the_import_rebuilds_the_same_hits(tmp_path: Path) -> None:
    workspace, _ = WorkspaceManager(tmp_path / "a").create("w")
    talk = Conversation(workspace.new_transcript())
    turn = talk.new_turn()
    talk.record(UserMessage(text="the petrel flies low", turn_id=turn))
    talk.record(AssistantAnswer(text="Storm petrels do.", provider="offline", turn_id=turn))
    before = search(HistoryIndex.for_workspace(workspace), "petrel").to_dict()
    assert len(before["hits"]) == 2 and (workspace.root / "cache" / "conversations").is_dir()
    bundle = export_workspace(workspace, tmp_path / "w.aries.tar.zst", aries_version="t")
    members = _members(Path(bundle.path))
    assert "transcripts" in {m.split("/")[0] for m in members}
    assert not [m for m in members if m == "cache" or m.startswith("cache/")]
    workspace.close()

    report = import_bundle(Path(bundle.path), WorkspaceManager(tmp_path / "b"))
    imported, _ = WorkspaceManager(tmp_path / "b").open(report.name)
    assert not (imported.root / "cache").exists()
    assert search(HistoryIndex.for_workspace(imported), "petrel").to_dict() == before
    imported.close()


def test_an_imported_bundle_that_carries_an_index_has_it_dropped(tmp_path: Path) -> None:
    files = [
        ("workspace.yaml", b"format_version: 1\nname: carried\n"),
        ("transcripts/c-x.ndjson", b""),
        ("cache/conversations/meta.json", json.dumps({"format": 1, "generation": 1}).encode()),
        ("cache/conversations/tantivy/meta.json", b'{"segments": "hostile"}'),
    ]
    manifest = {
        "format": "aries-bundle",
        "format_version": 1,
        "aries_version": "test",
        "workspace": {"name": "carried"},
        "embedders": {},
        "files": [
            {"path": name, "size": len(body), "sha256": hashlib.sha256(body).hexdigest(), "mime": "text/plain"}
            for name, body in files
        ],
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, body in [("aries-bundle.json", json.dumps(manifest).encode()), *files]:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    bundle = tmp_path / "carried.tar.zst"
    bundle.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    report = import_bundle(bundle, WorkspaceManager(tmp_path / "ws"))
    assert not (tmp_path / "ws" / report.name / "cache").exists()
