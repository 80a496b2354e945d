"""Pins, checkpoints and rewind in the TUI (issue 30 items 3-5): ``/rewind 3`` after the scripted ten-turn
session, through its one approval modal (pilot); and snapshots of the new states at 160×48 and 80×24 on a
deterministic conversation (fixed ids, timestamps and snapshots).

Baselines live in snapshots/test_rewind_tui/."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from app.aries_app import AriesApp
from screens.rewind import RewindScreen
from services.audit.log import AuditStore
from services.hashing import sha256_hex
from services.workspace.manager import Workspace, WorkspaceManager
from services.workspace.transcripts import Transcript
from tests.test_rewind import _snapshot, make_ten_turns
from tests.tui.helpers import settle, until
from widgets.transcript.pane import TranscriptEntry

SIZE = (160, 48)
SMALL = (80, 24)
CONVERSATION = "c-20260101-100000-00000002"


async def test_rewind_from_the_tui_lists_every_file_and_restores_them(aries_home: Path) -> None:
    workspace, server, shots = await asyncio.to_thread(make_ten_turns, "demo")
    try:
        (workspace.root / "d.txt").write_text("edited outside Aries\n")
        app = AriesApp("demo")
        async with app.run_test(size=SIZE) as pilot:
            await app.ready()
            await pilot.press(*"/rewind 3", "enter")
            await until(pilot, lambda: isinstance(app.screen, RewindScreen), what="the rewind modal")
            shown = str(app.screen.query_one("#rewind-detail", Static).render())
            for name in ("a.txt", "b.txt", "c.txt", "e.txt", "f.txt"):
                assert f"{name}:" in shown
            assert "d.txt: changed outside Aries" in shown and "+edited outside Aries" in shown
            await pilot.press("y")
            await until(
                pilot,
                lambda: any(e.get("kind") == "rewind" for e in app.session.conversation.read().entries),  # type: ignore[union-attr]
                what="the rewind entry",
            )
            await settle(pilot)
            assert app.session is not None and app.session.conversation.timeline().numbers == [1, 2, 3]
            marked = [w for w in app.screen.query(TranscriptEntry) if w.entry.get("role") == "user"]
            assert [w.marks for w in marked] == [(False, False)] * 3 + [(True, False)] * 7  # turns 4-10 put away
            assert "rewound away" in str(marked[3].render()) and marked[3].has_class("-rewound")
        expected = dict(shots[2])
        expected["d.txt"] = sha256_hex(b"edited outside Aries\n")
        assert _snapshot(workspace.root) == expected
        with AuditStore.for_workspace(workspace.root) as audit:
            rows = [row for row in audit.calls(limit=500) if row.get("source") == "rewind"]
        assert len(rows) == 5
    finally:
        server.stop()


async def test_cancelling_the_modal_changes_nothing(aries_home: Path) -> None:
    workspace, server, _ = await asyncio.to_thread(make_ten_turns, "demo")
    try:
        before = _snapshot(workspace.root)
        app = AriesApp("demo")
        async with app.run_test(size=SIZE) as pilot:
            await app.ready()
            await pilot.press(*"/rewind 3", "enter")
            await until(pilot, lambda: isinstance(app.screen, RewindScreen), what="the rewind modal")
            await pilot.press("i")  # there is no file changed outside Aries: the key does nothing
            assert isinstance(app.screen, RewindScreen)
            await pilot.press("escape")
            await settle(pilot)
            assert app.session is not None and app.session.conversation.timeline().numbers == list(range(1, 11))
        assert _snapshot(workspace.root) == before
    finally:
        server.stop()


# -- a deterministic conversation for the snapshots ----------------------------------------------------------
def _write(workspace: Workspace, t: Transcript, turn: int, rel: str, before: bytes | None, after: bytes) -> None:
    path = workspace.root / rel
    kept = []
    for data, role in ((before or b"", "snapshot"), (after, "after")):
        artifact, _ = workspace.artifacts.add_bytes(data, f"{rel}.{role}", description=rel, provenance={"kind": "test"})
        link = {"role": role, "id": artifact.id, "name": artifact.name, "hash": artifact.hash, "path": str(path)}
        if role == "snapshot":
            link.update(existed=before is not None, after_sha256=sha256_hex(after))
        kept.append(link)
    t.append(
        "tool",
        f"wrote {rel}",
        timestamp=f"2026-01-01T10:0{turn}:01.000Z",
        tool_name="builtin:fs:write_text",
        input={"path": rel, "text": after.decode()},
        output={"path": rel, "bytes": len(after), "created": before is None},
        status="success",
        duration_ms=4,
        call_id=f"call-20260101-10000{turn}-0000000{turn}",
        turn_id=f"{CONVERSATION}-t{turn:04d}",
        artifacts=kept,
    )
    path.write_bytes(after)


def rewind_fixture(name: str = "demo") -> Workspace:
    """Four turns of fixed ids and times; run with ``ARIES_FROZEN_TIME=1`` (the notices and artifacts
    the commands make are stamped with the frozen clock)."""
    workspace, _ = WorkspaceManager().create(name)
    t = Transcript(workspace.transcripts_dir, CONVERSATION)
    for turn, question in enumerate(("Draft the plan", "Add notes", "Make a todo list", "Summarise"), start=1):
        tid = f"{CONVERSATION}-t{turn:04d}"
        t.append("user", question, timestamp=f"2026-01-01T10:0{turn}:00.000Z", turn_id=tid)
        if turn == 1:
            _write(workspace, t, 1, "plan.md", None, b"# Plan\n\nv1\n")
        if turn == 2:
            _write(workspace, t, 2, "plan.md", b"# Plan\n\nv1\n", b"# Plan\n\nv2\n")
            _write(workspace, t, 2, "notes.md", None, b"notes\n")
        if turn == 3:
            _write(workspace, t, 3, "todo.md", None, b"- one\n")
            t.append(
                "tool", "ran make", timestamp="2026-01-01T10:03:02.000Z", tool_name="builtin:shell:run",
                input={"argv": ["make"]}, output={"exit_code": 0}, status="success", duration_ms=4,
                call_id="call-20260101-100003-00000009", turn_id=tid,
            )  # fmt: skip
        t.append(
            "assistant", f"Done: {question.lower()}.", timestamp=f"2026-01-01T10:0{turn}:03.000Z", turn_id=tid,
            provider="offline", provenance="local", citations=[],
        )  # fmt: skip
    (workspace.root / "notes.md").write_text("notes\nedited by hand\n")
    return workspace


def _run(*lines: str, wait_modal: bool = False):  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        await app.ready()  # type: ignore[attr-defined]
        for line in lines:
            app.commands.run(line)  # type: ignore[attr-defined]
            await settle(pilot)
        if wait_modal:
            await until(pilot, lambda: isinstance(app.screen, RewindScreen))
        await settle(pilot)

    return run_before


def test_the_fixture_is_what_the_snapshots_show(aries_home: Path) -> None:
    workspace = rewind_fixture()
    lines = (workspace.transcripts_dir / f"{CONVERSATION}.ndjson").read_text().splitlines()
    assert [json.loads(line)["role"] for line in lines].count("user") == 4


def test_snapshot_pins(snap_compare, aries_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """You should see the conversation of four turns, turn 4's "you" line marked "· pinned" (in green, with
    a green bar at its left), and after it two aries notes: "Pinned turn 2: it is sent in every request,
    never left out." and "Pinned turn 4: …"; a toast at the bottom right says "Pinned turn 4 (pinned: 2,
    4); /usage shows what pins cost."."""
    monkeypatch.setenv("ARIES_FROZEN_TIME", "1")
    rewind_fixture()
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=_run("/pin 2", "/pin"))


def test_snapshot_checkpoints(snap_compare, aries_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """You should see, after the conversation, the note "Checkpoint drafted: the end of turn 4." and the
    listing "Checkpoints:" with one line: "drafted", "turn 4" and the turn's message "Summarise"."""
    monkeypatch.setenv("ARIES_FROZEN_TIME", "1")
    rewind_fixture()
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=_run("/checkpoint drafted", "/checkpoints"))


def test_snapshot_rewind_modal(snap_compare, aries_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """You should see the rewind modal over the workbench: its title "Rewind to the end of turn 1: turn(s)
    2, 3, 4 put away (kept; /rewind brings them back).", then one line a file — "plan.md: restore",
    "notes.md: changed outside Aries — left as it is", "todo.md: remove" — and "not reversible: turn 3:
    builtin:shell:run (ran make)"; below, notes.md's diff ("+edited by hand"); at the bottom the keys "y
    rewind · i include changed files · n / Esc cancel"."""
    monkeypatch.setenv("ARIES_FROZEN_TIME", "1")
    rewind_fixture()
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=_run("/rewind 1", wait_modal=True))


def test_snapshot_rewind_modal_small(snap_compare, aries_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """You should see, at 80×24, the same rewind modal inside the screen: the title wrapped, the file lines
    and the start of the diff in a scrolling body, and the whole key line at the bottom."""
    monkeypatch.setenv("ARIES_FROZEN_TIME", "1")
    rewind_fixture()
    assert snap_compare(AriesApp("demo"), terminal_size=SMALL, run_before=_run("/rewind 1", wait_modal=True))
