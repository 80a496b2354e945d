"""The TUI's ingest worker takes the same per-index writer lock as the CLI and says why it waits."""

from __future__ import annotations

import os
from pathlib import Path

from app.aries_app import AriesApp
from services.retrieval.store_locks import IndexLocks
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import read_transcript
from tests.tui.helpers import Messages, settle

SIZE = (160, 48)


async def test_tui_ingest_waits_for_another_writer_with_a_notice(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nHerons wade in shallow water.\n", encoding="utf-8")
    workspace, _ = WorkspaceManager().create("demo")
    locks = IndexLocks(workspace.indexes_dir, "docs")
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        with locks.writer():  # "another Aries" (here: this process, from another thread) writes index docs
            await pilot.press(*f"/rag index add {folder} --name docs", "enter")
            expected = f"index 'docs' is being written by another Aries (pid {os.getpid()}); waiting… Ctrl+C to stop"
            await messages.notified(pilot, expected, timeout=10)
            assert not (workspace.indexes_dir / "docs").exists()  # nothing written while it waits
        await settle(pilot)
        assert app.session is not None
        report = read_transcript(app.session.conversation.transcript.path).entries[-1]["content"]
        assert report.startswith("Index docs (done") and "1 added" in report, report
