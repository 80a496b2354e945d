"""An MCP tool call (the real ``mcp-server-time``) approved in the TUI's modal, audited with its rule,
and the server stopped when Aries quits; ``/doctor`` shows the server and its state."""

from __future__ import annotations

import json
import sys

import pytest

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from tests.tools.mcp_support import gone
from tests.tui.test_approvals import SIZE, make_workspace, tool_entries, wait_for_pending, wait_for_tools

pytestmark = pytest.mark.timeout(180)

POLICY = {
    "version": 1,
    "mode": "guide",
    "providers": {
        "builtin": {"enabled": True},
        "mcp": {
            "enabled": True,
            "servers": {
                "time": {
                    "command": sys.executable,
                    "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                    "tools": {"get_current_time": "READ_ONLY"},
                }
            },
        },
    },
    "tool_classes": {"fs": "enabled", "mcp:time": "enabled"},
    "filesystem": {"allowed_roots": ["${workspace}"]},
}


async def test_an_mcp_call_is_approved_in_the_modal_and_audited_with_its_rule() -> None:
    make_workspace(policy=json.dumps(POLICY))
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        args = '{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}'
        command = f"/tool mcp:time:convert_time {args}"
        await pilot.press(*command, "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.press("a")
        await wait_for_tools(app, pilot)
        [entry] = tool_entries(app)
        assert entry["tool_name"] == "mcp:time:convert_time" and entry["status"] == "success", entry
        assert "Asia/Tokyo" in json.dumps(entry["output"])
        decision = app.session.gateway().last_decision()
        assert decision is not None and decision["approved_by"] == "operator_once"
        assert decision["rule_id"] == "mode.guide.requires_approval"
        [server] = app.session.gateway().mcp_status()
        pid = server["pid"]
        assert server["state"] == "running" and pid
    assert gone(pid), "the MCP server outlived the app"


async def test_doctor_shows_the_mcp_servers() -> None:
    make_workspace(policy=json.dumps(POLICY))
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/doctor", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = "\n".join(json.dumps(e) for e in _entries(app) if e["role"] == "notice")
        assert "ok    mcp server time: stdio" in text and "running, 2 tools" in text, text


def _entries(app: AriesApp) -> list[dict]:
    from services.workspace.transcripts import read_transcript

    assert app.session is not None
    return read_transcript(app.session.conversation.transcript.path).entries
