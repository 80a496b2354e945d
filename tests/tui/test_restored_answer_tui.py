"""What ``--continue`` and ``/resume`` restore (issue 30 item 7): a recorded answer is rendered as its
stream was when the turn ended — its citation links and row, its usage line —, and the Context pane
shows the reopened conversation's last injected set (or nothing), never the conversation left."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Markdown, Static

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import Messages, command, panes_show, settle, until
from widgets.context.pane import ContextPane
from widgets.messages import ConversationStarted
from widgets.transcript.pane import TranscriptPane
from widgets.transcript.streaming import CitationLink, RecordedAnswer

SIZE = (120, 36)
HANDLES = ["docs:bergen.md#0", "docs:oslo.md#2"]


def seeded() -> tuple[str, str]:
    """Workspace ``talk``: a conversation whose turn injected two passages and cited one, with its usage
    (the output counted by Aries), and a later one with no retrieval."""
    workspace = WorkspaceManager().create("talk")[0]
    cited = workspace.new_transcript()
    turn = f"{cited.conversation_id}-t0001"
    cited.append("user", "where did my sister move?", turn_id=turn)
    cited.append(
        "system", "retrieval: 2 chunks", turn_id=turn, kind="retrieval", query="sister", index="docs", handles=HANDLES
    )
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "completion_tokens_estimated": 9, "elapsed_ms": 1500.0}
    cited.append(
        "assistant",
        f"She moved to Bergen [{HANDLES[0]}].",
        turn_id=turn,
        provider="openai",
        provenance="local",
        model="gemma",
        citations=[HANDLES[0]],
        usage={**usage, "steps": 1, "prompt_tokens_estimated": 120},
    )
    plain = workspace.new_transcript()
    other = f"{plain.conversation_id}-t0001"
    plain.append("user", "hello", turn_id=other)
    plain.append("assistant", "Hello.", turn_id=other, provider="offline", provenance="local", citations=[])
    workspace.close()
    return cited.conversation_id, plain.conversation_id


def context_rows(app: AriesApp) -> list[str]:
    tables = list(app.screen_stack[0].query_one(ContextPane).query("#context-table"))
    if not tables or not tables[0].display:
        return []
    table = tables[0]
    assert isinstance(table, DataTable)
    return [str(table.get_row_at(n)[1]) for n in range(table.row_count)]


async def test_a_restored_answer_keeps_its_links_and_usage_and_the_context_follows(aries_home: Path) -> None:
    cited, plain = seeded()
    app, messages = AriesApp("talk", conversation=cited), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        await settle(pilot)
        pane = app.screen_stack[0].query_one(TranscriptPane)
        answers = list(pane.query(RecordedAnswer))
        assert len(answers) == 1
        answer = answers[0]
        await until(pilot, lambda: bool(answer.query(CitationLink)), what="the citation row")
        assert [link.handle for link in answer.query(CitationLink)] == [HANDLES[0]]
        usage = str(answer.query_one("#stream-usage", Static).render())
        assert "≈120 tokens in" in usage and "≈9 out" in usage and "1.5 s" in usage
        assert f"aries-chunk:{HANDLES[0]}" in answer.query_one(Markdown).source  # the link in the answer itself
        assert [e["content"] for e in pane.entries()][-1] == f"She moved to Bergen [{HANDLES[0]}]."
        # The Context pane: the reopened conversation's last injected set after /resume, nothing after
        # /resume of one without retrieval or /new.
        messages.listen(app)
        mark = messages.mark()
        await command(pilot, f"/resume {plain}")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        await settle(pilot)
        assert context_rows(app) == []
        empty = app.screen_stack[0].query_one("#context-empty", Static)
        assert empty.display and "Nothing retrieved yet in this conversation" in str(empty.render())
        mark = messages.mark()
        await command(pilot, f"/resume {cited}")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        await settle(pilot)
        assert context_rows(app) == HANDLES
        mark = messages.mark()
        await command(pilot, "/new")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        await settle(pilot)
        assert context_rows(app) == []
        # /fork of the first conversation: the fork's turn carries its injected set.
        mark = messages.mark()
        await command(pilot, f"/resume {cited}")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        mark = messages.mark()
        await command(pilot, "/fork")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        await settle(pilot)
        assert app.session is not None and app.session.conversation.conversation_id != cited
        assert context_rows(app) == HANDLES
