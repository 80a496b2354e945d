"""Retrieval in the TUI: build an index from mixed files, query, /rag last, /rag show, and messages."""

from __future__ import annotations

import os
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable

from app.aries_app import AriesApp
from screens.chunk_viewer import ChunkViewer
from screens.confirm import ConfirmScreen
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import read_transcript
from tests.retrieval.builders import make_epub, make_pdf
from tests.tui.helpers import Messages, until

SIZE = (160, 48)


def make_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tantivy.md").write_text(
        "# Search engines\n\n## Tantivy\n\nTantivy is a full-text search engine library written in Rust. "
        "It ranks documents with BM25 and supports stemming analyzers.\n\n## Chroma\n\n"
        "Chroma stores embeddings and answers nearest-neighbour queries.\n"
    )
    (folder / "notes.txt").write_text("Reciprocal rank fusion merges ranked lists from several retrievers.\n")
    (folder / "manual.pdf").write_bytes(
        make_pdf(["Page one introduces the workbench.", "Page two explains approval modes for tools."])
    )
    make_epub(folder / "book.epub", [("Chapter One", "<p>Operators approve tool calls in a modal.</p>")])
    for path in folder.iterdir():
        os.utime(path, (1767258000, 1767258000))  # 2026-01-01 09:00 UTC: snapshots show last_modified
    return folder


async def settle(app: AriesApp, pilot: Pilot[int]) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_index_query_last_and_show(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "docs")
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*f"/rag index add {corpus} --name docs", "enter")
        await settle(app, pilot)
        assert app.workspace is not None and app.workspace.setting("active_index") == "docs"
        assert app.session is not None
        report = read_transcript(app.session.conversation.transcript.path).entries[-1]["content"]
        assert report.startswith("Index docs (done") and "4 added" in report, report

        await pilot.press(*"/rag query stemming analyzers BM25", "enter")
        await settle(app, pilot)
        table = app.screen.query_one("#context-table", DataTable)
        assert table.row_count > 0
        first = table.get_row_at(0)
        assert str(first[1]).startswith("docs:") and str(first[2]).startswith("tantivy.md")

        # /rag last survives a restart: it reads the audit log
    again = AriesApp("demo")
    async with again.run_test(size=SIZE) as pilot:
        await again.ready()
        await pilot.press(*"/rag last", "enter")
        await settle(again, pilot)
        table = again.screen.query_one("#context-table", DataTable)
        assert table.row_count > 0 and str(table.get_row_at(0)[2]).startswith("tantivy.md")
        assert again.focused is again.screen.query_one("#prompt")  # /rag last leaves typing where it was
        await pilot.press("f3", "enter")  # F3 focuses the Context pane; Enter opens the highlighted chunk
        await settle(again, pilot)
        assert isinstance(again.screen, ChunkViewer)
        chunk = again.screen.chunk
        assert chunk.source_path == "tantivy.md" and "Tantivy" in chunk.text and chunk.section
        handle = chunk.handle
        await pilot.press("escape")
        await pilot.pause()
        # Esc gives the prompt back, not the Context pane (issue 24): Enter would reopen the chunk.
        await until(pilot, lambda: again.focused is again.screen.query_one("#prompt"), what="the focus at the prompt")
        await pilot.press("escape", *f"/rag show {handle}", "enter")
        await settle(again, pilot)
        assert isinstance(again.screen, ChunkViewer) and again.screen.chunk.handle == handle


async def test_a_message_retrieves_injects_and_answers_with_handles(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "docs")
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*f"/rag index add {corpus} --name docs", "enter")
        await settle(app, pilot)
        await pilot.press(*"how are tool calls approved?", "enter")
        await settle(app, pilot)
        assert app.session is not None
        answer = read_transcript(app.session.conversation.transcript.path).entries[-1]
        assert answer["role"] == "assistant" and answer["provider"] == "offline"
        assert answer["citations"] and all(h.startswith("docs:") for h in answer["citations"])
        for handle in answer["citations"]:
            assert handle in answer["content"]
        caption = str(app.screen.query_one("#context-caption").render())
        assert "injected for: how are tool calls approved?" in caption


async def test_bad_rag_input_gets_clear_errors(tmp_path: Path) -> None:
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        for line in ("/rag", "/rag index add", "/rag query", "/rag query x -k zero", "/rag frob"):
            mark = messages.mark()
            await pilot.press(*line, "enter")
            await messages.notified(pilot, "Usage: /rag", since=mark)
        for line, expected in (
            ("/rag query anything", "no index is in use"),
            (f"/rag index add {tmp_path / 'missing'}", "no such file or folder"),
            ("/rag show nope:abc", "nope"),
            (f"/rag index add {tmp_path} --name ../evil", "index name"),
        ):
            mark = messages.mark()
            await pilot.press(*line, "enter")
            await messages.notified(pilot, expected, since=mark)


async def test_drop_asks_first(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "docs")
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*f"/rag index add {corpus} --name docs", "enter")
        await settle(app, pilot)
        await pilot.press(*"/rag index drop docs", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await settle(app, pilot)
        assert [i.name for i in app.session.engine().index_list()] == ["docs"]
        await pilot.press(*"/rag index drop docs", "enter", "y")
        await settle(app, pilot)
        assert app.session.engine().index_list() == []


async def test_ctrl_x_cancels_indexing_and_the_key_shows_only_meanwhile(tmp_path: Path) -> None:
    from widgets.keybar import KeyBar

    folder = tmp_path / "many"
    folder.mkdir()
    for number in range(10_000):  # far more than can be indexed between two key presses, even now (3,000: 6 s)
        (folder / f"doc{number:03d}.md").write_text(f"# Doc {number}\n\nText number {number} about rivers.\n")
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        keys = app.screen.query_one(KeyBar)
        assert "Cancel" not in [d for _, d in keys.describe()]
        await pilot.press(*f"/rag index add {folder} --name many", "enter")
        assert "Cancel" in [d for _, d in keys.describe()]  # checked live, before any pause
        await pilot.press("ctrl+x")
        await settle(app, pilot)
        assert app.session is not None
        report = read_transcript(app.session.conversation.transcript.path).entries[-1]["content"]
        assert report.startswith("Index many (cancelled"), report
        assert "Cancel" not in [d for _, d in keys.describe()]
        assert app.screen.query_one("#prompt").value == ""  # Ctrl+X did not also cut the prompt text


# -- snapshots ----------------------------------------------------------------------------------
def corpus_and_query(query: str, *, open_first: bool = False):  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, AriesApp)
        await app.ready()
        await pilot.press(*query, "enter")
        await settle(app, pilot)
        if open_first:
            app.action_focus_pane("context")
            await pilot.pause()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ChunkViewer), what="the chunk viewer")
        await settle(app, pilot)

    return run_before


def _indexed_workspace(tmp_path: Path) -> None:
    """An indexed workspace with an empty transcript (no clock times or durations on screen)."""
    from services.retrieval import RetrievalEngine

    corpus = make_corpus(tmp_path / "docs")
    workspace, _ = WorkspaceManager().create("demo")
    engine = RetrievalEngine(workspace)
    try:
        engine.index_add(corpus, "docs")
    finally:
        engine.close()


def test_context_pane_with_results(snap_compare, tmp_path: Path) -> None:
    """You should see the Context pane filled by "/rag query stemming analyzers BM25": the caption with
    the query and index docs, then rows with rank, a docs:… handle, the source (tantivy.md first), the
    section, the fused score and each retriever's rank and score."""
    _indexed_workspace(tmp_path)
    app = AriesApp("demo")
    assert snap_compare(app, terminal_size=SIZE, run_before=corpus_and_query("/rag query stemming analyzers BM25"))


def test_chunk_viewer(snap_compare, tmp_path: Path) -> None:
    """You should see the chunk viewer over the main screen: "Chunk docs:…", the metadata (handle,
    index, chunk_id, source_path tantivy.md, content_type, section, offsets, ordinal, hash, embedding
    model, last_modified) and the chunk's text about Tantivy."""
    _indexed_workspace(tmp_path)
    app = AriesApp("demo")
    run_before = corpus_and_query("/rag query stemming analyzers BM25", open_first=True)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


async def test_damaged_vector_store_is_said_and_repaired(tmp_path: Path) -> None:
    """A deleted vector store: /rag index list says so, /rag query warns (notice and Context caption)
    and answers from the keyword index, /rag index repair rebuilds it and queries are hybrid again."""
    import shutil

    corpus = make_corpus(tmp_path / "docs")
    workspace, _ = WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*f"/rag index add {corpus} --name docs", "enter")
        await settle(app, pilot)
    shutil.rmtree(workspace.indexes_dir / "docs" / "chroma")
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await pilot.press(*"/rag index list", "enter")
        await settle(app, pilot)
        assert app.session is not None
        listing = read_transcript(app.session.conversation.transcript.path).entries[-1]["content"]
        assert "vectors missing" in listing and "/rag index repair docs" in listing, listing
        await pilot.press(*"/rag query stemming analyzers BM25", "enter")
        await settle(app, pilot)
        assert any("keyword-only" in note for note in messages.notes())
        caption = str(app.screen.query_one("#context-caption").render())
        assert "KEYWORD ONLY" in caption
        table = app.screen.query_one("#context-table", DataTable)
        assert table.row_count > 0 and str(table.get_row_at(0)[2]).startswith("tantivy.md")
        await pilot.press(*"/rag index repair docs", "enter")
        await settle(app, pilot)
        said = read_transcript(app.session.conversation.transcript.path).entries[-1]["content"]
        assert "vectors rebuilt" in said and "status ok" in said, said
        await pilot.press(*"/rag query stemming analyzers BM25", "enter")
        await settle(app, pilot)
        assert "KEYWORD ONLY" not in str(app.screen.query_one("#context-caption").render())
