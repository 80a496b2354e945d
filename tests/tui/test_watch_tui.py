"""``/rag index watch NAME [off]`` in the TUI: a worker keeps the index current, the header names it,
each batch is a short notification; a refusal is one error line (real watchfiles, Tantivy, Chroma)."""

from __future__ import annotations

from pathlib import Path

from app.aries_app import AriesApp
from services.retrieval import RetrievalEngine, RetrievalSettings
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import read_transcript
from tests.tui.helpers import Messages, command, panes_show, settle, until

SIZE = (160, 48)


def _indexed(root: Path, name: str) -> None:
    workspace, _ = WorkspaceManager().open("demo")
    root.mkdir()
    (root / "a.md").write_text("# A\n\nHerons wade in shallow water.\n", encoding="utf-8")
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        engine.index_add(root, name)


async def test_a_watch_indexes_a_new_file_shows_in_the_header_and_stops_with_off(tmp_path: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    folder = workspace.root / "notes"
    _indexed(folder, "notes")
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await panes_show(pilot, "demo")
        await command(pilot, "/rag index watch notes")
        await messages.notified(pilot, "watching index 'notes'")
        assert "watch notes" in str(app.sub_title)
        (folder / "b.md").write_text("# B\n\nThe kestrelwing nests on cliffs.\n", encoding="utf-8")
        note = await messages.notified(pilot, "notes: batch 1: +1")
        assert "b.md" in note
        assert app.session is not None
        hits = app.session.engine().query("kestrelwing", index="notes").hits
        assert [hit.source_path for hit in hits if hit.bm25_rank] == ["b.md"]
        await command(pilot, "/rag index watch notes")  # twice: refused, the first goes on
        await messages.notified(pilot, "watched already")
        await command(pilot, "/rag index watch notes off")
        await until(pilot, lambda: "watch notes" not in str(app.sub_title), messages=messages)
        await settle(pilot)
        said = read_transcript(app.session.conversation.transcript.path).entries[-1]["content"]
        assert said == "Stopped watching index notes (1 batch(es) written).", said


async def test_a_watch_of_a_folder_outside_the_policy_roots_is_one_error_line(tmp_path: Path) -> None:
    WorkspaceManager().create("demo")
    _indexed(tmp_path / "far", "far")
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await panes_show(pilot, "demo")
        await command(pilot, "/rag index watch far")
        await messages.notified(pilot, "outside the policy's allowed roots")
        await settle(pilot)
        assert "watch far" not in str(app.sub_title)
        assert messages.notes(severity="error") == [
            f"/rag index watch folder {(tmp_path / 'far').resolve()} of index 'far' is outside the policy's "
            "allowed roots; add it to filesystem.allowed_roots to watch it"
        ]
