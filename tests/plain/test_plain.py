"""``aries -w W`` without a terminal, and ``aries -w W --plain``: real ``aries`` subprocesses (with no
controlling terminal: ``start_new_session``), a scripted Ollama server, the real turn loop, audit store
and transcript; the approver's question on a real pseudo-terminal."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.audit.log import AuditStore
from services.pipe.tty_approval import TtyApprover, question
from services.workspace.manager import Workspace, WorkspaceManager
from tests.models.servers import Call, Reply, ScriptedServer
from tests.pipe.test_ask_cli import model_env, provider_name

GOLDEN = Path(__file__).with_name("plain_session.golden.txt")


@pytest.fixture
def ollama() -> Iterator[ScriptedServer]:
    server = ScriptedServer("ollama").start()
    yield server
    server.stop()


def aries(*args: str, home: Path, stdin: int | str | None = None, **env: str) -> subprocess.CompletedProcess[bytes]:
    """``aries ARGS`` with no controlling terminal (a new session), stdout and stderr as bytes."""
    environ = {**os.environ, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash", **env}
    if "ARIES_MODEL" not in env:
        for name in ("ARIES_MODEL", "OLLAMA_HOST", "OPENAI_BASE_URL"):
            environ.pop(name, None)
    text = stdin.encode() if isinstance(stdin, str) else None
    descriptor = stdin if isinstance(stdin, int) else None
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        input=text,
        stdin=None if text is not None else (subprocess.DEVNULL if descriptor is None else descriptor),
        capture_output=True,
        env=environ,
        timeout=120,
        start_new_session=True,
    )


# -- the defect: no terminal ---------------------------------------------------------------------------


def test_the_workbench_without_a_terminal_is_one_line_and_exit_2(aries_home: Path) -> None:
    """``aries -w W < /dev/null | cat``: one line naming --plain and aries ask, no escape byte, quickly."""
    started = time.monotonic()
    done = aries("-w", "demo", home=aries_home)
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert elapsed < 2.0 + 1.0  # the interpreter's own start on a loaded machine; the refusal itself is at once
    assert done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aries: no terminal (stdin is not one)")
    assert "aries -w demo --plain" in lines[0] and "aries -w demo ask" in lines[0]
    assert b"\x1b" not in done.stdout + done.stderr
    assert not (aries_home / "workspaces" / "demo").exists()  # nothing was created or leased


def test_a_terminal_on_stdin_but_a_pipe_on_stdout_is_refused_too(aries_home: Path) -> None:
    leader, follower = os.openpty()
    try:
        done = aries("-w", "demo", home=aries_home, stdin=follower)
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().startswith("aries: no terminal (stdout is not one)")


def test_plain_takes_no_command(aries_home: Path) -> None:
    done = aries("-w", "demo", "--plain", "history", home=aries_home)
    assert done.returncode == 2 and done.stderr.decode().strip() == (
        "aries: --plain opens a line-by-line session: it takes no command"
    )


# -- a whole plain session through a pipe ------------------------------------------------------------


def test_a_plain_session_through_a_pipe(aries_home: Path, tmp_path: Path, ollama: ScriptedServer) -> None:
    """A question, a write the model asks for (refused: no terminal to ask), the answer, /policy,
    an unsupported command, /quit: printed once each, as the golden file says; audit and transcript
    written as the workbench writes them; exit 3 (a call was refused)."""
    workspace, _ = WorkspaceManager().create("demo")
    write = provider_name(workspace.root, "builtin:fs:write_text")
    workspace.close()
    ollama.add(
        Reply(tool_calls=[Call(write, {"path": "out.txt", "text": "hi\n"})]),
        Reply(text="I could not write the file: nobody could approve it.", chunk_size=7),
    )
    lines = "Please write hi to out.txt\n/policy mode\n/fs ls\n/bogus\n/quit\nnever read\n"
    done = aries("-w", "demo", "--plain", home=aries_home, stdin=lines, **model_env(ollama))
    assert done.returncode == 3, done.stderr
    shown = done.stdout.decode()
    assert b"\x1b" not in done.stdout
    if os.environ.get("ARIES_UPDATE_GOLDEN"):
        GOLDEN.write_text(shown, encoding="utf-8")
    assert shown == GOLDEN.read_text(encoding="utf-8")
    assert "never read" not in shown and len(ollama.chat_requests()) == 2

    root = Workspace(aries_home / "workspaces" / "demo", "demo")
    assert not (root.root / "out.txt").exists()
    with AuditStore.for_workspace(root.root) as store:
        rows = store.calls(limit=10)
    assert [(r["tool_name"], r["decision"]) for r in rows] == [("builtin:fs:write_text", "deny")], rows
    assert rows[0]["source"] == "assistant" and "no terminal" in str(rows[0])
    (transcript,) = root.conversations()
    import json

    roles = [json.loads(line)["role"] for line in transcript.read_text().splitlines()]
    assert roles[0] == "user" and roles[-2:] == ["assistant", "notice"] and "tool" in roles


def test_plain_mode_holds_the_workspace_like_the_workbench(aries_home: Path) -> None:
    """A second plain session on a workspace a live one holds is refused (the lease)."""
    first = subprocess.Popen(
        [sys.executable, "-m", "app", "-w", "demo", "--plain"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "ARIES_HOME": str(aries_home)},
        start_new_session=True,
    )
    try:
        assert first.stdout is not None
        assert first.stdout.readline().startswith(b"Aries plain mode: workspace demo")
        second = aries("-w", "demo", "--plain", home=aries_home, stdin="/quit\n")
        assert second.returncode != 0 and "open in another Aries" in second.stderr.decode()
    finally:
        assert first.stdin is not None
        first.stdin.close()
        assert first.wait(30) == 0


# -- the approval question on a terminal -------------------------------------------------------------


def _request(description: str) -> object:
    from services.policy.model import PolicyDecision, RiskTier
    from services.tools.calls import ApprovalRequest

    tier = RiskTier.WRITE_SAFE
    decision = PolicyDecision("confirm", "approval.guide", "writes wait", "builtin:fs:write_text", tier, "guide")
    return ApprovalRequest(
        "c1", "builtin:fs:write_text", tier, {"path": "a.txt"}, decision,
        {"kind": "diff", "diff": "+hi\x1b]52;c;evil\x07"}, {}, description, "assistant",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("answers", "choice", "reason"),
    [("1\n", "approve_once", None), ("2\n", "approve_session", None), ("3\nnot now\n", "deny", "not now"),
     ("\n\n", "deny", "denied by the operator")],
)  # fmt: skip
def test_the_question_on_a_terminal(answers: str, choice: str, reason: str | None) -> None:
    leader, follower = os.openpty()
    os.write(leader, answers.encode())
    approver = TtyApprover(lambda: os.dup(follower))
    try:
        decision = approver(_request("write a.txt \x1b[2J\u202e"))  # type: ignore[arg-type]
        time.sleep(0.05)
        shown = os.read(leader, 65536).decode()
    finally:
        os.close(follower)
        os.close(leader)
    assert decision.choice == choice and decision.reason == reason and approver.refused == 0
    assert "1) allow once" in shown and "3) deny" in shown and "Choice [1-3" in shown
    assert "\x1b" not in shown and "\u202e" not in shown  # the description and the diff neutralised


def test_no_terminal_refuses_and_counts() -> None:
    def nowhere() -> int:
        raise OSError(6, "No such device or address")

    approver = TtyApprover(nowhere)
    decision = approver(_request("write a.txt"))  # type: ignore[arg-type]
    assert decision.choice == "deny" and "no terminal (/dev/tty)" in (decision.reason or "")
    assert approver.refused == 1
    assert question(_request("x")).endswith("Choice [1-3, Enter denies]: ")  # type: ignore[arg-type]


def test_ctrl_c_ends_a_plain_session_waiting_for_input(aries_home: Path) -> None:
    """SIGINT while the session waits for a line: exit 130 at once (the line reader never holds the
    process), the workspace released (a new session opens it)."""
    import signal

    waiting = subprocess.Popen(
        [sys.executable, "-m", "app", "-w", "demo", "--plain"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "ARIES_HOME": str(aries_home)},
        start_new_session=True,
    )
    try:
        assert waiting.stdout is not None and waiting.stdout.readline().startswith(b"Aries plain mode")
        waiting.send_signal(signal.SIGINT)
        assert waiting.wait(15) == 130
        assert waiting.stderr is not None and waiting.stderr.read().decode().strip() == "aries: interrupted"
    finally:
        if waiting.poll() is None:
            waiting.kill()
        assert waiting.stdin is not None
        waiting.stdin.close()
    again = aries("-w", "demo", "--plain", home=aries_home, stdin="/quit\n")
    assert again.returncode == 0, again.stderr


def test_the_question_offers_always_when_a_lasting_grant_can_cover_the_call() -> None:
    from dataclasses import replace

    from services.grants.proposal import Proposal
    from services.settings.operator import GrantPattern

    pattern = GrantPattern(kind="path", path="/w/a.txt")
    request = replace(_request("write a.txt"), proposal=Proposal("builtin:fs:write_text", (pattern,)))  # type: ignore[type-var]
    shown = question(request)  # type: ignore[arg-type]
    assert "4) always in this workspace: stores builtin:fs:write_text /w/a.txt" in shown
    assert shown.endswith("Choice [1-4, Enter denies]: ")
    leader, follower = os.openpty()
    os.write(leader, b"4\n")
    try:
        decision = TtyApprover(lambda: os.dup(follower))(request)  # type: ignore[arg-type]
    finally:
        os.close(follower)
        os.close(leader)
    assert decision.choice == "approve_always" and decision.pattern == pattern
