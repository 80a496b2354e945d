"""``aries -w W`` starts a new conversation; ``--continue`` (``--conversation ID``) reopens one: the
Transcript pane shows its earlier turns and the next turn continues it."""

from __future__ import annotations

from pathlib import Path

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import Messages, panes_show, settle
from widgets.transcript.pane import TranscriptPane

SIZE = (120, 36)


def seeded(aries_home: Path) -> tuple[str, str]:
    workspace = WorkspaceManager().create("talk")[0]
    older = workspace.new_transcript()
    older.append("user", "the older question", turn_id=f"{older.conversation_id}-t0001")
    newer = workspace.new_transcript()
    newer.append("user", "yesterday's question", turn_id=f"{newer.conversation_id}-t0001")
    newer.append("assistant", "yesterday's answer", turn_id=f"{newer.conversation_id}-t0001", provider="offline")
    workspace.close()
    return older.conversation_id, newer.conversation_id


async def shown(app: AriesApp) -> tuple[str, list[str]]:
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)  # the panes are filled from it
        await settle(pilot)
        assert app.session is not None
        pane = app.screen.query_one(TranscriptPane)
        return app.session.conversation.conversation_id, [str(e["content"]) for e in pane.entries()]


async def test_continue_reopens_the_last_conversation(aries_home: Path) -> None:
    _, newer = seeded(aries_home)
    conversation, contents = await shown(AriesApp("talk", conversation="last"))
    assert conversation == newer and contents == ["yesterday's question", "yesterday's answer"]


async def test_a_new_launch_starts_a_new_conversation(aries_home: Path) -> None:
    older, newer = seeded(aries_home)
    conversation, contents = await shown(AriesApp("talk", conversation="new"))
    assert conversation not in (older, newer) and contents == []


async def test_conversation_id_reopens_that_one(aries_home: Path) -> None:
    older, _ = seeded(aries_home)
    conversation, contents = await shown(AriesApp("talk", conversation=older[:-2]))
    assert conversation == older and contents == ["the older question"]
