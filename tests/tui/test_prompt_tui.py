"""The prompt people know: Up/Down walk this workspace's prompt history (stored in the workspace,
secrets redacted), the line being written comes back after the newest."""

from __future__ import annotations

import json

import pytest
from textual import events
from textual.pilot import Pilot
from textual.widgets import Input

from app.aries_app import AriesApp
from services.history_search.prompt_history import PromptHistory
from services.workspace.manager import WorkspaceManager
from tests.models.servers import Reply, ScriptedServer
from tests.tui.helpers import Messages, panes_show, settle, until
from widgets.messages import TurnEvent
from widgets.prompt.editor import PromptEditor
from widgets.prompt.input import PromptInput

SIZE = (120, 36)


async def test_up_and_down_walk_the_workspace_history_and_keep_the_draft() -> None:
    workspace = WorkspaceManager().create("keys")[0]
    store = PromptHistory.for_workspace(workspace)
    for prompt in ["line one\nline two", "/rag last", "what changed yesterday?"]:
        store.record(prompt)
    workspace.close()
    app, messages = AriesApp("keys"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        prompt = app.screen.query_one(PromptInput)
        await pilot.press(*"draft")  # the first key reads the history
        await messages.wait_for(pilot, PromptInput.HistoryLoaded)
        await pilot.press("up")
        assert prompt.value == "what changed yesterday?"
        await pilot.press("up")
        assert prompt.value == "/rag last"
        await pilot.press("up")  # a multi-line prompt comes back as a chip, sent whole
        assert prompt.value == "[2 lines: line one…]" and prompt.expanded() == "line one\nline two"
        await pilot.press("up")  # the oldest: stays
        assert prompt.value == "[2 lines: line one…]"
        await pilot.press("down")
        assert prompt.value == "/rag last"
        await pilot.press("down", "down")
        assert prompt.value == "draft"
        prompt.value = ""
        await pilot.press(*"/policy show", "enter")
        await until(pilot, lambda: store.prompts()[-1:] == ["/policy show"], messages=messages)
        await pilot.press("up")
        assert prompt.value == "/policy show"
    assert store.prompts() == ["line one\nline two", "/rag last", "what changed yesterday?", "/policy show"]


async def test_each_workspace_has_its_own_history() -> None:
    manager = WorkspaceManager()
    for name, prompt in [("one", "asked in one"), ("two", "asked in two")]:
        workspace = manager.create(name)[0]
        PromptHistory.for_workspace(workspace).record(prompt)
        workspace.close()
    app, messages = AriesApp("one"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        prompt = app.screen.query_one(PromptInput)
        prompt.focus()
        await pilot.press("up")
        await until(pilot, lambda: prompt.value == "asked in one", messages=messages)
        prompt.value = ""
        assert await app.open_workspace("two")
        prompt.focus()
        await pilot.press("up")  # pressed before workspace two's history was read: done when it arrives
        await until(pilot, lambda: prompt.value == "asked in two", messages=messages)
        assert prompt.history == ["asked in two"]


async def test_an_idle_workbench_reads_no_history_and_the_first_up_recalls_the_newest() -> None:
    """The history's parser (pydantic) is not paid for by a workbench nobody has typed in yet."""
    workspace = WorkspaceManager().create("idle")[0]
    PromptHistory.for_workspace(workspace).record("the newest question")
    workspace.close()
    app, messages = AriesApp("idle"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await app.settled.wait()
        await settle(pilot)
        assert not messages.of(PromptInput.HistoryLoaded)
        prompt = app.screen.query_one(PromptInput)
        prompt.focus()
        await pilot.press("up")
        await until(pilot, lambda: prompt.value == "the newest question", messages=messages)


async def test_ctrl_j_writes_a_three_line_prompt_and_enter_sends_it_whole() -> None:
    app, messages = AriesApp("multi"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        prompt = app.screen.query_one(PromptInput)
        prompt.focus()
        await pilot.press(*"line one", "ctrl+j")
        await until(pilot, lambda: bool(app.screen.query(PromptEditor)), messages=messages)  # mounted on first use
        editor = app.screen.query_one(PromptEditor)
        await until(pilot, lambda: editor.has_focus, messages=messages)
        assert editor.is_open and not prompt.display
        await pilot.press(*"line two", "ctrl+j", *"line three")
        assert editor.text == "line one\nline two\nline three"
        mark = messages.mark()
        await pilot.press("enter")
        sent = await messages.wait_for(pilot, Input.Submitted, since=mark)
        assert sent.value == "line one\nline two\nline three"
        assert not editor.is_open and prompt.display and prompt.has_focus and prompt.value == ""
        assert app.session is not None
        conversation = app.session.conversation  # the App got it (not only the screen): a turn ran
        await until(pilot, lambda: len(conversation.read().entries) >= 2, messages=messages)
        assert conversation.read().entries[0]["content"] == "line one\nline two\nline three"


async def test_keys_typed_fast_around_ctrl_j_keep_their_order() -> None:
    """Under tmux a burst of keys arrives at once: the ones after Ctrl+J reach the prompt before the
    editor has the focus, and must land in the editor, in order, newlines included."""
    app, messages = AriesApp("fast"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        prompt = app.screen.query_one(PromptInput)
        assert not app.screen.query(PromptEditor)  # not mounted at start-up (TextArea stays out of it)
        prompt.focus()
        await pilot.pause()
        for key, character in [("a", "a"), ("ctrl+j", None), ("b", "b"), ("ctrl+j", None), ("c", "c")]:
            prompt.post_message(events.Key(key, character))  # all queued before any is handled
        await until(pilot, lambda: bool(app.screen.query(PromptEditor)), messages=messages)
        editor = app.screen.query_one(PromptEditor)
        await until(pilot, lambda: editor.text == "a\nb\nc", messages=messages)
        assert editor.has_focus and prompt.value == "a"


async def test_a_long_paste_is_a_chip_and_the_full_text_is_sent() -> None:
    pasted = "\n".join(f"row {n}" for n in range(1, 43))
    app, messages = AriesApp("paste"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        prompt = app.screen.query_one(PromptInput)
        prompt.focus()
        await pilot.press(*"look at this: ")
        prompt.post_message(events.Paste(pasted))
        await until(pilot, lambda: "[pasted" in prompt.value, messages=messages)
        assert prompt.value == "look at this: [pasted 42 lines #1]"
        mark = messages.mark()
        await pilot.press("enter")
        sent = await messages.wait_for(pilot, Input.Submitted, since=mark)
        assert sent.value == f"look at this: {pasted}"


async def test_a_chip_expands_into_the_editor_and_a_short_multiline_paste_opens_it() -> None:
    app, messages = AriesApp("paste"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        prompt = app.screen.query_one(PromptInput)
        prompt.focus()
        prompt.post_message(events.Paste("x" * 1500))
        await until(pilot, lambda: "[pasted" in prompt.value, messages=messages)
        assert prompt.value == "[pasted 1,500 characters #1]"
        await pilot.press("ctrl+j")
        await until(pilot, lambda: bool(app.screen.query(PromptEditor)), messages=messages)
        editor = app.screen.query_one(PromptEditor)
        await until(pilot, lambda: editor.is_open, messages=messages)
        assert editor.text == "x" * 1500 + "\n"
        await pilot.press("ctrl+a")  # the whole text selected, then replaced by a short paste
        editor.text = ""
        await pilot.press("escape")
        await until(pilot, lambda: prompt.has_focus, messages=messages)
        prompt.post_message(events.Paste("first\nsecond\nthird"))
        await until(pilot, lambda: editor.is_open, messages=messages)
        assert editor.text == "first\nsecond\nthird"


async def test_at_path_completes_and_attaches_the_file_for_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tab completes ``@REA`` to a file under the roots; the file is read through the gateway (its
    call in the transcript) and the model is sent its text."""
    workspace = WorkspaceManager().create("attach")[0]
    (workspace.root / "README.md").write_text("# Demo\n\nAries reads this.\n", encoding="utf-8")
    workspace.close()
    server = ScriptedServer("ollama").start()
    monkeypatch.setenv("ARIES_MODEL", "ollama:llama3.2:3b")
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    server.add(Reply("It is a demo."))
    try:
        app, messages = AriesApp("attach"), Messages()
        async with app.run_test(size=SIZE, message_hook=messages) as pilot:
            await app.ready()
            await panes_show(pilot)
            messages.listen(app)  # the turn signal's events
            prompt = app.screen.query_one(PromptInput)
            prompt.focus()
            await pilot.press(*"what is @REA", "tab")
            assert prompt.value == "what is @README.md "
            mark = messages.mark()
            await pilot.press("enter")
            await messages.notified(pilot, "@README.md: attached (26 bytes)", since=mark)
            assert app.session is not None
            conversation = app.session.conversation
            await until(pilot, lambda: "It is a demo." in str(conversation.read().entries[-1:]), messages=messages)
            await settle(pilot)
            roles = [(e["role"], e.get("tool_name")) for e in conversation.read().entries]
            assert ("tool", "builtin:fs:read_text") in roles
            from widgets.transcript.pane import TranscriptEntry

            shown = [str(w.render()) for w in app.screen.query(TranscriptEntry) if w.entry["role"] == "user"]
            assert shown and shown[-1].endswith("what is @README.md\n\n[attached README.md · 26 characters]")
            from services.assistant.events import Retrieved

            searched = [m.event.query for m in messages.of(TurnEvent) if isinstance(m.event, Retrieved)]
            assert set(searched) == {"what is @README.md"}  # retrieval searched what was typed, not the file
        user = [m for m in server.chat_requests()[-1]["messages"] if m["role"] == "user"][-1]["content"]
        assert "<<<untrusted attached file README.md>>>\n# Demo\n\nAries reads this.\n" in user
    finally:
        server.stop()


async def test_an_attached_files_text_is_stored_once_and_sent_once_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The file's text is in the transcript once (the message that attached it; the read's tool entry says
    where it is instead of a second copy); this turn's request and the next turn's (its history) each carry
    it once, and the tool block in the transcript says where it is."""
    marker = "A-LINE-ONLY-THE-FILE-HAS"
    workspace = WorkspaceManager().create("once")[0]
    (workspace.root / "notes.md").write_text(f"# Notes\n{marker}\n", encoding="utf-8")
    workspace.close()
    server = ScriptedServer("ollama").start()
    monkeypatch.setenv("ARIES_MODEL", "ollama:llama3.2:3b")
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    server.add(Reply("Noted."), Reply("Still noted."))
    try:
        app, messages = AriesApp("once"), Messages()
        async with app.run_test(size=SIZE, message_hook=messages) as pilot:
            await app.ready()
            await panes_show(pilot)
            for number, line in enumerate(["read @notes.md", "and again?"], start=1):
                app.screen.query_one(PromptInput).value = line
                await pilot.press("enter")
                await until(pilot, lambda n=number: len(server.chat_requests()) >= n, messages=messages)
                await settle(pilot)
            assert app.session is not None
            path = app.session.conversation.transcript.path
            await until(pilot, lambda: path.read_text(encoding="utf-8").count("Still noted.") == 1, messages=messages)
            assert path.read_text(encoding="utf-8").count(marker) == 1  # stored once
            from widgets.transcript.tool_call import ToolCallBlock

            [block] = app.screen.query(ToolCallBlock)
            body = str(block.query_one(".tool-body").render())
            assert "stored once, in the message that attached it" in body
        sent = [json.dumps(request["messages"]).count(marker) for request in server.chat_requests()]
        assert sent == [1, 1]  # this turn's message; the next turn's history
    finally:
        server.stop()


async def test_tab_completes_an_at_path_in_the_multi_line_editor() -> None:
    """In the Ctrl+J editor, Tab completes the ``@path`` before the cursor (as the one-line prompt
    does), on the second line too; two candidates: the first, then Tab again the next; plain text:
    Tab moves the focus on."""
    workspace = WorkspaceManager().create("attach")[0]
    (workspace.root / "README.md").write_text("# Demo\n", encoding="utf-8")
    (workspace.root / "notes-a.txt").write_text("a\n", encoding="utf-8")
    (workspace.root / "notes-b.txt").write_text("b\n", encoding="utf-8")
    workspace.close()
    app = AriesApp("attach")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await panes_show(pilot)
        prompt = app.screen.query_one(PromptInput)
        prompt.focus()
        await pilot.press(*"@notes", "tab", "tab", "tab")  # the one-line prompt cycles past "notes-a.txt " too
        assert prompt.value == "@notes-b.txt "
        prompt.value = ""
        await pilot.press(*"first line", "ctrl+j")
        editor = await until_editor(app, pilot)
        await pilot.press(*"read @REA", "tab")
        assert editor.text == "first line\nread @README.md "
        await pilot.press(*"and @notes", "tab")
        assert editor.text == "first line\nread @README.md and @notes-"  # the common prefix first
        await pilot.press("tab")
        assert editor.text.endswith("and @notes-a.txt ")
        await pilot.press("tab")
        assert editor.text.endswith("and @notes-b.txt ")
        await pilot.press(*"done", "tab")  # no @ before the cursor: the focus moves on
        assert app.screen.focused is not editor and editor.text.endswith("@notes-b.txt done")


async def until_editor(app: AriesApp, pilot: Pilot[None]) -> PromptEditor:
    def focused() -> bool:
        return bool(app.screen.query(PromptEditor)) and app.screen.focused is app.screen.query_one(PromptEditor)

    await until(pilot, focused, what="the multi-line editor")
    return app.screen.query_one(PromptEditor)
