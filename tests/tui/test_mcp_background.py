"""The workbench starts the policy's MCP servers once, in the background, after the workspace is ready
(issue 31 item 7): a status row while they start, one warning when one does not, never for an untrusted
workspace. A real subprocess that never speaks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from tests.tools.conftest import policy_data
from tests.tui.helpers import Messages, until
from widgets.status import RunStatus

SIZE = (160, 48)


def _workspace_with_a_mute_server(marker: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    script = f"import time; open({str(marker)!r}, 'a').write('x'); time.sleep(120)"
    data = policy_data(workspace.root)
    server = {"command": sys.executable, "args": ["-c", script], "start_timeout_s": 2}
    data["providers"] = {"builtin": {"enabled": True}, "mcp": {"enabled": True, "servers": {"mute": server}}}
    data["tool_classes"] = {**data["tool_classes"], "mcp:mute": "enabled"}
    (workspace.root / "policy.yaml").write_text(json.dumps(data), encoding="utf-8")


async def test_servers_start_in_the_background_and_a_failure_is_said(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    _workspace_with_a_mute_server(marker)
    messages = Messages()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        status = app.screen.query_one(RunStatus)
        await until(pilot, lambda: "MCP servers: starting" in status.render_items().plain or marker.exists())
        await until(pilot, lambda: any("mcp:mute did not start" in n for n in messages.notes()), timeout=30)
        assert marker.read_text() == "x"
        assert "MCP servers" not in status.render_items().plain
