"""``aries -w W grants [add|revoke]`` through the real ``aries`` entry point (a subprocess per call):
a lasting grant answers a headless ``tool call`` that would otherwise be refused, counts its use, is
revoked; bad patterns and ``add`` under the tool-call marker are one clear line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ARIES = str(Path(sys.executable).parent / "aries")


def aries(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ARIES, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ARIES_HOME": str(home), **env},
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_add_list_use_and_revoke_from_the_command_line(aries_home: Path) -> None:
    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    root = aries_home / "workspaces" / "demo"
    (root / "tests").mkdir()
    (root / "tests" / "a.py").write_text("def test_a():\n    assert True\n", encoding="utf-8")
    call = ("-w", "demo", "tool", "call", "builtin:shell:run", "--args", '{"argv": ["pytest", "-q", "tests/a.py"]}')
    refused = aries(*call, home=aries_home)
    assert refused.returncode == 3 and "needs approval" in refused.stderr

    added = aries("-w", "demo", "grants", "add", "builtin:shell:run", "pytest -q tests/a.py", home=aries_home)
    assert added.returncode == 0, added.stderr
    grant_id = added.stdout.split()[1].rstrip(":")
    assert added.stdout.strip() == f"granted {grant_id}: builtin:shell:run pytest -q tests/a.py"

    ran = aries(*call, home=aries_home)
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["data"]["exit_code"] == 0 and result["meta"]["decision"]["approved_by"] == "operator_grant"
    other = aries(*call[:-1], '{"argv": ["pytest", "-q", "tests/a.py", "-p", "evil"]}', home=aries_home)
    assert other.returncode == 3  # an option the grant does not write out

    listed = json.loads(aries("-w", "demo", "grants", "--json", home=aries_home).stdout)["grants"]
    assert [(g["id"], g["pattern"], g["uses"], g["origin"]["by"]) for g in listed] == [
        (grant_id, "pytest -q tests/a.py", 1, "cli")
    ]
    human = aries("-w", "demo", "grants", home=aries_home)
    assert grant_id in human.stdout and "pytest" in human.stdout

    revoked = aries("-w", "demo", "grants", "revoke", grant_id, home=aries_home)
    assert revoked.returncode == 0 and grant_id in revoked.stdout
    assert aries(*call, home=aries_home).returncode == 3
    again = aries("-w", "demo", "grants", "revoke", grant_id, home=aries_home)
    assert again.returncode == 1 and again.stderr.count("\n") == 1 and "no grant" in again.stderr


def test_refusals_are_one_clear_line(aries_home: Path) -> None:
    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    cases = {
        ("builtin:shell:run", "sh *"): "runs its arguments",
        ("builtin:shell:run", "env pytest"): None,  # a literal env command is allowed (written out)
        ("builtin:shell:run", "git *"): "subcommand decides",
        ("builtin:shell:run", "\u217cs *"): "not plain ASCII",
        ("builtin:shell:run", "FOO=1 ls"): "bare name",
        ("builtin:shell:run", "no-such-program-x *"): "not on the search path",
        ("builtin:fs:write_text", "../outside/"): "'..'",
        ("builtin:fs:write_text", "/etc/"): "outside the allowed roots",
        ("builtin:web:fetch", "x"): "cannot be granted lastingly",
    }
    for (tool, words), message in cases.items():
        done = aries("-w", "demo", "grants", "add", tool, words, home=aries_home)
        if message is None:
            assert done.returncode == 0, done.stderr
            continue
        assert done.returncode != 0 and message in done.stderr, (words, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    marked = aries("-w", "demo", "grants", "add", "builtin:shell:run", "ls *", home=aries_home, ARIES_TOOL_CALL="1")
    assert marked.returncode == 1 and "inside an Aries tool call" in marked.stderr
    expiring = aries("-w", "demo", "grants", "add", "builtin:shell:run", "ls *", "--expires", "soon", home=aries_home)
    assert expiring.returncode != 0 and "duration" in expiring.stderr
    without = aries("grants", home=aries_home)
    assert without.returncode != 0 and "named workspace" in without.stderr


def chats(server: Any) -> list[Any]:
    return [r for r in server.requests if r.path == "/api/chat"]


def test_headless_ask_honours_a_lasting_grant(aries_home: Path) -> None:
    """A model's shell call in ``aries ask`` (no --approve) is refused, then, after ``grants add``, run
    by the grant — checked in what the scripted server receives back as the tool's result."""
    from tests.models.servers import Call, Reply, ScriptedServer

    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    (aries_home / "workspaces" / "demo" / "docs").mkdir()
    (aries_home / "workspaces" / "demo" / "docs" / "granted-file.txt").write_text("x\n", encoding="utf-8")
    server = ScriptedServer("ollama").start()
    env = {"ARIES_MODEL": "ollama:llama3.2:3b", "OLLAMA_HOST": server.url}
    try:
        for _ in range(2):
            server.script += [
                Reply(tool_calls=[Call("builtin:shell:run", {"argv": ["ls", "docs"]}, id="c1")]),
                Reply(text="done"),
            ]
        refused = aries("-w", "demo", "ask", "list the docs", home=aries_home, **env)
        assert refused.returncode == 3 and "was refused" in refused.stderr
        assert "granted-file.txt" not in json.dumps(chats(server)[-1].body)
        added = aries("-w", "demo", "grants", "add", "builtin:shell:run", "ls *", home=aries_home)
        assert added.returncode == 0, added.stderr
        answered = aries("-w", "demo", "ask", "list the docs", home=aries_home, **env)
        assert answered.returncode == 0, answered.stderr
        assert "granted-file.txt" in json.dumps(chats(server)[-1].body)
    finally:
        server.stop()
    listed = json.loads(aries("-w", "demo", "grants", "--json", home=aries_home).stdout)["grants"]
    assert [g["uses"] for g in listed] == [1]


def test_a_session_lists_the_lasting_grants_before_any_call(aries_home: Path) -> None:
    """``/grants`` in a TUI just opened (no call made yet, so no gateway yet) lists the grants the CLI
    added: found by trying it, the list was empty until the first call."""
    from services.session.opening import Surface, close_session
    from services.session.session import Session

    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    added = aries("-w", "demo", "grants", "add", "builtin:shell:run", "ls *", home=aries_home)
    assert added.returncode == 0, added.stderr
    session = Session.open("demo", surface=Surface.CLI)
    try:
        assert [(g["scope"], g["pattern"]) for g in session.grants()] == [("workspace", "ls *")]
    finally:
        close_session(session)
