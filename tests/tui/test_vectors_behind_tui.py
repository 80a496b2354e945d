"""Keywords first in the TUI: vectors an interrupted ``rag index add`` left pending are filled in by a
background worker once the workspace is open, and a ``/rag query`` meanwhile says the dense share."""

from __future__ import annotations

import threading
from pathlib import Path

from app.aries_app import AriesApp
from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.models import ProgressEvent
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import read_transcript
from tests.tui.helpers import Messages, settle, until
from widgets.messages import HitsFound

SIZE = (160, 48)


def _half_embedded(tmp_path: Path) -> Path:
    """Workspace ``demo`` with index ``docs``: every file searchable by keyword, no vector written
    (the add was cancelled as its vector phase began)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(6):
        (folder / f"note{i}.md").write_text(f"# Note {i}\n\nHerons wade in water number{i}.\n", encoding="utf-8")
    workspace, _ = WorkspaceManager().create("demo")
    cancel = threading.Event()

    def progress(event: ProgressEvent) -> None:
        if event.stage == "keywords":
            cancel.set()

    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        report = engine.index_add(folder, "docs", progress=progress, cancel=cancel)
        assert report.cancelled and report.vectors_pending == 6
        caption = engine.query("herons number3", k=3).dense_note
        assert caption == "dense: 0 % of this index"
    return workspace.indexes_dir


async def test_pending_vectors_are_filled_in_the_background_after_the_workspace_opens(tmp_path: Path) -> None:
    indexes = _half_embedded(tmp_path)
    from services.retrieval.backfill import pending_indexes

    assert pending_indexes(indexes) == ["docs"]
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await until(pilot, lambda: not pending_indexes(indexes), messages=messages, what="the vectors filled in")
        await settle(pilot)
        assert app.session is not None
        said = [e.get("content", "") for e in read_transcript(app.session.conversation.transcript.path).entries]
        assert any("Index docs: 6 vectors written behind the keywords (vectors: 100 %)" in str(s) for s in said), said
        messages.listen(app)
        await pilot.press(*"/rag query herons number3", "enter")
        found = await messages.wait_for(pilot, HitsFound)
        assert "dense:" not in found.caption  # complete: nothing to say


async def test_a_query_while_vectors_are_pending_says_the_dense_share_in_the_context_pane(tmp_path: Path) -> None:
    """Another Aries fills the vectors (it holds ``docs.vectors.lock``): this one leaves them to it, and
    its ``/rag query`` answers from the keywords and says how much of the index dense search covered."""
    indexes = _half_embedded(tmp_path)
    from services.retrieval.backfill import pending_indexes
    from services.retrieval.store_locks import IndexLocks

    app = AriesApp("demo")
    messages = Messages()
    with IndexLocks(indexes, "docs").filler() as taken:
        assert taken
        async with app.run_test(size=SIZE, message_hook=messages) as pilot:
            await settle(pilot)
            assert pending_indexes(indexes) == ["docs"]  # left to the other filler
            messages.listen(app)
            await pilot.press(*"/rag query herons number3", "enter")
            found = await messages.wait_for(pilot, HitsFound)
            assert "dense: 0 % of this index" in found.caption
            assert found.hits[0]["source_path"] == "note3.md"
