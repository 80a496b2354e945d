"""Workspace commands (``/NAME`` from ``commands/NAME.md``) and ``/instructions`` in the TUI: completion,
help, a command's turn reaching a scripted model server, built-ins winning, an untrusted import's
commands absent. Pilot tests, then snapshots (baselines in snapshots/test_project_tui/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from tests.models.servers import Reply, ScriptedServer
from tests.tui.helpers import Messages, panes_show, settle, until
from widgets.prompt.input import PromptInput

SIZE = (120, 36)
REVIEW = "---\ndescription: Review a file for bugs\narguments: [FILE, FOCUS?]\ntools: [fs]\n---\n"
REVIEW += "Review $1 for bugs, $2 first.\n"
AGENTS = "Answer in three words.\nThe project is called Quokka.\n"


def _workspace(name: str = "demo") -> Path:
    workspace = WorkspaceManager().create(name)[0]
    (workspace.root / "commands").mkdir()
    (workspace.root / "commands/review.md").write_text(REVIEW, encoding="utf-8")
    (workspace.root / "commands/help.md").write_text("Pretend to be the help.\n", encoding="utf-8")
    (workspace.root / "AGENTS.md").write_text(AGENTS, encoding="utf-8")
    workspace.close()
    return workspace.root


def _notices(app: AriesApp, title: str) -> list[str]:
    assert app.session is not None
    return [str(e.get("content")) for e in app.session.conversation.read().entries if e.get("title") == title]


async def test_a_workspace_command_completes_runs_and_reaches_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    _workspace()
    server = ScriptedServer("ollama").start()
    monkeypatch.setenv("ARIES_MODEL", "ollama:llama3.2:3b")
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    server.add(Reply("Three word answer."))
    try:
        app, messages = AriesApp("demo"), Messages()
        async with app.run_test(size=SIZE, message_hook=messages) as pilot:
            await app.ready()
            await panes_show(pilot)
            prompt = app.screen.query_one(PromptInput)
            prompt.focus()
            await pilot.press(*"/rev", "tab")
            assert prompt.value == "/review "
            await pilot.press(*"a.py loop", "enter")
            await until(pilot, lambda: server.chat_requests(), messages=messages, what="the request")
            await settle(pilot)
            messages_sent = server.chat_requests()[0]["messages"]
            system = messages_sent[0]["content"]
            assert messages_sent[0]["role"] == "system" and "The project is called Quokka." in system
            assert messages_sent[-1]["content"] == "Review a.py for bugs, loop first."
            tools = [t["function"]["name"] for t in server.chat_requests()[0].get("tools") or []]
            assert tools and all("fs" in name for name in tools), tools
            # /help is the built-in's: the workspace's help.md never runs
            await pilot.press(*"/help", "enter")
            await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen", what="the help screen")
            rows = "\n".join(spec.usage for spec in app.screen.specs)  # type: ignore[attr-defined]
            assert "/review FILE [FOCUS]" in rows and rows.count("/help") == 1
            await pilot.press("escape")
            assert len(server.chat_requests()) == 1
    finally:
        server.stop()


async def test_instructions_show_agents_md_the_commands_and_what_is_shadowed() -> None:
    _workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await panes_show(pilot)
        app.screen.query_one(PromptInput).focus()
        await pilot.press(*"/instructions", "enter")
        await until(pilot, lambda: _notices(app, "instructions"), what="the /instructions notice")
        text = _notices(app, "instructions")[0]
        assert "The project is called Quokka." in text and "AGENTS.md of workspace demo (52 characters)" in text
        assert "/review FILE [FOCUS] — Review a file for bugs" in text
        assert "commands/help.md: /help is a built-in command" in text


async def test_an_untrusted_import_has_no_commands_and_no_instructions(tmp_path: Path) -> None:
    from services.bundles.export import export_workspace
    from services.bundles.importer import import_bundle
    from services.workspace.manager import Workspace

    root = _workspace("src")
    bundle = tmp_path / "src.aries.tar.zst"
    export_workspace(Workspace(root, "src"), bundle, aries_version="test")
    import_bundle(bundle, WorkspaceManager(), name="victim")
    app = AriesApp("victim")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await panes_show(pilot)
        names = [spec.name for spec in app.commands.registry.specs()]
        assert "review" not in names
        app.screen.query_one(PromptInput).focus()
        await pilot.press(*"/instructions", "enter")
        await until(pilot, lambda: _notices(app, "instructions"), what="the /instructions notice")
        assert "the imported AGENTS.md waits for your review (/trust)" in _notices(app, "instructions")[0]


# -- snapshots -------------------------------------------------------------------------------------
def test_workspace_command_completion_snapshot(snap_compare) -> None:
    """You should see the prompt holding "/re" and, above it, the Tab hint listing the commands that
    start so: "Tab: replay  resume  review" — review being the workspace's own command."""
    _workspace()

    async def run_before(pilot: Pilot[int]) -> None:
        await pilot.app.ready()  # type: ignore[attr-defined]
        await settle(pilot)
        pilot.app.screen.query_one(PromptInput).focus()
        await pilot.press(*"/re", "tab")
        await settle(pilot)

    assert snap_compare(AriesApp("demo"), terminal_size=(100, 30), run_before=run_before)


def test_instructions_snapshot(snap_compare, monkeypatch: pytest.MonkeyPatch) -> None:
    """You should see, in the transcript, the /instructions notice: "Project instructions from
    AGENTS.md of workspace demo (52 characters), in the system prompt of every turn (/usage counts them):", the
    two lines of AGENTS.md, then "Workspace commands …" with "/review FILE [FOCUS] — Review a file for
    bugs" and the line saying commands/help.md is a built-in's name and never runs (time frozen, the
    conversation of a fixed id)."""
    from services.workspace.transcripts import Transcript
    from tests.tui.fixtures import CONVERSATION

    monkeypatch.setenv("ARIES_FROZEN_TIME", "1")
    root = _workspace()
    Transcript(root / "transcripts", CONVERSATION).append(
        "notice", "Workspace demo opened.", timestamp="2026-01-01T09:00:00.000Z"
    )

    async def run_before(pilot: Pilot[int]) -> None:
        await pilot.app.ready()  # type: ignore[attr-defined]
        await settle(pilot)
        pilot.app.screen.query_one(PromptInput).focus()
        await pilot.press(*"/instructions", "enter")
        await until(pilot, lambda: _notices(pilot.app, "instructions"), what="the notice")  # type: ignore[arg-type]
        await settle(pilot)

    assert snap_compare(AriesApp("demo"), terminal_size=(100, 30), run_before=run_before)
