"""The engine with real Tantivy, Chroma and SQLite on temporary folders (hash embedder)."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

from services.errors import ConfigError, InvalidInput, InvalidName, NotFound
from services.retrieval import ProgressEvent, RetrievalEngine, RetrievalSettings, derive_index_name, parse_handle
from services.retrieval.embedders import HashEmbedder
from services.retrieval.errors import (
    HandleNotFound,
    IndexMismatch,
    IndexNotFound,
    NoActiveIndex,
    UnsupportedType,
)
from services.workspace.manager import Workspace

from .builders import make_epub, make_pdf, make_raw_epub

pytestmark = pytest.mark.timeout(120)


def test_bad_backend_fails_at_start(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AXIOMME_RETRIEVAL_BACKEND", "postgres")
    with pytest.raises(ConfigError, match="AXIOMME_RETRIEVAL_BACKEND"):
        RetrievalEngine(workspace)


def test_bad_embedder_fails_at_start(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AXIOMME_EMBEDDER", "semantic-lite-9000")
    with pytest.raises(ConfigError, match="AXIOMME_EMBEDDER"):
        RetrievalEngine(workspace)


def test_add_query_show_last(engine: RetrievalEngine, docs: Path, workspace: Workspace) -> None:
    events: list[ProgressEvent] = []
    report = engine.index_add(docs, progress=events.append)
    assert report.index == "docs"
    assert sorted(report.added) == ["cats.md", "guides/install.md", "notes.txt"]
    assert report.errors == [] and report.chunks_added >= 3
    assert report.activated and engine.active_index == "docs"
    assert workspace.setting("active_index") == "docs"
    assert (workspace.indexes_dir / "docs" / "manifest.db").is_file()
    assert {e.stage for e in events} >= {"scan", "file", "commit", "keywords", "vectors", "done"}

    result = engine.query("install system libraries with apt on debian", k=3)
    top = result.hits[0]
    assert top.source_path == "guides/install.md" and top.section == "Install > Linux"
    assert top.rank == 1 and top.handle == f"docs:{top.chunk_id}"
    assert top.bm25_rank == 1 and top.bm25_score is not None and top.dense_rank is not None
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    assert result.embedding_model == "hash-v1-384"

    view = engine.show(top.handle)
    assert view.text == top.text and "apt" in view.text
    assert view.source_path == "guides/install.md" and view.content_type == "text/markdown"
    assert view.root == docs.resolve().as_posix()
    assert view.embedding_model == "hash-v1-384" and view.last_modified and view.last_modified.endswith("Z")
    original = (docs / "guides" / "install.md").read_text(encoding="utf-8")
    assert original[view.start_offset : view.end_offset] == view.text

    last = engine.last()
    assert last is not None and last.query == "install system libraries with apt on debian"
    assert last.index == "docs" and last.embedding_model == "hash-v1-384"
    assert last.params["k"] == 3 and last.params["top_n"] == engine.settings.top_n
    assert "score_threshold" in last.params and last.params["fusion"]["method"] == "rrf"
    assert [h["handle"] for h in last.hits] == [h.handle for h in result.hits]
    assert last.hits[0]["score"] == pytest.approx(top.score)


def test_index_list_use_drop(engine: RetrievalEngine, docs: Path, tmp_path: Path, workspace: Workspace) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text("another text about nothing much", encoding="utf-8")
    engine.index_add(docs)
    engine.index_add(other, name="second")
    infos = {info.name: info for info in engine.index_list()}
    assert set(infos) == {"docs", "second"}
    assert infos["docs"].active and not infos["second"].active
    assert infos["docs"].files == 3 and infos["second"].files == 1
    assert infos["second"].roots == [other.resolve().as_posix()]

    engine.index_use("second")
    assert workspace.setting("active_index") == "second"
    with RetrievalEngine(workspace) as again:  # persisted in the workspace
        assert again.active_index == "second"
        assert again.query("nothing much", k=1).hits[0].source_path == "a.txt"

    engine.index_drop("second")
    assert not (workspace.indexes_dir / "second").exists()
    assert engine.active_index is None
    with pytest.raises(NoActiveIndex):
        engine.query("anything")
    with pytest.raises(IndexNotFound):
        engine.index_use("second")
    with pytest.raises(IndexNotFound):
        engine.index_drop("second")
    with pytest.raises(IndexNotFound):
        engine.query("x", index="second")
    with pytest.raises(InvalidName):
        engine.index_use("../escape")
    engine.index_add(other, name="second")  # a dropped name can be reused
    assert engine.query("nothing", index="second").hits


def test_incremental_reindex_keeps_handles(engine: RetrievalEngine, docs: Path) -> None:
    engine.index_add(docs)
    before = {h.handle for h in engine.query("cats purr install aspirin", k=20).hits}
    cat_handles = {h for h in before if "cats" in engine.show(h).source_path}

    again = engine.index_add(docs)
    assert sorted(again.unchanged) == ["cats.md", "guides/install.md", "notes.txt"]
    assert again.added == again.updated == again.removed == [] and again.chunks_added == 0
    assert {h.handle for h in engine.query("cats purr install aspirin", k=20).hits} == before

    (docs / "notes.txt").write_text("Aspirin thins the blood. Statins are different drugs.\n", encoding="utf-8")
    (docs / "guides" / "install.md").unlink()
    (docs / "new.md").write_text("# New\n\nA brand new page about gardening.\n", encoding="utf-8")
    changed = engine.index_add(docs)
    assert changed.updated == ["notes.txt"] and changed.added == ["new.md"]
    assert changed.removed == ["guides/install.md"] and changed.unchanged == ["cats.md"]
    assert changed.chunks_removed >= 4
    after = {h.handle for h in engine.query("cats purr install aspirin gardening", k=50).hits}
    assert cat_handles <= after
    assert not any(engine.show(h).source_path == "guides/install.md" for h in after)
    gone = next(iter(before - after - cat_handles))
    with pytest.raises(HandleNotFound):
        engine.show(gone)
    files, chunks = engine.indexes.store("docs").manifest.counts()
    assert files == 3
    assert engine.indexes.store("docs").vectors.count() == chunks  # replaced vectors are gone from Chroma
    assert engine.indexes.store("docs").lexical.searcher().num_docs == chunks  # and from Tantivy


def test_failures_are_reported_and_the_rest_is_indexed(engine: RetrievalEngine, tmp_path: Path) -> None:
    root = tmp_path / "mixed"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nReadable markdown about ducks.\n", encoding="utf-8")
    (root / "report.pdf").write_bytes(make_pdf(["Quarterly numbers about geese.", "Page two about swans."]))
    make_epub(root / "book.epub", [("Ducks", "<p>Chapter on ducks and ponds.</p>")])
    (root / "locked.pdf").write_bytes(make_pdf(["secret"], password="pw"))
    (root / "broken.pdf").write_bytes(make_pdf(["cut short"])[:200])
    (root / "binary.txt").write_bytes(b"\x00\x01\x02\x03" * 100)
    (root / "empty.md").write_bytes(b"")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (root / "broken.epub").write_bytes(b"PK\x03\x04 nope")
    (root / "deep.html").write_text("<div>" * 5000, encoding="utf-8")
    (root / "image.png").write_bytes(b"\x89PNG")
    report = engine.index_add(root)
    errors = {issue.path: issue.code for issue in report.errors}
    assert errors == {
        "locked.pdf": "encrypted",
        "broken.pdf": "malformed",
        "binary.txt": "binary_content",
        "empty.md": "empty",
        "latin1.txt": "bad_encoding",
        "broken.epub": "malformed",
    }
    assert sorted(report.added) == ["book.epub", "good.md", "report.pdf"]
    # over a limit (here the nesting depth): skipped, with the limit named
    assert [(s.path, s.code) for s in report.skipped] == [("image.png", "unsupported_type"), ("deep.html", "too_deep")]
    assert report.exit_code == 3 and len(report.not_indexed) == 7  # 6 failed, 1 over a limit
    hit = engine.query("swans", k=1).hits[0]
    assert hit.source_path == "report.pdf" and hit.page == 2
    hit = engine.query("ponds", k=1).hits[0]
    assert hit.source_path == "book.epub" and hit.section == "Ducks"
    assert engine.show(hit.handle).content_type == "application/epub+zip"
    # a file that breaks later keeps its old chunks, is reported and marked failed (tests/retrieval/test_heal.py)
    (root / "good.md").write_bytes(b"\xff\xfe\x00broken")
    later = engine.index_add(root)
    assert "good.md" not in later.removed and later.kept == ["good.md"]
    assert {i.path for i in later.errors} >= {"good.md"}
    assert [f["path"] for f in engine.index_info("mixed").failed] == ["good.md"]


def test_symlinks_never_leave_the_root(engine: RetrievalEngine, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret launch codes", encoding="utf-8")
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "inner.txt").write_text("inner text about owls", encoding="utf-8")
    os.symlink(outside / "secret.txt", root / "leak.txt")
    os.symlink(outside, root / "leakdir")
    os.symlink(root / "sub" / "inner.txt", root / "alias.txt")  # stays inside: allowed
    os.symlink(tmp_path / "missing.txt", root / "dangling.txt")
    report = engine.index_add(root)
    skipped = {s.path: s.code for s in report.skipped}
    assert skipped["leak.txt"] == "unsafe_path"
    assert skipped["leakdir"] == "unsafe_path"
    assert skipped["dangling.txt"] == "unsafe_path"
    assert sorted(report.added) == ["alias.txt", "sub/inner.txt"]
    assert all("launch" not in h.text for h in engine.query("top secret launch codes", k=10).hits)


def test_single_file_and_missing_paths(engine: RetrievalEngine, docs: Path, tmp_path: Path) -> None:
    report = engine.index_add(docs / "cats.md")
    assert report.index == "cats" and report.added == ["cats.md"]
    with pytest.raises(NotFound):
        engine.index_add(tmp_path / "nope")
    (tmp_path / "x.bin").write_bytes(b"1")
    with pytest.raises(UnsupportedType):
        engine.index_add(tmp_path / "x.bin")
    assert [info.name for info in engine.index_list()] == ["cats"]  # nothing created for a refused root


def test_same_relative_path_from_two_roots(engine: RetrievalEngine, tmp_path: Path) -> None:
    for folder, word in (("a", "apples"), ("b", "bananas")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "README.md").write_text(f"# Readme\n\nAbout {word}.\n", encoding="utf-8")
    engine.index_add(tmp_path / "a", name="fruit")
    report = engine.index_add(tmp_path / "b", name="fruit")
    assert [(i.path, i.code) for i in report.errors] == [("README.md", "duplicate_source")]
    assert engine.query("apples", index="fruit", k=1).hits[0].text.endswith("About apples.")


def test_cancel_stops_between_files_and_keeps_whole_files(engine: RetrievalEngine, tmp_path: Path) -> None:
    import services.retrieval.ingest as ingest

    root = tmp_path / "many"
    root.mkdir()
    for i in range(12):
        (root / f"f{i:02}.txt").write_text(f"document number {i} about topic {i}", encoding="utf-8")
    cancel = threading.Event()

    def on_progress(event: ProgressEvent) -> None:
        if event.stage == "file" and event.done == 7:
            cancel.set()

    old = ingest.FLUSH_FILES
    ingest.FLUSH_FILES = 3
    try:
        report = engine.index_add(root, progress=on_progress, cancel=cancel)
    finally:
        ingest.FLUSH_FILES = old
    assert report.cancelled and not report.activated
    # The first batch was written; the second was being embedded in the writer thread while the
    # seventh file was read, so the cancel finds it either written whole or not written at all.
    written = len(report.added)
    assert written in (3, 6) and report.added == [f"f{i:02}.txt" for i in range(written)]
    files, chunks = engine.indexes.store("many").manifest.counts()
    assert files == written and chunks == written
    resumed = engine.index_add(root)
    assert len(resumed.unchanged) == written and len(resumed.added) == 12 - written and not resumed.cancelled


def test_query_validation_and_threshold(engine: RetrievalEngine, docs: Path) -> None:
    engine.index_add(docs)
    with pytest.raises(InvalidInput):
        engine.query("   ")
    with pytest.raises(InvalidInput):
        engine.query("cats", k=0)
    all_hits = engine.query("cats", k=10).hits
    strict = engine.query("cats", k=10, score_threshold=all_hits[0].score).hits
    assert [h.handle for h in strict] == [h.handle for h in all_hits if h.score >= all_hits[0].score]
    assert engine.last() is not None and engine.last().params["score_threshold"] == all_hits[0].score  # type: ignore[union-attr]
    with pytest.raises(InvalidInput):
        engine.show("not-a-handle")
    with pytest.raises(HandleNotFound):
        engine.show("nosuchindex:0123456789abcdef")
    assert parse_handle("docs:0123456789abcdef") == ("docs", "0123456789abcdef")


def test_embedder_mismatch_is_refused(workspace: Workspace, docs: Path) -> None:
    with RetrievalEngine(workspace) as engine:
        engine.index_add(docs)
    with RetrievalEngine(workspace, embedder=HashEmbedder(dim=128)) as other:
        with pytest.raises(IndexMismatch, match="hash-v1-384"):
            other.query("cats")
        with pytest.raises(IndexMismatch):
            other.index_add(docs)


def test_audit_table_is_shared_politely(engine: RetrievalEngine, docs: Path, workspace: Workspace) -> None:
    db_path = workspace.root / "audit.db"
    with sqlite3.connect(db_path) as db:
        db.execute("CREATE TABLE tool_calls (call_id TEXT PRIMARY KEY, tool TEXT)")
        db.execute("INSERT INTO tool_calls VALUES ('c1', 'builtin:fs:read')")
    engine.index_add(docs)
    engine.query("cats")
    engine.query("aspirin")
    engine.audit.flush()  # committed off the query's path, within FLUSH_INTERVAL_S: now
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT * FROM tool_calls").fetchall() == [("c1", "builtin:fs:read")]
        rows = db.execute("SELECT query, index_name, embedding_model FROM retrievals ORDER BY id").fetchall()
    assert rows == [("cats", "docs", "hash-v1-384"), ("aspirin", "docs", "hash-v1-384")]
    with RetrievalEngine(workspace) as restarted:  # survives a restart
        last = restarted.last()
        assert last is not None and last.query == "aspirin"
        assert [r.query for r in restarted.history()] == ["aspirin", "cats"]


def test_memory_backend_keeps_nothing_on_disk(
    workspace: Workspace, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AXIOMME_RETRIEVAL_BACKEND", "memory")
    with RetrievalEngine(workspace) as first, RetrievalEngine(workspace) as second:
        assert first.settings.backend == "memory"
        first.index_add(docs, name="mem")
        second.index_add(docs / "cats.md", name="mem")  # the same name in another engine is another index
        assert first.query("install apt", index="mem", k=1).hits[0].source_path == "guides/install.md"
        assert [h.source_path for h in second.query("install apt", index="mem", k=5).hits] == ["cats.md"]
        assert [i.name for i in first.index_list()] == ["mem"] and first.index_list()[0].backend == "memory"
        first.index_drop("mem")
        assert first.index_list() == []
        assert second.index_list()[0].files == 1
    assert list(workspace.indexes_dir.iterdir()) == []


def test_derive_index_name(tmp_path: Path) -> None:
    (tmp_path / "My Docs!").mkdir()
    (tmp_path / ".hidden").mkdir()
    assert derive_index_name(tmp_path / "My Docs!") == "My-Docs"
    assert derive_index_name(tmp_path / ".hidden") == "hidden"
    (tmp_path / "paper.pdf").write_bytes(b"%PDF")
    assert derive_index_name(tmp_path / "paper.pdf") == "paper"


def test_settings_from_env_are_validated() -> None:
    with pytest.raises(ConfigError):
        RetrievalSettings.from_env({"AXIOMME_EMBEDDER_THREADS": "two"})
    with pytest.raises(ConfigError):
        RetrievalSettings.from_env({"AXIOMME_CHROMA_URL": "ftp://host:1"})
    with pytest.raises(ConfigError):
        RetrievalSettings.from_env({"AXIOMME_CHROMA_URL": "http://host:1/path"})
    settings = RetrievalSettings.from_env({"AXIOMME_RETRIEVAL_BACKEND": "MEMORY", "AXIOMME_CHROMA_URL": "http://h:9"})
    assert settings.backend == "memory" and settings.chroma_url == "http://h:9"


def test_lexical_index_is_rebuilt_from_the_manifest(workspace: Workspace, docs: Path) -> None:
    import shutil

    with RetrievalEngine(workspace) as engine:
        engine.index_add(docs)
        before = [h.handle for h in engine.query("apt debian install", k=5).hits]
    directory = workspace.indexes_dir / "docs"
    shutil.rmtree(directory / "tantivy")  # lost or corrupt: rebuilt without re-embedding
    with RetrievalEngine(workspace) as engine:
        assert [h.handle for h in engine.query("apt debian install", k=5).hits] == before
        engine.indexes.store("docs").manifest.set_meta(lexical_format="0:old-layout")
    (directory / "tantivy" / "meta.json").write_text("{broken", encoding="utf-8")
    with RetrievalEngine(workspace) as engine:
        store = engine.indexes.store("docs")
        assert store.manifest.get_meta("lexical_format") != "0:old-layout"
        assert store.lexical.searcher().num_docs == store.manifest.counts()[1]
        assert [h.handle for h in engine.query("apt debian install", k=5).hits] == before


def test_batches_of_an_ingest_merge_their_tantivy_segments(workspace: Workspace, tmp_path: Path) -> None:
    """Each batch commits a Tantivy segment and the commit starts merges; they must finish.  A
    rollback after a successful commit killed them, so every batch stayed a segment of its own
    and a BM25 query paid per segment (30 segments at 5,000 documents, ~600 at 100,000)."""
    root = tmp_path / "many"
    root.mkdir()
    words = "cat dog bird fish tree leaf rock sand wave wind rain snow".split()
    with RetrievalEngine(workspace) as engine:
        for batch in range(10):  # ten ingests, one batch (one commit) each
            for number in range(40):
                body = " ".join(words[(batch * 7 + number * 3 + i) % len(words)] for i in range(1000))
                (root / f"b{batch:02d}-{number:02d}.md").write_text(f"# Part {batch}.{number}\n\n{body}\n", "utf-8")
            engine.index_add(root, "many")
        store = engine.indexes.store("many")
        with store.reading():
            searcher = store.lexical.searcher()
            assert searcher.num_docs == store.manifest.counts()[1]
            assert searcher.num_segments < 8


def test_bm25_reads_chunk_ids_from_the_fast_field_and_old_layouts_are_rebuilt(workspace: Workspace, docs: Path) -> None:
    """Format 3 stores the chunk id as the ``chunk_key`` u64 fast field (BM25 reads it instead of
    the stored document); an index of format 2 is rebuilt from its manifest on open, same answers."""
    from services.retrieval.store_lexical import LEXICAL_FORMAT, bm25_search, chunk_key

    with RetrievalEngine(workspace) as engine:
        engine.index_add(docs)
        before = [(h.handle, h.bm25_rank, h.bm25_score) for h in engine.query("apt debian install", k=5).hits]
        engine.indexes.store("docs").manifest.set_meta(lexical_format="2:en_stem:text+window1+context")
    with RetrievalEngine(workspace) as engine:
        store = engine.indexes.store("docs")
        assert store.manifest.get_meta("lexical_format") == LEXICAL_FORMAT
        assert [(h.handle, h.bm25_rank, h.bm25_score) for h in engine.query("apt debian install", k=5).hits] == before
        with store.reading():
            searcher = store.lexical.searcher()
            hits = searcher.search(store.lexical.parse_query("*"), limit=1000, count=False).hits
            addresses = [address for _, address in hits]
            keys = searcher.fast_field_values("chunk_key", addresses)
            stored = [searcher.doc(address)["chunk_id"][0] for address in addresses]
            assert len(stored) == store.manifest.counts()[1] and None not in keys
            assert [f"{key:016x}" for key in keys] == stored
            found = bm25_search(store.lexical, ["apt"], 10)
            assert found and {chunk_id for chunk_id, _ in found} <= set(stored)
    assert chunk_key("00ff00ff00ff00ff") == 0x00FF00FF00FF00FF
    assert chunk_key("00FF00FF00FF00FF") is None and chunk_key("short") is None and chunk_key("g" * 16) is None


def test_iter_chunks_pages_through_every_chunk_in_file_order(engine: RetrievalEngine, docs: Path) -> None:
    """What Tantivy is rebuilt from, a page at a time: the same chunks in the same order as ``all_chunks``."""
    engine.index_add(docs)
    manifest = engine.indexes.store("docs").manifest
    every = manifest.all_chunks()
    assert len(every) >= 3
    for page in (1, 2, 3, 4096):
        assert list(manifest.iter_chunks(page)) == every


def test_bm25_finds_ids_of_another_shape_through_the_stored_field() -> None:
    """An id that is not 16 lower-case hex digits has no ``chunk_key``: BM25 reads its stored field."""
    import tantivy

    from services.retrieval.models import Chunk
    from services.retrieval.store_lexical import bm25_search, fill_lexical, tantivy_schema

    def chunk(chunk_id: str, path: str, text: str) -> Chunk:
        return Chunk(chunk_id, path, 0, text, "", 0, len(text), None, None, "h", "m")

    index = tantivy.Index(tantivy_schema())
    fill_lexical(index, [chunk("note-one", "a.md", "apt install"), chunk("0123456789abcdef", "b.md", "apt")], "t")
    assert sorted(chunk_id for chunk_id, _ in bm25_search(index, ["apt"], 10)) == ["0123456789abcdef", "note-one"]


def test_bm25_orders_equal_scores_by_chunk_id_across_the_cut() -> None:
    """Equal BM25 scores come in chunk id order, whatever order Tantivy holds the documents in (it
    orders ties by document address: the segment layout), and a tie across ``top_n`` is cut by id."""
    import tantivy

    from services.retrieval.models import Chunk
    from services.retrieval.store_lexical import bm25_search, fill_lexical, tantivy_schema

    ids = ["ffffffffffffffff", "0000000000000000", "8888888888888888", "4444444444444444"]
    chunks = [Chunk(i, f"{n}.md", 0, "same words here", "", 0, 15, None, None, "h", "m") for n, i in enumerate(ids)]
    index = tantivy.Index(tantivy_schema())
    fill_lexical(index, chunks, "t")
    found = bm25_search(index, ["word"], 10)
    assert [chunk_id for chunk_id, _ in found] == sorted(ids) and len({score for _, score in found}) == 1
    assert [chunk_id for chunk_id, _ in bm25_search(index, ["word"], 2)] == sorted(ids)[:2]


def test_stale_active_index_is_ignored(engine: RetrievalEngine, docs: Path, workspace: Workspace) -> None:
    workspace.update(active_index="ghost")
    assert engine.active_index is None
    with pytest.raises(NoActiveIndex):
        engine.query("cats")
    assert engine.index_add(docs).activated and engine.active_index == "docs"


def test_memory_backend_does_not_touch_the_workspace(
    workspace: Workspace, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AXIOMME_RETRIEVAL_BACKEND", "memory")
    with RetrievalEngine(workspace) as engine:
        assert engine.index_add(docs).activated
        assert engine.active_index == "docs" and engine.query("cats").hits
        assert workspace.setting("active_index") is None
        engine.index_drop("docs")
        assert engine.active_index is None


def test_a_second_engine_sees_new_writes(workspace: Workspace, docs: Path) -> None:
    with RetrievalEngine(workspace) as writer, RetrievalEngine(workspace) as reader:
        writer.index_add(docs)
        assert reader.query("cats purr", index="docs", k=1).hits[0].source_path == "cats.md"
        (docs / "owls.md").write_text("# Owls\n\nOwls hunt voles at dusk.\n", encoding="utf-8")
        writer.index_add(docs)
        assert reader.query("owls hunt voles", index="docs", k=1).hits[0].source_path == "owls.md"


def test_acceptance_mix_of_good_and_hostile_files(engine: RetrievalEngine, tmp_path: Path) -> None:
    """Issue 3's acceptance folder: an encrypted PDF, a truncated PDF, an EPUB whose manifest points at
    ``../``, a binary file named ``.md`` and an empty file beside good files. Each bad one gets a typed
    error, every good one is indexed, and the file the EPUB points at (outside the folder) is never read."""
    outside = tmp_path / "outside.xhtml"
    outside.write_text("<html><body><p>zanzibar-outside-marker</p></body></html>", encoding="utf-8")
    root = tmp_path / "folder"
    root.mkdir()
    (root / "notes.md").write_text("# Notes\n\nGood markdown about herons.\n", encoding="utf-8")
    (root / "plain.txt").write_text("Plain text about kingfishers.\n", encoding="utf-8")
    (root / "paper.pdf").write_bytes(make_pdf(["A paper about egrets."]))
    make_epub(root / "good.epub", [("Storks", "<p>A chapter about storks.</p>")])
    (root / "locked.pdf").write_bytes(make_pdf(["secret"], password="pw"))
    (root / "truncated.pdf").write_bytes(make_pdf(["cut short"])[:200])
    make_raw_epub(root / "escape.epub", "../../outside.xhtml")
    (root / "binary.md").write_bytes(bytes(range(256)) * 8)
    (root / "empty.txt").write_bytes(b"")
    report = engine.index_add(root)
    errors = {issue.path: issue.error for issue in report.errors}
    assert set(errors) == {"locked.pdf", "truncated.pdf", "escape.epub", "binary.md", "empty.txt"}
    assert all(errors.values()), errors  # each has a typed error name
    assert errors["escape.epub"] == "UnsafePath"
    assert sorted(report.added) == ["good.epub", "notes.md", "paper.pdf", "plain.txt"]
    for word in ("herons", "kingfishers", "egrets", "storks"):
        assert engine.query(word, k=1).hits, word
    hits = engine.query("zanzibar-outside-marker", k=20).hits
    assert all("zanzibar" not in hit.text for hit in hits)
