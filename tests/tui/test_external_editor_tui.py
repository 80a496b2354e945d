"""Ctrl+G writes the draft in the operator's editor (issue 34, item 2): ``$VISUAL``/``$EDITOR`` with its
arguments, run on a private file (0600, in a 0700 folder of its own) that is removed after; what it
saves comes back into the prompt (several lines: the multi-line editor); a non-zero exit keeps the
draft. The editors here are real programs: small Python scripts run as subprocesses."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from app.aries_app import AriesApp
from services.files.external_editor import NO_EDITOR, edit_text, editor_command
from tests.tui.helpers import Messages
from widgets.prompt.input import PromptInput

SIZE = (100, 30)
EDITOR = """\
import json, os, stat, sys
path = sys.argv[-1]
mode = lambda p: stat.S_IMODE(os.stat(p).st_mode)
seen = {"args": sys.argv[1:-1], "text": open(path, encoding="utf-8").read(), "path": path,
        "file_mode": mode(path), "dir_mode": mode(os.path.dirname(path))}
json.dump(seen, open(os.environ["EDITOR_LOG"], "w"))
if os.environ.get("EDITOR_FAIL"):
    open(path, "w").write("ruined")
    sys.exit(1)
open(path, "w", encoding="utf-8").write(os.environ["EDITOR_WRITES"] + "\\n")
"""


@pytest.fixture
def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$EDITOR``: a script taking an argument (as ``code --wait`` does); it logs what it saw."""
    script = tmp_path / "editor.py"
    script.write_text(EDITOR, encoding="utf-8")
    log = tmp_path / "editor.json"
    monkeypatch.setenv("EDITOR", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} --wait")
    monkeypatch.setenv("EDITOR_LOG", str(log))
    monkeypatch.delenv("VISUAL", raising=False)
    return log


async def test_ctrl_g_round_trip_through_the_editor(editor: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDITOR_WRITES", "a better question")
    app = AriesApp("edit")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        prompt = app.screen.query_one(PromptInput)
        prompt.focus()
        await pilot.press(*"a draft", "ctrl+g")
        await pilot.pause()
        assert prompt.value == "a better question" and prompt.display and app.screen.focused is prompt
        seen = json.loads(editor.read_text())
        assert seen["args"] == ["--wait"] and seen["text"] == "a draft"
        assert seen["file_mode"] == 0o600 and seen["dir_mode"] == 0o700
        assert not Path(seen["path"]).parent.exists()  # removed after


async def test_several_lines_come_back_in_the_multi_line_editor(editor: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDITOR_WRITES", "first line\n  second, indented")
    app = AriesApp("edit")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        app.screen.query_one(PromptInput).focus()
        await pilot.press(*"short", "ctrl+g")
        await pilot.pause()
        multi = app.screen.query_one("#prompt-editor")
        assert multi.text == "first line\n  second, indented" and app.screen.focused is multi  # type: ignore[attr-defined]
        monkeypatch.setenv("EDITOR_WRITES", "one line again")
        await pilot.press("ctrl+g")  # from the multi-line editor: its text goes to the editor
        await pilot.pause()
        assert json.loads(editor.read_text())["text"] == "first line\n  second, indented"
        assert app.screen.query_one(PromptInput).value == "one line again"


async def test_an_editor_that_exits_non_zero_keeps_the_draft(editor: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDITOR_FAIL", "1")
    app, messages = AriesApp("edit"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        prompt = app.screen.query_one(PromptInput)
        prompt.focus()
        await pilot.press(*"keep me", "ctrl+g")
        note = await messages.notified(pilot, "exited with 1")
        assert prompt.value == "keep me" and "kept" in note
        assert not Path(json.loads(editor.read_text())["path"]).parent.exists()


async def test_no_editor_set_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    app, messages = AriesApp("edit"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        app.screen.query_one(PromptInput).focus()
        await pilot.press(*"draft", "ctrl+g")
        await messages.notified(pilot, "Set $VISUAL or $EDITOR")
        assert app.screen.query_one(PromptInput).value == "draft"


def test_visual_comes_first_and_bad_commands_are_one_line(tmp_path: Path) -> None:
    assert editor_command({"VISUAL": "code --wait", "EDITOR": "vi"}) == ["code", "--wait"]
    assert editor_command({"EDITOR": "'my editor' -n"}) == ["my editor", "-n"]
    assert edit_text("x", {}).problem == NO_EDITOR
    assert "does not read as a command" in edit_text("x", {"EDITOR": "vi 'open"}).problem
    missing = edit_text("x", {"EDITOR": str(tmp_path / "no-such-editor")})
    assert missing.text is None and "Cannot run your editor" in missing.problem
