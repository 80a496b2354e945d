"""Drive the TUI by keys with Textual's Pilot; assert on state, files and messages."""

from __future__ import annotations

from pathlib import Path

from textual.message import Message
from textual.widgets import Input, Static

from app.aries_app import AriesApp
from screens.help import HelpScreen
from screens.workspace_switcher import WorkspaceSwitcher
from services.models.answers import NO_INDEX_REPLY
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import read_transcript
from tests.tui.fixtures import workspace_with_transcript
from tests.tui.helpers import Messages, followed, palette_offers, settle, until
from widgets.artifacts.pane import ArtifactsPane
from widgets.transcript.pane import TranscriptEntry, TranscriptPane

SIZE = (160, 48)


async def test_first_screen_shows_the_four_panes() -> None:
    app = AriesApp()
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.pause()
        titles = {w.border_title for w in app.screen.query("TranscriptPane, ContextPane, ApprovalsPane, ArtifactsPane")}
        assert titles == {"Transcript", "Context", "Approvals", "Artifacts"}
        for widget in app.screen.query("TranscriptPane, ContextPane, ApprovalsPane, ArtifactsPane"):
            assert widget.region.width > 0 and widget.region.height > 0
            assert widget.region.bottom <= SIZE[1] and widget.region.right <= SIZE[0]
        assert "workspace (ephemeral)" in app.sub_title and "approvals guide" in app.sub_title


async def test_typing_a_message_writes_the_transcript() -> None:
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"hello there", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.session is not None
        entries = read_transcript(app.session.conversation.transcript.path).entries
        assert [(e["role"], e["content"]) for e in entries] == [("user", "hello there"), ("assistant", NO_INDEX_REPLY)]
        assert entries[1]["provider"] == "offline" and entries[1]["provenance"] == "local"
        shown = [w.entry["content"] for w in app.screen.query(TranscriptEntry)]
        assert shown == ["hello there"]  # the answer was streamed into its own block, not shown twice
        from widgets.transcript.streaming import StreamingAnswer

        [streamed] = app.screen.query(StreamingAnswer)
        assert streamed.text == NO_INDEX_REPLY and entries[1]["turn_id"] == streamed.turn_id
        assert app.screen.query_one("#prompt", Input).value == ""


async def test_switch_workspace_by_keys_swaps_transcript_and_artifacts() -> None:
    workspace_with_transcript("alpha")
    WorkspaceManager().create("beta")
    seen: list[Message] = []
    app = AriesApp("beta")
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await app.ready()
        await pilot.pause()
        assert app.workspace_name == "beta"
        assert len(app.screen.query_one(TranscriptPane).entries()) == 0
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert isinstance(app.screen, WorkspaceSwitcher)
        await pilot.press(*"alp", "enter")
        await pilot.pause()
        assert app.workspace_name == "alpha"
        assert len(app.screen.query_one(TranscriptPane).entries()) == 4
        assert app.screen.query_one(ArtifactsPane).border_subtitle == "1 item"
        assert followed(app, "alpha")  # every pane shows it
        # and back again
        await pilot.press("ctrl+o", *"beta", "enter")
        await pilot.pause()
        assert app.workspace_name == "beta" and len(app.screen.query_one(TranscriptPane).entries()) == 0


async def test_switcher_creates_a_workspace_and_refuses_bad_names(aries_home: Path) -> None:
    app = AriesApp()
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press("ctrl+o", *"../evil", "ctrl+n")
        await pilot.pause()
        assert isinstance(app.screen, WorkspaceSwitcher)
        assert "must not start with" in str(app.screen.query_one("#switcher-error").render())
        assert WorkspaceManager().list() == []
        await pilot.press(*["backspace"] * 7, *"fresh", "ctrl+n")
        await pilot.pause()
        assert app.workspace_name == "fresh"
        assert WorkspaceManager().list() == ["fresh"]
        await pilot.press("ctrl+o", "escape")
        await pilot.pause()
        assert app.workspace_name == "fresh"


async def test_help_lists_the_dispatch_table_and_closes() -> None:
    from widgets.commands import COMMANDS

    app = AriesApp()
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/help", "enter")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        from io import StringIO

        from rich.console import Console

        console = Console(width=120, record=True, file=StringIO())
        console.print(app.screen.query_one("#help-commands", Static).content)
        text = " ".join(console.export_text().split())  # long usages wrap: compare words, not lines
        for command in COMMANDS:
            assert " ".join(command.usage.split()) in text and command.summary[:20] in text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


async def test_unknown_command_gets_a_helpful_error() -> None:
    app = AriesApp()
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await pilot.press(*"/hlep", "enter")
        note = await messages.notified(pilot, "Unknown command /hlep")
        assert "/help" in note


async def test_function_keys_focus_each_pane() -> None:
    app = AriesApp()
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        for key, pane in (("f2", "#transcript"), ("f3", "#context"), ("f4", "#approvals"), ("f5", "#artifacts")):
            await pilot.press(key)
            await pilot.pause()
            focused = app.focused
            assert focused is not None
            target = app.screen.query_one(pane)
            assert focused is target or target in focused.ancestors, (key, focused)
        await pilot.press("escape")
        assert app.focused is app.screen.query_one("#prompt")


async def test_artifact_add_from_the_prompt_updates_the_pane(tmp_path: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    (workspace.root / "note.txt").write_text("remember the milk\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("not for the workspace\n")
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        # Relative paths resolve against the workspace; a file outside the allowed roots is refused.
        await pilot.press(*f"/artifact add {outside}", "enter")
        await pilot.press(*"/artifact add note.txt shopping", "enter")
        pane = app.screen.query_one(ArtifactsPane)
        await until(pilot, lambda: pane.border_subtitle == "1 item", messages=messages)  # the call kept it
        assert app.workspace is not None
        [artifact] = app.workspace.artifacts.list()
        assert artifact.description == "shopping" and artifact.provenance["tool"] == "builtin:fs:add_artifact"
        tools = [e for e in app.session.conversation.read().entries if e["role"] == "tool"]  # type: ignore[union-attr]
        assert [e["status"] for e in tools] == ["fail", "success"]
        preview = str(app.screen.query_one("#artifact-preview").render())
        assert "remember the milk" in preview
        await pilot.press(*"/artifact add no/such/file", "enter")
        await messages.notified(pilot, "no such file")


async def test_ephemeral_session_leaves_nothing_behind(aries_home: Path) -> None:
    app = AriesApp()
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"temporary", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.workspace is not None
        root = app.workspace.root
        assert root.is_dir()
    assert not root.exists()
    assert not (aries_home / "workspaces").exists()


async def test_palette_offers_workspace_commands() -> None:
    from app.palette import AriesCommands as WorkspaceCommands

    WorkspaceManager().create("alpha")
    WorkspaceManager().create("beta")
    app = AriesApp("alpha")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.pause()
        provider = WorkspaceCommands(app.screen)
        texts = [text for text, _, _ in provider._commands()]
        assert "workspace: switch…" in texts and "workspace: open beta" in texts
        assert "workspace: open alpha" not in texts
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"open beta")
        await until(pilot, lambda: palette_offers(app, "workspace: open beta"), what="the palette's hit")
        await pilot.press("enter")
        await until(pilot, lambda: app.workspace_name == "beta", what="workspace beta")


async def test_a_new_conversation_or_another_workspace_leaves_no_streamed_answer_behind() -> None:
    """Streamed answers are blocks of their conversation: /new and a workspace switch take them away."""
    WorkspaceManager().create("other")
    app = AriesApp()
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        pane = app.screen.query_one(TranscriptPane)
        for leave in ("/new", "/workspace open other"):
            await pilot.press(*"hello", "enter")
            await until(pilot, lambda: len(pane.query("StreamingAnswer")) == 1, what="the streamed answer")
            await settle(pilot)
            await pilot.press(*leave, "enter")
            await until(pilot, lambda: not pane.query("TranscriptEntry, StreamingAnswer"), what=f"{leave}: empty")
            assert pane.border_subtitle == "new conversation"
            assert pane.query_one("#transcript-empty").display


async def test_new_conversation_and_resume_latest() -> None:
    workspace_with_transcript("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.pause()
        assert len(app.screen.query_one(TranscriptPane).entries()) == 4
        await pilot.press(*"/new", "enter", *"second", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert len(app.screen.query(TranscriptEntry)) == 1  # the message; its answer streamed in its own block
        assert len(app.screen.query("StreamingAnswer")) == 1
        assert app.workspace is not None and len(app.workspace.conversations()) == 2
    pane_app = AriesApp("demo")
    async with pane_app.run_test(size=SIZE) as pilot:
        await pane_app.ready()
        await pilot.pause()
        assert [w.entry["content"] for w in pane_app.screen.query(TranscriptEntry)][0] == "second"
        assert isinstance(pane_app.screen.query_one(TranscriptPane), TranscriptPane)


async def test_the_switcher_marks_a_workspace_that_waits_for_review(aries_home: Path) -> None:
    """Issue 31 item 7: Ctrl+O shows trust state — an imported workspace whose settings are quarantined
    says so in words, the operator's own do not."""
    from services.workspace.paths import QUARANTINE_DIR

    WorkspaceManager().create("mine")
    imported, _ = WorkspaceManager().create("shared")
    (imported.root / QUARANTINE_DIR).mkdir()
    app = AriesApp("mine")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert isinstance(app.screen, WorkspaceSwitcher)
        options = app.screen.query_one("#switcher-list")
        shown = {str(options.get_option_at_index(i).id): str(options.get_option_at_index(i).prompt) for i in range(2)}
        assert "untrusted: review with /trust" in shown["shared"]
        assert "review" not in shown["mine"]
