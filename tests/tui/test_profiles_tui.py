"""Profiles in the TUI, as a new user would try them: ``/profile list``, ``/profile use auditor``, ask
a question, get schema-valid JSON with citations (offline, no model); switching operator →
researcher refuses the next model-proposed write (scripted Ollama server); ``/profile show`` opens
the YAML viewer; the header names the profile."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from screens.profile_viewer import ProfileViewer
from services.audit.log import AuditStore
from services.profiles import load_profile
from services.workspace.manager import Workspace, WorkspaceManager
from tests.models.servers import Call, Reply, ScriptedServer
from tests.tui.helpers import command as typed
from tests.tui.helpers import palette_offers, settle, until
from widgets.transcript.pane import TranscriptPane

SIZE = (160, 48)
QUESTION = "how are tool calls approved?"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    workspace, _ = WorkspaceManager().create("demo")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "approvals.md").write_text(
        "# Approvals\n\nEvery tool call passes the policy gateway; writes wait for the operator.\n"
    )
    from services.retrieval import RetrievalEngine

    with RetrievalEngine(workspace) as engine:
        engine.index_add(str(docs), "docs")
    return workspace


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    server = ScriptedServer("ollama").start()
    monkeypatch.setenv("ARIES_MODEL", "ollama:llama3.2:3b")
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    yield server
    server.stop()


def entries(app: AriesApp) -> list[dict[str, Any]]:
    assert app.session is not None
    return app.session.conversation.read().entries


async def command(pilot: Pilot[int], line: str) -> None:
    await typed(pilot, line)
    await pilot.pause()


async def test_list_use_auditor_ask_and_get_schema_valid_json_with_citations(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARIES_MODEL", raising=False)
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        assert "profile default" in app.header_text()
        await command(pilot, "/profile list")
        listing = entries(app)[-1]["content"]
        assert "* default" in listing and "auditor" in listing and "Read-only review" in listing
        await command(pilot, "/profile use auditor")
        assert "profile auditor" in app.header_text() and "profile auditor" in str(app.sub_title)
        assert "Profile is now auditor" in entries(app)[-1]["content"]
        await settle(pilot)
        shown = app.screen.query_one(TranscriptPane).entries()
        assert sum("Profile is now auditor" in str(e.get("content")) for e in shown) == 1  # once, not twice
        await pilot.press(*QUESTION, "enter")
        await until(pilot, lambda: not app.commands.assistant.running and entries(app)[-1]["role"] == "assistant")
        recorded = entries(app)
    answer = recorded[-1]
    from jsonschema import validate

    value = json.loads(answer["content"])
    schema = load_profile("auditor").output_schema
    assert schema is not None
    validate(value, schema)
    cited = [c for finding in value["findings"] for c in finding["citations"]]
    assert cited and all(c.startswith("docs:") for c in cited) and answer["citations"] == cited
    assert not [e for e in recorded if e.get("title") == "output schema"]  # valid the first time
    assert WorkspaceManager().open("demo")[0].profile == "auditor"


async def test_switching_to_researcher_refuses_the_next_model_write(
    server: ScriptedServer, workspace: Workspace
) -> None:
    write = "builtin__fs__write_text"
    server.add(
        Reply(tool_calls=[Call(write, {"path": "one.txt", "text": "1\n"})]),
        Reply(text="Written."),
        Reply(tool_calls=[Call(write, {"path": "two.txt", "text": "2\n"})]),
        Reply(text="I may not write under this profile."),
    )
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await command(pilot, "/profile use operator")
        await pilot.press(*"write one", "enter")
        await until(pilot, lambda: app.session is not None and len(app.session.approvals) == 1)
        await pilot.press("f4", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.press("a")
        await until(pilot, lambda: not app.commands.assistant.running)
        assert (workspace.root / "one.txt").read_text() == "1\n"
        await command(pilot, "/profile use researcher")
        assert "profile researcher" in app.header_text()
        await pilot.press(*"write two", "enter")
        await until(pilot, lambda: not app.commands.assistant.running and entries(app)[-1]["role"] == "assistant")
        recorded = entries(app)
    assert not (workspace.root / "two.txt").exists()
    refused = [e for e in recorded if e["role"] == "tool"][-1]
    assert refused["status"] == "fail" and refused["output"]["error"]["type"] == "PolicyDenied"
    assert "researcher" in refused["output"]["error"]["message"]
    with AuditStore.for_workspace(workspace.root) as store:
        row = store.get_call(refused["call_id"])
    assert row is not None and row["status"] == "denied" and row["rule_id"] == "profile.researcher"


async def test_profile_show_opens_the_yaml_and_a_bad_name_is_one_line(workspace: Workspace) -> None:
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await command(pilot, "/profile show researcher")
        assert isinstance(app.screen, ProfileViewer) and "name: researcher" in app.screen.text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ProfileViewer)
        await command(pilot, "/profile use nope")
        assert app.session is not None and app.session.profile_name == "default"
        assert "profile default" in app.header_text()


async def test_the_palette_picks_a_profile(workspace: Workspace) -> None:
    from textual.command import CommandPalette

    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"profile: use researcher")
        await until(pilot, lambda: palette_offers(app, "profile: use researcher"), what="the palette's hit")
        await pilot.press("enter")
        await until(pilot, lambda: app.session is not None and app.session.profile_name == "researcher")
        assert "profile researcher" in app.header_text()


async def test_a_broken_workspace_profile_is_reported_at_start(workspace: Workspace) -> None:
    own = workspace.root / "profiles"
    own.mkdir()
    (own / "mine.yaml").write_text("name: mine\ntools:\n  enable: [fs, teleport]\n", encoding="utf-8")
    workspace.update(profile="mine")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await until(pilot, lambda: "profile mine (broken)" in str(app.sub_title))
        notice = next(e for e in entries(app) if e.get("title") == "profile")
        assert notice["level"] == "error" and "mine.yaml:3: tools.enable.1" in notice["content"]
        await command(pilot, "/profile list")
        assert "BROKEN" in entries(app)[-1]["content"]
        await command(pilot, "/profile use researcher")
        assert "profile researcher" in str(app.sub_title) and "broken" not in str(app.sub_title)


def test_snapshot_profile_show(snap_compare: Any, workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """You should see the profile viewer over the main screen: "Profile auditor  shipped · profiles/auditor.yaml",
    then the auditor's YAML with line numbers and syntax colours (comments, keys, the output_schema)."""
    monkeypatch.setenv("ARIES_FROZEN_TIME", "1")

    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, AriesApp)
        await app.ready()
        await pilot.pause()
        app.commands.profiles.show("auditor")
        await until(pilot, lambda: isinstance(app.screen, ProfileViewer), what="the profile viewer")

    assert snap_compare(AriesApp("demo"), terminal_size=(120, 40), run_before=run_before)
