"""``aries -w W history search``: hits printed through the one neutralising writer, bad input in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from services.conversation import AssistantAnswer, Conversation, UserMessage
from services.workspace.manager import WorkspaceManager
from tests.test_cli_escapes import raw_problems

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "\x1b]52;c;aGVsbG8=\x07 \x1b[2J \u202egnirts\u202c \u009b31m [bold red]loud[/] <script>x</script>"


def _aries(home: Path, *argv: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "ARIES_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "app", *argv], capture_output=True, env=env, timeout=120)


def test_hostile_text_in_hits_is_shown_inert(tmp_path: Path) -> None:
    home = tmp_path / "home"
    workspace, _ = WorkspaceManager(home / "workspaces").create("w")
    talk = Conversation(workspace.new_transcript())
    turn = talk.new_turn()
    talk.record(UserMessage(text=f"the shearwater {HOSTILE} glides", turn_id=turn))
    talk.record(AssistantAnswer(text=f"Shearwaters {HOSTILE} do glide.", provider="offline", turn_id=turn))
    workspace.close()

    text = _aries(home, "-w", "w", "history", "search", "shearwater")
    assert text.returncode == 0, text.stderr
    assert raw_problems(text.stdout) == [] and raw_problems(text.stderr) == []
    shown = text.stdout.decode()
    assert len(shown.splitlines()) == 2  # one line per hit
    assert "«shearwater»" in shown and "[bold red]loud[/]" in shown and "\\x1b" in shown

    as_json = _aries(home, "-w", "w", "history", "search", "glide", "--json", "--limit", "1", "--role", "assistant")
    assert as_json.returncode == 0 and raw_problems(as_json.stdout) == []
    data = json.loads(as_json.stdout)
    assert data["partial"] is False and len(data["hits"]) == 1
    hit = data["hits"][0]
    assert hit["role"] == "assistant" and hit["turn"] == 1 and "\u202e" in hit["snippet"]  # data kept, escaped


def test_bad_input_is_one_line_and_a_usage_exit(tmp_path: Path) -> None:
    home = tmp_path / "home"
    WorkspaceManager(home / "workspaces").create("w")[0].close()
    for argv in (["search", '"unclosed'], ["search", "x", "--since", "soon"], ["search", "x", "--limit", "0"]):
        done = _aries(home, "-w", "w", "history", *argv)
        assert done.returncode == 2, (argv, done.stderr)
        said = done.stderr.decode().strip().splitlines()
        assert b"Traceback" not in done.stderr and said[-1].startswith("aries: "), said
        assert [line for line in said if line.startswith("aries: ")] == [said[-1]]  # one line says why
    missing = _aries(home, "-w", "nope", "history", "search", "x")
    assert missing.returncode != 0 and len(missing.stderr.decode().strip().splitlines()) == 1


def test_a_damaged_index_is_rebuilt_with_one_line_never_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    workspace, _ = WorkspaceManager(home / "workspaces").create("w")
    talk = Conversation(workspace.new_transcript())
    talk.record(UserMessage(text="the avocet sweeps the mud", turn_id=talk.new_turn()))
    workspace.close()
    first = _aries(home, "-w", "w", "history", "search", "avocet")
    assert first.returncode == 0 and first.stderr == b"", first.stderr
    tantivy = workspace.root / "cache" / "conversations" / "tantivy"
    store = next(tantivy.glob("*.store"))
    damages = [
        ("cut", lambda: store.write_bytes(store.read_bytes()[:-20])),  # Tantivy would panic, on stderr
        ("one byte", lambda: store.write_bytes(_flipped(store.read_bytes()))),  # only the CRC says so
        ("meta", lambda: (tantivy / "meta.json").write_text("{not json")),
    ]
    for what, damage in damages:
        store = next(tantivy.glob("*.store"))
        damage()
        damaged = _aries(home, "-w", "w", "history", "search", "avocet")
        assert damaged.returncode == 0 and b"panicked" not in damaged.stderr, (what, damaged.stderr)
        said = damaged.stderr.decode().strip().splitlines()
        assert len(said) == 1 and "rebuilt from the transcripts" in said[0], (what, said)
        assert damaged.stdout == first.stdout, what  # the same hit
        again = _aries(home, "-w", "w", "history", "search", "avocet")
        assert again.stderr == b"" and again.stdout == first.stdout, what  # said once


def _flipped(data: bytes) -> bytes:
    middle = len(data) // 3
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]
