"""``aries tool undo [CALL_ID]`` and the CLI's calls in the transcript (issue 15, items 3 and 5):
the shipped policy, a real workspace, the real audit store and transcript."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import tool as cli_tool
from app.commands.tools import explain_decision
from services.conversation import Conversation
from services.session.session import Session
from services.workspace.manager import Workspace, WorkspaceManager

pytestmark = pytest.mark.timeout(60)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    parser = argparse.ArgumentParser(prog="aries")
    parser.add_argument("-w", "--workspace")
    cli_tool.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


@pytest.fixture
def workspace(aries_home: Path) -> Workspace:
    workspace, _ = WorkspaceManager().create("undo")
    (workspace.root / "notes.md").write_text("original\n")
    return workspace


def _write(text: str, capsys: pytest.CaptureFixture[str]) -> str:
    payload = json.dumps({"path": "notes.md", "text": text})
    code, out, err = _run(
        ["-w", "undo", "tool", "call", "builtin:fs:write_text", "--args", payload, "--approve"], capsys
    )
    assert code == 0, err
    return str(out["meta"]["call_id"])


def test_tool_undo_restores_through_the_gateway_with_approval(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    call_id = _write("changed\n", capsys)
    code, out, err = _run(["-w", "undo", "tool", "undo"], capsys)
    assert code == cli_tool.EXIT_DENIED and "--approve" in err  # guide mode: a write needs approval
    assert (workspace.root / "notes.md").read_text() == "changed\n"
    code, out, err = _run(["-w", "undo", "tool", "undo", call_id, "--approve"], capsys)
    assert code == 0, err
    assert out["status"] == "ok" and out["data"]["call_id"] == call_id
    assert (workspace.root / "notes.md").read_text() == "original\n"
    # Audited and in the transcript like any call, with its snapshot and diff linked.
    entries = Conversation(workspace.latest_transcript()).read().entries
    [restore] = [e for e in entries if e.get("call_id") == out["meta"]["call_id"]]
    assert restore["tool_name"] == "builtin:fs:restore" and restore["source"] == "cli"
    assert {a["role"] for a in restore["artifacts"]} == {"snapshot", "after", "diff"}


def test_tool_undo_refuses_after_a_later_edit_and_prints_the_diff(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    call_id = _write("by the tool\n", capsys)
    (workspace.root / "notes.md").write_text("by hand\n")
    code, out, err = _run(["-w", "undo", "tool", "undo", call_id, "--approve"], capsys)
    assert code == cli_tool.EXIT_ERROR
    assert out["error"]["details"]["rule"] == "fs.undo_changed"
    assert f"changed since call {call_id}" in err and "-by the tool\n+by hand\n" in err
    assert (workspace.root / "notes.md").read_text() == "by hand\n"


def test_tool_undo_with_nothing_to_undo_is_one_clear_line(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(["-w", "undo", "tool", "undo"], capsys)
    assert code == cli_tool.EXIT_ERROR and out is None
    assert err == "aries: no tool call to undo: no write or patch with a snapshot since the last undo\n"


def test_a_cli_call_is_in_the_transcript_and_in_explain_last(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    call_id = _write("from the cli\n", capsys)
    entries = Conversation(workspace.latest_transcript()).read().entries
    [event] = [e for e in entries if e["role"] == "tool"]
    assert event["call_id"] == call_id and event["source"] == "cli"
    assert {a["role"] for a in event["artifacts"]} == {"snapshot", "after", "diff"}
    # What the TUI's /policy explain-last shows in a later session of the same workspace.
    session = Session(workspace, interactive=False)
    try:
        decision = session.gateway().last_decision()
        assert decision is not None and decision["call_id"] == call_id
        shown = explain_decision(decision)
        assert "builtin:fs:write_text" in shown and "approved by: operator_once" in shown
    finally:
        session.close()
