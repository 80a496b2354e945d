"""Snapshots of the citation marks (issue 33 item 4): an answer whose sentences carry their marks, and
the chunk viewer with the supporting span highlighted.

Baselines live in snapshots/test_snapshots_citations/.
"""

from __future__ import annotations

from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.chunk_viewer import ChunkViewer
from services.assistant.citation_turn import check_turn, checks_record
from services.retrieval.models import ChunkView
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import Transcript
from tests.tui.fixtures import CONVERSATION
from tests.tui.helpers import settle

SIZE = (100, 30)
HANDLE = "docs:00000000000000aa"
CHUNK = (
    "The policy gateway sees every tool call first. Writes wait for the operator, who approves once, "
    "for the session, or denies with a reason. Reads run at once."
)
ANSWER = (
    f"Writes wait for the operator, who approves once or for the session [{HANDLE}]. "
    f"Penguins migrate across Antarctic ice [{HANDLE}]. Reads need the [docs:0123456789abcdef] flag. "
    "Aries was written in 2026."
)


def seeded() -> None:
    """Workspace ``demo``: one turn whose answer was checked (supported, unsupported, invented, uncited)."""
    workspace, _ = WorkspaceManager().create("demo")
    transcript = Transcript(workspace.transcripts_dir, CONVERSATION)
    turn = f"{CONVERSATION}-t0001"
    transcript.append("user", "how are writes approved?", turn_id=turn, timestamp="2026-01-01T09:00:00.000Z")
    checks = checks_record(check_turn(ANSWER, [{"handle": HANDLE, "text": CHUNK}]))
    transcript.append(
        "assistant",
        ANSWER,
        turn_id=turn,
        provider="ollama",
        provenance="local",
        model="gemma3:270m",
        citations=[HANDLE],
        checks=checks,
        timestamp="2026-01-01T09:00:02.000Z",
    )
    workspace.close()


def test_citation_marks_under_an_answer(snap_compare) -> None:
    """You should see the restored answer with its citation link and the "cited" row, then four marks,
    each a symbol and a word in its theme colour: "✓ supported" (green) for the writes sentence,
    "✗ unsupported" (red) for the penguins, "? invented" (red) for the handle never given, "! uncited"
    (muted) for the year; then the grey legend saying supported means grounded, not proven true, and
    that overlap cannot see negation."""
    seeded()

    async def run_before(pilot: Pilot[int]) -> None:
        await pilot.app.ready()  # type: ignore[attr-defined]
        await settle(pilot)

    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=run_before)


def test_chunk_viewer_highlights_the_supporting_span(snap_compare) -> None:
    """You should see the chunk viewer over the transcript: the metadata, the note "the span that
    supports the citing sentence is highlighted (characters 47–137 …)", and the chunk's text with
    "Writes wait for the operator, who approves once, for the session, or denies with a reason." in
    reverse video between the unhighlighted first and last sentences."""
    seeded()
    report = check_turn(ANSWER, [{"handle": HANDLE, "text": CHUNK}])
    span = report.sentences[0].checks[0].span
    assert span == (47, 137)
    view = ChunkView(
        handle=HANDLE, index="docs", chunk_id="00000000000000aa", text=CHUNK, context="", source_path="approvals.md",
        root="/docs", content_type="text/markdown", last_modified=None, page=None, section="Approvals",
        start_offset=0, end_offset=len(CHUNK), hash="0" * 16, embedding_model="hash", ordinal=0,
    )  # fmt: skip

    async def run_before(pilot: Pilot[int]) -> None:
        await pilot.app.ready()  # type: ignore[attr-defined]
        await settle(pilot)
        pilot.app.push_screen(ChunkViewer(view, span))
        await settle(pilot)

    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=run_before)
