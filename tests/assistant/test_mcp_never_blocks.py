"""An MCP server that never starts stalled every model turn for its start timeout, with nothing on
screen (issue 31 item 7). Now a failed server is tried once per session by the turns: its tools are left
out with one notice, and the next turn does not wait for it again. A real subprocess that never speaks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from services.assistant import TurnLoop
from services.session.session import Session
from services.workspace.manager import Workspace
from tests.assistant.conftest import provider_for
from tests.models.servers import Reply, ScriptedServer
from tests.tools.conftest import policy_data


def _silent_server(workspace: Workspace, marker: Path) -> None:
    script = f"import time; open({str(marker)!r}, 'a').write('x'); time.sleep(120)"
    data = policy_data(workspace.root)
    data["providers"] = {
        "builtin": {"enabled": True},
        "mcp": {
            "enabled": True,
            "servers": {"mute": {"command": sys.executable, "args": ["-c", script], "start_timeout_s": 1.5}},
        },
    }
    data["tool_classes"] = {**data["tool_classes"], "mcp:mute": "enabled"}
    (workspace.root / "policy.yaml").write_text(json.dumps(data), encoding="utf-8")


async def test_a_server_that_never_starts_is_waited_for_once_and_said_once(
    workspace: Workspace, server: ScriptedServer, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    _silent_server(workspace, marker)
    session = Session(workspace, interactive=False)
    try:
        assert session.gateway().mcp is not None, "the workspace's own policy is in force"
        for n in (1, 2, 3):
            server.add(Reply(text=f"answer {n}"))
            loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
            outcome = await loop.run(f"question {n}")
            await loop.provider.aclose()
            assert outcome.error is None and outcome.text == f"answer {n}"
        assert marker.read_text() == "x", "the server was started again by a later turn"
        notices = [
            e
            for e in session.conversation.read().entries
            if e.get("title") == "tools" and "did not start" in e["content"]
        ]
        assert len(notices) == 1 and notices[0]["content"].startswith("mcp:mute did not start")
        assert "its tools are left out" in notices[0]["content"]
    finally:
        await session.aclose()
