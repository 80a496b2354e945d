"""Defects of issue 34 item 7 found by trying the CLI, each with a test that failed before its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def aries(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARIES_HOME": str(home)}
    env.pop("ARIES_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_continue_on_a_workspace_without_a_conversation_starts_one_and_says_so(aries_home: Path) -> None:
    """`ask --continue` as `llm -c` does it: nothing to continue → a new conversation, exit 0, one note."""
    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    first = aries("-w", "demo", "ask", "--continue", "hello", home=aries_home)
    assert first.returncode == 0, first.stderr
    assert "has no conversation yet: this starts a new one" in first.stderr
    listing = json.loads(aries("-w", "demo", "history", "--json", home=aries_home).stdout)
    assert len(listing) == 1
    second = aries("-w", "demo", "ask", "--continue", "again", home=aries_home)
    assert second.returncode == 0 and "starts a new one" not in second.stderr
    (only,) = json.loads(aries("-w", "demo", "history", "--json", home=aries_home).stdout)
    assert only["turns"] == 2


def test_a_damaged_line_in_the_middle_of_a_transcript_is_named(aries_home: Path) -> None:
    """`history` and `ask --continue` say which file and line they skipped (they used to say nothing)."""
    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    assert aries("-w", "demo", "ask", "first", home=aries_home).returncode == 0
    (path,) = (aries_home / "workspaces" / "demo" / "transcripts").glob("*.ndjson")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + "{not json\n" + "".join(lines[1:]))
    listing = aries("-w", "demo", "history", home=aries_home)
    assert listing.returncode == 0
    assert f"{path}:2: unreadable line" in listing.stderr
    resumed = aries("-w", "demo", "ask", "--continue", "second", home=aries_home)
    assert resumed.returncode == 0 and f"{path}:2: unreadable line" in resumed.stderr


def test_listings_print_a_header_row_and_tool_list_is_a_table(aries_home: Path) -> None:
    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    assert aries("-w", "demo", "ask", "first", home=aries_home).returncode == 0
    history = aries("-w", "demo", "history", home=aries_home).stdout.splitlines()
    assert history[0].split()[:3] == ["CONVERSATION", "UPDATED", "TURNS"]
    tools = aries("-w", "demo", "tool", "list", home=aries_home)
    assert tools.returncode == 0 and not tools.stdout.lstrip().startswith("{")
    assert "TOOL" in tools.stdout and "builtin:fs:read_text" in tools.stdout
    as_json = json.loads(aries("-w", "demo", "tool", "list", "--json", home=aries_home).stdout)
    assert any(tool["id"] == "builtin:fs:read_text" for tool in as_json["tools"])


def test_serve_documents_no_option_that_changes_nothing(aries_home: Path) -> None:
    shown = aries("serve", "--help", home=aries_home)
    assert shown.returncode == 0 and "--no-open" not in shown.stdout


def test_an_unknown_conversation_is_refused_before_the_screen_opens(aries_home: Path) -> None:
    """`aries -w W --conversation nope` said so in a toast over the last conversation; now one line and the
    exit code `history fork nope` has, with no escape sequence (the screen never opened)."""
    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    fork = aries("-w", "demo", "history", "fork", "nope", home=aries_home)
    tui = aries("-w", "demo", "--conversation", "nope", home=aries_home)
    assert tui.returncode == fork.returncode != 0
    assert tui.stderr.strip().splitlines() == [
        "aries: no conversation 'nope' in workspace demo; the list: aries history (in the workbench: /history)"
    ]
    assert "\x1b" not in tui.stdout + tui.stderr
