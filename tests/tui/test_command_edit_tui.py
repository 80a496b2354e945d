"""``/instructions edit NAME`` (issue 31 item 6, issue 34 item 2): a workspace command in the operator's
editor (a real subprocess: a shell script as $EDITOR), checked, written through
``services.trust.edits.write_command`` and in force at once; a bad file refused in one line with the
draft kept; a failing editor changes nothing; a trusted import stays trusted; an untrusted or changed
one is refused."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from app.aries_app import AriesApp
from services.bundles.export import export_workspace
from services.bundles.importer import import_bundle
from services.trust.records import trust, workspace_trust
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import Messages, settle
from widgets.prompt.input import PromptInput

SIZE = (120, 36)
REVIEW = "---\ndescription: Review a file for bugs\narguments: [FILE]\n---\nReview $1 for bugs.\n"
TYPOS = REVIEW.replace("bugs", "typos")


def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """$EDITOR: a script that keeps a copy of what it was given (``seen``), then runs ``body`` on it."""
    script = tmp_path / "editor.sh"
    script.write_text(f'#!/bin/sh\ncp "$1" "{tmp_path}/seen"\n{body}\n', encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EDITOR", str(script))
    monkeypatch.delenv("VISUAL", raising=False)
    return tmp_path / "seen"


def writes(tmp_path: Path, text: str) -> str:
    """An editor body that saves ``text`` (kept in a file beside the script)."""
    (tmp_path / "new").write_text(text, encoding="utf-8")
    return f'cp "{tmp_path}/new" "$1"'


async def command(pilot: Pilot[Any], app: AriesApp, line: str) -> None:
    prompt = app.screen.query_one(PromptInput)
    prompt.focus()
    prompt.value = line
    await pilot.press("enter")
    await settle(pilot)


def _names(app: AriesApp) -> dict[str, str]:
    assert app.session is not None
    return {c.name: c.description for c in app.session.in_force.commands}


async def test_edit_an_existing_command_and_make_a_new_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = WorkspaceManager().create("demo")[0]
    (workspace.root / "commands").mkdir()
    (workspace.root / "commands/review.md").write_text(REVIEW, encoding="utf-8")
    workspace.close()
    seen = editor(tmp_path, monkeypatch, writes(tmp_path, TYPOS))
    app, heard = AriesApp("demo"), Messages()
    async with app.run_test(size=SIZE, message_hook=heard) as pilot:
        await app.ready()
        prompt = app.screen.query_one(PromptInput)
        prompt.focus()
        await pilot.press(*"/instructions edit re", "tab")
        assert prompt.value == "/instructions edit review "  # completion offers the workspace's commands
        await command(pilot, app, "/instructions edit review")
        assert seen.read_text(encoding="utf-8") == REVIEW  # the editor was given the file as it is
        assert (workspace.root / "commands/review.md").read_text(encoding="utf-8") == TYPOS
        assert _names(app)["review"] == "Review a file for typos"  # in force at once
        assert any("commands/review.md saved: /review is in force." in n for n in heard.notes())
        # a new command: the template (front matter and body), saved as the operator wrote it
        (tmp_path / "new").write_text("---\ndescription: Say hi\n---\nSay hi to $1.\n", encoding="utf-8")
        await command(pilot, app, "/instructions edit hello")
        template = seen.read_text(encoding="utf-8")
        assert template.startswith("---\nformat_version: 1\ndescription: What /hello does")
        assert _names(app)["hello"] == "Say hi"
        assert "hello" in app.commands.registry.entries  # /hello is a command at once
        assert heard.notes(severity="error") == []


async def test_a_bad_file_is_refused_and_its_draft_kept_a_failing_editor_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    WorkspaceManager().create("demo")[0].close()
    bad = "---\nnope: 1\n---\nhi\n"
    seen = editor(tmp_path, monkeypatch, writes(tmp_path, bad))
    app, heard = AriesApp("demo"), Messages()
    async with app.run_test(size=SIZE, message_hook=heard) as pilot:
        await app.ready()
        assert app.session is not None
        path = app.session.workspace.root / "commands/fresh.md"
        await command(pilot, app, "/instructions edit fresh")
        errors = heard.notes(severity="error")
        assert len(errors) == 1 and "\n" not in errors[0] and "unknown field" in errors[0]
        assert "your draft is kept: /instructions edit fresh reopens it" in errors[0]
        assert not path.exists() and "fresh" not in _names(app)
        await command(pilot, app, "/instructions edit fresh")  # the draft is what the editor gets back
        assert seen.read_text(encoding="utf-8") == bad
        editor(tmp_path, monkeypatch, writes(tmp_path, "Fresh: $ARGUMENTS\n") + "\nexit 3")
        await command(pilot, app, "/instructions edit fresh")
        assert not path.exists() and "fresh" not in _names(app)
        errors = heard.notes(severity="error")
        assert len(errors) == 3 and "Nothing changed." in errors[-1] and "\n" not in errors[-1]
        editor(tmp_path, monkeypatch, writes(tmp_path, "Fresh: $ARGUMENTS\n"))
        await command(pilot, app, "/instructions edit fresh")  # still the kept draft; now a good file
        assert seen.read_text(encoding="utf-8") == bad
        assert path.read_text(encoding="utf-8") == "Fresh: $ARGUMENTS\n" and "fresh" in _names(app)
        await command(pilot, app, "/instructions edit help")
        assert "/help is a built-in command" in heard.notes(severity="error")[-1]


def _import(tmp_path: Path) -> Path:
    source = WorkspaceManager(tmp_path / "elsewhere" / "workspaces")
    workspace, _ = source.create("src")
    (workspace.root / "commands").mkdir()
    (workspace.root / "commands/review.md").write_text(REVIEW, encoding="utf-8")
    bundle = tmp_path / "src.tar.zst"
    export_workspace(workspace, bundle, aries_version="test")
    import_bundle(bundle, WorkspaceManager(), name="victim")
    return WorkspaceManager().path_for("victim")


async def test_an_edit_through_aries_keeps_a_trusted_import_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _import(tmp_path)
    editor(tmp_path, monkeypatch, writes(tmp_path, TYPOS))
    app, heard = AriesApp("victim"), Messages()
    async with app.run_test(size=SIZE, message_hook=heard) as pilot:
        await app.ready()
        await command(pilot, app, "/instructions edit review")  # untrusted: refused, nothing written
        errors = heard.notes(severity="error")
        assert len(errors) == 1 and "while the workspace is untrusted: /trust first" in errors[0]
        assert not (root / "commands").exists()
    trust(root)
    app, heard = AriesApp("victim"), Messages()
    async with app.run_test(size=SIZE, message_hook=heard) as pilot:
        await app.ready()
        await command(pilot, app, "/instructions edit review")
        assert (root / "commands/review.md").read_text(encoding="utf-8") == TYPOS
        assert workspace_trust(root).status == "trusted"  # the operator's own edit
        assert _names(app)["review"] == "Review a file for typos"
        (root / "commands/review.md").write_text(REVIEW, encoding="utf-8")  # the same kind of edit, outside
        assert workspace_trust(root).status == "changed"
        await command(pilot, app, "/instructions edit review")
        errors = heard.notes(severity="error")
        assert len(errors) == 1 and "while the workspace is changed since trusted: /trust first" in errors[0]
        assert (root / "commands/review.md").read_text(encoding="utf-8") == REVIEW
