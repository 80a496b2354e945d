"""``/history export [md|html]`` writes the open conversation to ``<workspace>/exports/`` and says where
in a notification; the bytes are those of ``aries history export`` (one implementation)."""

from __future__ import annotations

from pathlib import Path

from app.aries_app import AriesApp
from services.export import export_conversation
from services.workspace.manager import Workspace, WorkspaceManager
from tests.tui.helpers import Messages, command, panes_show

SIZE = (120, 36)


def seeded() -> tuple[Workspace, str]:
    workspace = WorkspaceManager().create("talk")[0]
    transcript = workspace.new_transcript()
    turn = f"{transcript.conversation_id}-t0001"
    transcript.append("user", "what is <b>bold</b>? \x1b[2J", turn_id=turn)
    transcript.append(
        "assistant", "A tag. token ghp_R8x2Kq9Lm4Nz7Vb3Tc6Yh1Jd5Fg0Ws2Pe8Ua", turn_id=turn, provider="offline"
    )
    return workspace, transcript.conversation_id


async def test_history_export_writes_the_exports_folder_and_names_the_file() -> None:
    workspace, conversation_id = seeded()
    app, messages = AriesApp("talk", conversation=conversation_id), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        for fmt in ("html", "md"):
            mark = messages.mark()
            await command(pilot, f"/history export {fmt}" if fmt == "html" else "/history export")
            note = await messages.notified(pilot, "Exported to", since=mark)
            path = workspace.root / "exports" / f"{conversation_id}.{fmt}"
            assert str(path) in note
            assert Path(path).read_bytes() == export_conversation(workspace, conversation_id, fmt).data
        assert b"ghp_" not in path.read_bytes() and b"\x1b" not in path.read_bytes()
        mark = messages.mark()
        await command(pilot, "/history export pdf")
        note = await messages.notified(pilot, "md or html", since=mark)
        assert note.startswith("/history") and "export [md|html]" in note  # the usage, from the grammar


async def test_a_conversation_without_entries_has_nothing_to_export() -> None:
    WorkspaceManager().create("talk")
    app, messages = AriesApp("talk", conversation="new"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        mark = messages.mark()
        await command(pilot, "/history export html")
        await messages.notified(pilot, "Nothing to export yet", since=mark)
        assert not (app.manager.path_for("talk") / "exports").exists()
