"""Citation marks in the TUI (issue 33 item 4), against a scripted Ollama-protocol server on loopback and
the real index: the answer's checked sentences carry their marks (symbol + word, theme colour), Enter on
a mark or a cited handle opens the chunk viewer with the supporting span highlighted, and a restored
conversation shows the same marks from its transcript."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.text import Text
from textual.content import Content
from textual.widgets import Static

from app.aries_app import AriesApp
from screens.chunk_viewer import ChunkViewer, parse_span
from services.workspace.manager import Workspace, WorkspaceManager
from tests.models.servers import Reply, ScriptedServer
from tests.tui.helpers import Messages, settle, until
from widgets.transcript.citation_marks import CitationMarks, SentenceMarkRow
from widgets.transcript.streaming import CitationLink, RecordedAnswer, StreamingAnswer

SIZE = (120, 36)
QUESTION = "how are tool calls approved?"
DOC = (
    "# Approvals\n\nThe policy gateway sees every tool call first. Writes wait for the operator, who "
    "approves once, for the session, or denies with a reason. Reads run at once.\n"
)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    server = ScriptedServer("ollama").start()
    monkeypatch.setenv("ARIES_MODEL", "ollama:llama3.2:3b")
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    yield server
    server.stop()


def indexed(tmp_path: Path) -> tuple[Workspace, str]:
    """Workspace ``demo`` with index ``docs`` of one file; the handle of its chunk."""
    workspace, _ = WorkspaceManager().create("demo")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "approvals.md").write_text(DOC, encoding="utf-8")
    from services.retrieval import RetrievalEngine

    with RetrievalEngine(workspace) as engine:
        engine.index_add(str(docs), "docs")
        handle = str(engine.query(QUESTION, k=1).hits[0].to_dict()["handle"])
    workspace.close()
    return workspace, handle


def answer_text(handle: str) -> str:
    return (
        f"Writes wait for the operator, who approves once or for the session [{handle}]. "
        f"Penguins migrate across Antarctic ice [{handle}]. "
        "Reads need the [docs:0123456789abcdef] flag. "
        "Aries was written in 2026."
    )


def highlighted(viewer: ChunkViewer) -> str:
    """The text of the chunk shown in reverse video (the highlighted span)."""
    rendered = viewer.query_one("#chunk-text", Static).render()  # a Textual Content (or a Rich Text)
    plain = rendered.plain if isinstance(rendered, Text | Content) else str(rendered)
    spans = rendered.spans if isinstance(rendered, Text | Content) else []
    return "".join(plain[s.start : s.end] for s in spans if _reverse(s.style))


def _reverse(style: object) -> bool:
    return bool(getattr(style, "reverse", False)) or "reverse" in str(style)


async def test_marks_follow_the_answer_and_enter_shows_the_supporting_span(
    tmp_path: Path, server: ScriptedServer
) -> None:
    _, handle = indexed(tmp_path)
    server.add(Reply(text=answer_text(handle), chunk_size=12))
    app, messages = AriesApp("demo"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await pilot.press(*QUESTION, "enter")
        await until(pilot, lambda: not app.commands.assistant.running, what="the turn to end")
        await settle(pilot)
        answer = app.screen.query_one(StreamingAnswer)
        await until(pilot, lambda: bool(answer.query(SentenceMarkRow)), what="the marks")
        rows = list(answer.query(SentenceMarkRow))
        assert [str(row.render())[:13].strip() for row in rows] == [
            "✓ supported",
            "✗ unsupported",
            "? invented",
            "! uncited",
        ]
        assert [row.has_class(f"-{row.sentence.verdict}") for row in rows] == [True] * 4
        # Enter on the invented handle's mark: no passage to show, and it says so.
        rows[2].focus()
        await pilot.press("enter")
        await settle(pilot)
        assert not isinstance(app.screen, ChunkViewer)
        assert any("docs:0123456789abcdef was not given to the model" in note for note in messages.notes())
        legend = str(answer.query_one(CitationMarks).query_one(".marks-legend", Static).render())
        assert "not proven true" in legend and "negation" in legend
        # Enter on the supported sentence's mark: the chunk, the sentence's support highlighted.
        rows[0].focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ChunkViewer), what="the chunk viewer")
        viewer = app.screen
        assert isinstance(viewer, ChunkViewer) and viewer.span is not None
        assert "Writes wait for the operator, who approves once" in highlighted(viewer)
        assert "The policy gateway" not in highlighted(viewer)
        await pilot.press("escape")
        await settle(pilot)
        # The cited handle's link opens the same span (its best check).
        link = answer.query_one(CitationLink)
        assert parse_span(link.href.removeprefix("aries-chunk:")) == (handle, viewer.span)
        link.focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ChunkViewer), what="the chunk viewer again")
        assert "Writes wait for the operator" in highlighted(app.screen)  # type: ignore[arg-type]


async def test_a_restored_conversation_shows_the_recorded_marks_and_an_old_one_none(
    tmp_path: Path, server: ScriptedServer
) -> None:
    workspace, handle = indexed(tmp_path)
    server.add(Reply(text=answer_text(handle)))
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*QUESTION, "enter")
        await until(pilot, lambda: not app.commands.assistant.running, what="the turn to end")
    old = workspace.new_transcript()  # written before the checks: no "checks" on the answer
    old.append("user", "where?", turn_id=f"{old.conversation_id}-t0001")
    old.append(
        "assistant",
        f"Writes wait [{handle}].",
        turn_id=f"{old.conversation_id}-t0001",
        provider="ollama",
        provenance="local",
        citations=[handle],
    )
    for conversation, expected in (("last", []), (None, ["supported", "unsupported", "invented", "uncited"])):
        restored = AriesApp("demo", conversation=conversation or _first(workspace, old.conversation_id))
        async with restored.run_test(size=SIZE) as pilot:
            await restored.ready()
            await settle(pilot)
            answer = restored.screen.query_one(RecordedAnswer)
            await until(pilot, lambda a=answer: bool(a.query(CitationLink)), what="the citation row")
            await settle(pilot)
            assert [row.sentence.verdict for row in answer.query(SentenceMarkRow)] == expected


def _first(workspace: Workspace, other: str) -> str:
    """The id of the workspace's conversation that is not ``other`` (the one the live turn wrote)."""
    from services.workspace.transcripts import by_recency

    ids = [path.stem for path in by_recency(workspace.transcripts_dir)]
    return next(i for i in ids if i != other)
