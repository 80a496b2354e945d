"""The TUI's ingest result: every file with its reason in the transcript, a warning when some were not indexed."""

from __future__ import annotations

from pathlib import Path

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import read_transcript
from tests.tui.helpers import Messages
from tests.tui.test_retrieval_tui import SIZE, settle


async def test_ingest_result_lists_each_file_and_warns(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nDucks swim in ponds.\n", encoding="utf-8")
    (docs / "deep.html").write_text("<div>" * 1000, encoding="utf-8")
    (docs / "bad\x1b[31m.txt").write_bytes(b"caf\xe9")  # a hostile name stays inert
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await pilot.press(*f"/rag index add {docs} --name docs", "enter")
        await settle(app, pilot)
        assert app.session is not None
        report = read_transcript(app.session.conversation.transcript.path).entries[-1]["content"]
        lines = report.splitlines()
        assert lines[0].startswith("Index docs (done") and "1 added" in lines[0] and "1 failed, 1 skipped" in lines[0]
        assert "  added    good.md" in lines, report
        deep = "  skipped  deep.html: [too_deep] HTML elements nested deeper than"
        assert any(line.startswith(deep) for line in lines), report
        failed = [line for line in lines if line.startswith("  failed   bad")]
        assert len(failed) == 1 and "\x1b" not in failed[0] and "[bad_encoding]" in failed[0], report
        assert "2 file(s) not indexed: each is listed above with its reason." in lines
        assert any("2 file(s) not indexed" in note for note in messages.notes(severity="warning"))


async def test_a_second_index_says_which_one_queries_go_to(tmp_path: Path) -> None:
    """The first index is put in use; a second one is built beside it, and the summary says how to switch."""
    for name in ("docs", "notes"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.md").write_text(f"# {name}\n\nHerons wade in {name}.\n", encoding="utf-8")
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE, message_hook=Messages()) as pilot:
        for name in ("docs", "notes"):
            await pilot.press(*f"/rag index add {tmp_path / name}", "enter")
            await settle(app, pilot)
        assert app.session is not None
        entries = read_transcript(app.session.conversation.transcript.path).entries
        first, second = entries[-2]["content"].splitlines(), entries[-1]["content"].splitlines()
        assert first[-1] == "Index docs is now in use."
        assert second[-1] == "Queries still go to index docs; /rag index use notes switches to this one."
        assert app.session.engine().active_index == "docs"
