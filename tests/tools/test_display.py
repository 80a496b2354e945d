"""``ToolResult.display_text()``: what a terminal or a model sees of a result has no raw control bytes,
while ``data`` (what the audit store keeps) stays byte-faithful."""

from __future__ import annotations

import json

from services.tools.gateway import ToolGateway
from tests.tools.conftest import Sandbox

HOSTILE = "title\x1b]0;pwned\x07 \x1b[2J red\u202e txt.exe\x00 end\n"


def test_file_text_is_neutralised_for_display_but_kept_in_data(sandbox: Sandbox, gateway: ToolGateway) -> None:
    (sandbox.root / "evil.txt").write_text(HOSTILE.replace("\x00", ""), encoding="utf-8")
    result = gateway.execute_sync("builtin:fs:read_text", {"path": "evil.txt"})
    assert result.ok and result.data is not None
    assert result.data["text"] == HOSTILE.replace("\x00", "")  # byte-faithful
    shown = result.display_text()
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert "\\x1b]0;pwned\\x07" in shown and "<U+202E>" in shown


def test_file_names_cannot_forge_lines(sandbox: Sandbox, gateway: ToolGateway) -> None:
    (sandbox.root / "a\nFAKE: ok.txt").write_text("x")
    listing = gateway.execute_sync("builtin:fs:list_dir", {"path": "."})
    shown = listing.display_text()
    assert "a\\nFAKE: ok.txt" in shown and not any(line.startswith("FAKE") for line in shown.splitlines())


def test_command_output_and_errors(sandbox: Sandbox, gateway: ToolGateway) -> None:
    (sandbox.root / "colour.txt").write_text("\x1b[31mred\x1b[0m\n")
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["cat", "colour.txt"], "cwd": str(sandbox.root)})
    assert result.ok and result.data is not None and "\x1b[31m" in result.data["stdout"]
    shown = result.display_text()
    assert "exit code 0" in shown and "\\x1b[31mred" in shown and "\x1b" not in shown
    denied = gateway.execute_sync("builtin:fs:read_text", {"path": "../outside/secret.txt"})
    assert denied.display_text().startswith("PolicyDenied: ") and "(rule fs.traversal)" in denied.display_text()


def test_unknown_shapes_fall_back_to_json_and_long_text_is_capped() -> None:
    from services.tools.results import ToolResult

    odd = ToolResult.success({"value": "\x1b[2J", "n": 1})
    shown = odd.display_text()
    assert "\x1b" not in shown and json.loads(shown.replace("\\x1b", "\\u001b")) == {"n": 1, "value": "\x1b[2J"}
    long = ToolResult.success({"path": "p", "text": "y" * 50_000})
    assert len(long.display_text(max_chars=1000)) < 1100 and "more characters" in long.display_text(max_chars=1000)
