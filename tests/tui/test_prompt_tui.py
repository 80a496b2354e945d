"""The prompt people know: Up/Down walk this workspace's prompt history (stored in the workspace,
secrets redacted), the line being written comes back after the newest."""

from __future__ import annotations

from app.aries_app import AriesApp
from services.prompt_history import PromptHistory
from services.workspaces import WorkspaceManager
from tests.tui.helpers import Messages, until
from widgets.messages import WorkspaceChanged
from widgets.prompt.input import PromptInput

SIZE = (120, 36)


async def test_up_and_down_walk_the_workspace_history_and_keep_the_draft() -> None:
    workspace = WorkspaceManager().create("keys")[0]
    store = PromptHistory.for_workspace(workspace)
    for prompt in ["/rag last", "what changed yesterday?"]:
        store.record(prompt)
    workspace.close()
    app, messages = AriesApp("keys"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await messages.wait_for(pilot, WorkspaceChanged)
        prompt = app.screen.query_one(PromptInput)
        await messages.wait_for(pilot, PromptInput.HistoryLoaded)
        await pilot.press(*"draft")
        await pilot.press("up")
        assert prompt.value == "what changed yesterday?"
        await pilot.press("up")
        assert prompt.value == "/rag last"
        await pilot.press("up")  # the oldest: stays
        assert prompt.value == "/rag last"
        await pilot.press("down", "down")
        assert prompt.value == "draft"
        prompt.value = ""
        await pilot.press(*"/policy show", "enter")
        await until(pilot, lambda: store.prompts()[-1:] == ["/policy show"], messages=messages)
        await pilot.press("up")
        assert prompt.value == "/policy show"
    assert store.prompts() == ["/rag last", "what changed yesterday?", "/policy show"]


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
        await until(pilot, lambda: prompt.history == ["asked in one"], messages=messages)
        mark = messages.mark()
        assert await app.open_workspace("two")
        await messages.wait_for(pilot, PromptInput.HistoryLoaded, lambda m: m.prompts == ["asked in two"], since=mark)
        prompt.focus()
        await pilot.press("up")
        assert prompt.value == "asked in two"
