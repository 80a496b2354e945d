"""Rewind, one audited step (issue 30 item 4): a scripted ten-turn session writes, edits and deletes six
files through the tools (real loopback OpenAI-compatible server, the real turn loop, gateway, audit store
and transcript); ``aries rewind 3`` puts the conversation and the files back, and a kill halfway is
finished or rolled back at the next start (a real SIGKILL from the crash point)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cli import history as cli_history
from app.cli import rewind as cli_rewind
from app.cli._common import EXIT_DENIED
from services.assistant import TurnLoop
from services.audit.log import AuditStore
from services.conversation import Conversation
from services.hashing import sha256_hex
from services.session.opening import Surface
from services.session.rewind import JOURNAL_NAME
from services.session.rewind_journal import ROLL_BACK_TOOL
from services.session.session import Session
from services.tools.calls import approve_all
from services.workspace.manager import Workspace, WorkspaceManager
from tests.assistant.conftest import provider_for
from tests.models.servers import Call, Reply, ScriptedServer

pytestmark = pytest.mark.timeout(120)
FILES = ("a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt")


def _patch(name: str, old: str | None, new: str | None) -> str:
    head = f"--- a/{name}\n+++ " + ("/dev/null" if new is None else f"b/{name}") + "\n"
    minus = f"-{old}\n" if old is not None else ""
    plus = f"+{new}\n" if new is not None else ""
    return head + f"@@ -1 +{'1' if new is not None else '0,0'} @@\n" + minus + plus


def _script(tool: dict[str, str]) -> list[list[Call]]:
    write, patch = tool["builtin:fs:write_text"], tool["builtin:fs:apply_patch"]

    def w(name: str, text: str) -> Call:
        return Call(write, {"path": name, "text": text + "\n"})

    return [
        [w("a.txt", "a1"), w("b.txt", "b1")],
        [w("c.txt", "c1")],
        [w("a.txt", "a3"), w("d.txt", "d1")],
        [w("e.txt", "e1")],  # created after turn 3: removed by the rewind
        [Call(patch, {"patch": _patch("b.txt", "b1", "b5")})],  # an edit
        [Call(patch, {"patch": _patch("c.txt", "c1", None)})],  # a deletion: recreated by the rewind
        [w("d.txt", "d7"), w("f.txt", "f7")],  # f existed before Aries
        [w("a.txt", "a8")],
        [w("b.txt", "b9")],
        [],
    ]


def _snapshot(root: Path) -> dict[str, str | None]:
    return {name: sha256_hex((root / name).read_bytes()) if (root / name).exists() else None for name in FILES}


async def _turns(session: Session, server: ScriptedServer, texts: list[str], calls: list[list[Call]]) -> list[dict]:
    shots = []
    for number, (text, turn_calls) in enumerate(zip(texts, calls, strict=True), start=1):
        for index, call in enumerate(turn_calls):
            call.id = f"t{number}c{index}"
        replies = [Reply(tool_calls=[call]) for call in turn_calls] + [Reply(text=f"done {text}")]
        server.add(*replies)
        loop = TurnLoop(session, provider_for(server), approver=approve_all)  # type: ignore[arg-type]
        outcome = await loop.run(text)
        await loop.provider.aclose()
        assert outcome.error is None, outcome.error
        shots.append(_snapshot(session.workspace.root))
    return shots


def make_ten_turns(name: str) -> tuple[Workspace, ScriptedServer, list[dict[str, str | None]]]:
    """Workspace ``name`` after the scripted ten turns (the server still running), and each file's
    SHA-256 at the end of each turn."""
    workspace, _ = WorkspaceManager().create(name)
    (workspace.root / "f.txt").write_text("before Aries\n")
    server = ScriptedServer("openai").start()
    session = Session(workspace, interactive=False)
    try:
        tool = dict(TurnLoop(session, provider_for(server)).offered_tools()[1].items())  # type: ignore[arg-type]
        texts = [f"turn {n} please" for n in range(1, 11)]
        shots = asyncio.run(_turns(session, server, texts, _script(tool)))
    finally:
        session.close()
    return workspace, server, shots


@pytest.fixture
def ten_turns(aries_home: Path) -> Iterator[tuple[Workspace, ScriptedServer, list[dict[str, str | None]]]]:
    workspace, server, shots = make_ten_turns("rw")
    yield workspace, server, shots
    server.stop()


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str], command: Any = None) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="aries")
    (command or cli_rewind).register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def _rewind_rows(workspace: Workspace) -> list[dict[str, Any]]:
    with AuditStore.for_workspace(workspace.root) as audit:
        return [row for row in audit.calls(limit=500) if row.get("source") == "rewind"]


def test_rewind_3_restores_every_file_and_the_next_request_has_turns_1_to_3(ten_turns, capsys) -> None:
    workspace, server, shots = ten_turns
    root = workspace.root
    (root / "d.txt").write_text("edited outside Aries\n")  # refused: listed with its diff and left
    before = _snapshot(root)
    code, out, err = _cli(["rewind", "3", "-w", "rw"], capsys)
    assert code == EXIT_DENIED and "--yes" in err and _snapshot(root) == before  # only shown
    assert "d.txt: changed outside Aries" in out and "+edited outside Aries" in out
    code, out, err = _cli(["rewind", "3", "-w", "rw", "--yes", "--json"], capsys)
    assert code == 0, err
    report = json.loads(out)
    after = _snapshot(root)
    expected = dict(shots[2])
    expected["d.txt"] = sha256_hex(b"edited outside Aries\n")
    assert after == expected  # each file at its SHA-256 at the end of turn 3, the outside edit kept
    assert after["e.txt"] is None and (root / "c.txt").read_text() == "c1\n"
    assert (root / "f.txt").read_text() == "before Aries\n"
    assert report["done"]["left"] == ["d.txt"] and report["plan"]["away"] == list(range(4, 11))
    diff = next(f["diff"] for f in report["plan"]["files"] if f["rel"] == "d.txt")
    assert "-d7" in diff and "+edited outside Aries" in diff
    rows = _rewind_rows(workspace)
    assert len(rows) == 5 and all(row["status"] == "success" for row in rows)  # one audit row per file
    assert not (workspace.transcripts_dir / JOURNAL_NAME).exists()
    code, out, err = _cli(["history", "-w", "rw"], capsys, cli_history)
    assert code == 0 and "turns 4–10 rewound away (/rewind 10 brings them back)" in out
    # The next request to the model holds exactly turns 1-3 (and the new message).
    session = Session(workspace, interactive=False, conversation="last")
    try:
        server.add(Reply(text="ok"))
        seen = len(server.chat_requests())
        loop = TurnLoop(session, provider_for(server), approver=approve_all)  # type: ignore[arg-type]
        outcome = asyncio.run(loop.run("what now?"))
        asyncio.run(loop.provider.aclose())
        assert outcome.turn_id.endswith("-t0011")
        users = [m["content"] for m in server.chat_requests()[seen]["messages"] if m["role"] == "user"]
        assert [u for u in users if "please" in u] == ["turn 1 please", "turn 2 please", "turn 3 please"]
        assert "what now?" in users[-1]
        assert session.conversation.timeline().numbers == [1, 2, 3, 11]
    finally:
        session.close()
    # The rewind of the rewind: back to the end of turn 10, files and all (d.txt included on request).
    code, out, err = _cli(["rewind", "10", "-w", "rw", "--yes", "--include-changed", "--json"], capsys)
    assert code == 0, err
    assert _snapshot(root) == shots[9]
    entries = Conversation(workspace.latest_transcript()).read().entries
    rewinds = [e for e in entries if e.get("kind") == "rewind"]
    assert [r["to"] for r in rewinds] == [3, 10] and rewinds[1]["back"] == list(range(4, 11))


def test_nothing_to_rewind_and_unknown_references_say_so(ten_turns, capsys) -> None:
    code, _, err = _cli(["rewind", "10", "-w", "rw", "--yes"], capsys)
    assert code == 2 and "at the end of turn 10 already" in err  # InvalidInput: exit 2
    code, _, err = _cli(["rewind", "42", "-w", "rw", "--yes"], capsys)
    assert code == 1 and "no turn 42" in err and "Traceback" not in err
    code, _, err = _cli(["rewind", "nope", "-w", "rw", "--yes"], capsys)
    assert code == 1 and "no checkpoint 'nope'" in err


@pytest.mark.parametrize(("fault", "finished"), [("file2", False), ("journal", False), ("entry", True)])
def test_a_rewind_killed_halfway_is_finished_or_rolled_back_at_the_next_start(
    ten_turns, fault: str, finished: bool
) -> None:
    workspace, _, shots = ten_turns
    env = {**os.environ, "ARIES_REWIND_FAULT": fault}
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", "-w", "rw", "rewind", "3", "--yes"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -9, proc.stderr  # SIGKILL
    assert (workspace.transcripts_dir / JOURNAL_NAME).exists()
    if fault == "file2":
        assert _snapshot(workspace.root) not in (shots[2], shots[9])  # half of it, on disk
    warnings: list[str] = []
    session = Session.open("rw", surface=Surface.CLI, on_warning=warnings.append)
    try:
        timeline = session.conversation.timeline()
    finally:
        session.close()
    assert not (workspace.transcripts_dir / JOURNAL_NAME).exists()
    if finished:
        assert _snapshot(workspace.root) == shots[2] and timeline.numbers == [1, 2, 3]
        assert any("had finished" in w for w in warnings)
    else:
        assert _snapshot(workspace.root) == shots[9] and timeline.numbers == list(range(1, 11))
        assert any("was rolled back" in w for w in warnings)
        with AuditStore.for_workspace(workspace.root) as audit:
            rolled = [row for row in audit.calls(limit=500) if row["tool_name"] == ROLL_BACK_TOOL]
        written = int(fault.removeprefix("file")) if fault.startswith("file") else 0
        assert len(rolled) == written  # one audit row per file the killed rewind had written, put back
        assert all(row["source"] == "rewind" and row["status"] == "success" for row in rolled)


def test_the_operators_own_writes_belong_to_the_turn_they_followed(ten_turns, capsys) -> None:
    """A ``/fs write`` (or ``aries tool call``) after turn 10 is part of what a rewind to 3 puts back."""
    workspace, _, shots = ten_turns
    session = Session(workspace, interactive=False, conversation="last")
    try:
        result = session.call_tool_sync("builtin:fs:write_text", {"path": "g.txt", "text": "g\n"}, approver=approve_all)
        assert result.ok
    finally:
        session.close()
    code, out, err = _cli(["rewind", "3", "-w", "rw", "--yes"], capsys)
    assert code == 0, err
    assert not (workspace.root / "g.txt").exists() and _snapshot(workspace.root) == shots[2]


def test_the_export_says_which_turns_a_rewind_put_away(ten_turns, capsys) -> None:
    from services.export import export_conversation

    workspace, _, _ = ten_turns
    code, _, err = _cli(["rewind", "3", "-w", "rw", "--yes"], capsys)
    assert code == 0, err
    text = export_conversation(workspace, "last", "md").data.decode()
    assert text.count("### Operator — `rewound away`") == 7 and text.count("### Operator\n") == 3
    assert "Rewound to the end of turn 3" in text


def test_a_conversation_held_by_another_aries_is_refused_before_any_file(ten_turns) -> None:
    workspace, _, shots = ten_turns
    holder = Session(workspace, interactive=False, conversation="last", holds=True)  # as the TUI holds it
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "app.cli", "-w", "rw", "rewind", "3", "--yes"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.close()
    assert proc.returncode == 5 and str(os.getpid()) in proc.stderr and "Traceback" not in proc.stderr
    assert _snapshot(workspace.root) == shots[9] and not (workspace.transcripts_dir / JOURNAL_NAME).exists()


def test_the_turns_put_away_can_be_forked_and_a_fork_copies_the_turns_in_force(ten_turns, capsys) -> None:
    from services.conversation.history import fork

    workspace, _, _ = ten_turns
    code, _, err = _cli(["rewind", "3", "-w", "rw", "--yes"], capsys)
    assert code == 0, err
    source = Conversation(workspace.latest_transcript()).conversation_id
    away = Conversation(fork(workspace, source, 10))
    assert [e["content"] for e in away.dialogue() if e["role"] == "user"] == [f"turn {n} please" for n in range(1, 11)]
    kept = Conversation(fork(workspace, source))
    assert [e["content"] for e in kept.dialogue() if e["role"] == "user"] == [f"turn {n} please" for n in (1, 2, 3)]
    assert not any(e.get("kind") == "rewind" for e in kept.read().entries)  # the source's marks are not copied


def test_a_fork_keeps_the_pins_and_checkpoints_of_the_turns_it_copies(ten_turns, capsys) -> None:
    """Pins and checkpoints made while a copied turn was the head come along, renumbered; a fork
    through an earlier turn leaves those made after it (as a rewind there would)."""
    from services.conversation.history import fork
    from services.conversation.marks import checkpoint, pin

    workspace, _, _ = ten_turns
    source = Conversation(workspace.latest_transcript())
    pin(source, 2)
    checkpoint(source, "ten")
    whole = Conversation(fork(workspace, source.conversation_id)).timeline()
    assert whole.pinned == [2] and whole.checkpoints["ten"].turn == 10
    assert whole.resolve("ten") == whole.turn_id(10)
    early = Conversation(fork(workspace, source.conversation_id, 3)).timeline()
    assert early.pinned == [] and early.checkpoints == {}  # made at turn 10: they go with it
    code, _, err = _cli(["rewind", "3", "-w", "rw", "--yes", "--conversation", source.conversation_id], capsys)
    assert code == 0, err
    assert Conversation(workspace.transcript(source.conversation_id)).timeline().pinned == []
    away = Conversation(fork(workspace, source.conversation_id, 10)).timeline()
    assert away.pinned == [2] and away.checkpoints["ten"].turn == 10


def test_a_search_hit_in_a_turn_a_rewind_put_away_says_so(ten_turns, capsys) -> None:
    """The conversation index keeps every turn (a rewind of the rewind brings them back); a hit in a
    turn that is not in force is flagged, in the result and on the command line."""
    from services.history_search.query import search
    from services.history_search.store import HistoryIndex

    workspace, _, _ = ten_turns
    code, _, err = _cli(["rewind", "3", "-w", "rw", "--yes"], capsys)
    assert code == 0, err
    hits = search(HistoryIndex.for_workspace(workspace), "please", limit=50, budget_s=None).hits
    by_turn = {hit.turn: hit.rewound for hit in hits if hit.role == "user"}
    assert by_turn == {n: n > 3 for n in range(1, 11)}
    from app.cli import history as cli_history

    code, out, err = _cli(["history", "search", "-w", "rw", "turn 7 please"], capsys, cli_history)
    assert code == 0, err
    line = next(line for line in out.splitlines() if "turn 7 " in line and "user" in line)
    assert "(rewound away)" in line
    code, out, _ = _cli(["history", "search", "-w", "rw", "--json", "turn 2 please"], capsys, cli_history)
    assert any(hit["turn"] == 2 and hit["rewound"] is False for hit in json.loads(out)["hits"])
