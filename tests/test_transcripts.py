import json
from pathlib import Path

import pytest

from services.errors import InvalidInput, NotFound
from services.workspace.transcripts import Transcript, read_transcript


def test_append_and_replay_without_context(tmp_path: Path) -> None:
    t = Transcript(tmp_path, "c-test")
    t.append("user", "hello")
    t.append("assistant", "hi there")
    t.append(
        "tool",
        "listed",
        tool_name="builtin:fs:list_dir",
        input={"path": "."},
        output=["a"],
        status="success",
        duration_ms=4,
    )
    t.append("system", "note")
    result = read_transcript(t.path)
    assert result.problems == []
    assert [e["role"] for e in result.entries] == ["user", "assistant", "tool", "system"]
    assert [e["message_id"] for e in result.entries] == [f"c-test-{i:06d}" for i in range(1, 5)]
    for entry in result.entries:
        assert {"timestamp", "role", "content", "conversation_id", "message_id"} <= entry.keys()
        assert entry["conversation_id"] == "c-test"
    tool = result.entries[2]
    assert tool["tool_name"] == "builtin:fs:list_dir" and tool["status"] == "success" and tool["duration_ms"] == 4
    # every line is one JSON object, in order
    lines = t.path.read_text().splitlines()
    assert [json.loads(line)["content"] for line in lines] == ["hello", "hi there", "listed", "note"]


def test_message_ids_continue_after_reopen(tmp_path: Path) -> None:
    Transcript(tmp_path, "c-x").append("user", "one")
    again = Transcript(tmp_path, "c-x")
    assert again.append("user", "two")["message_id"] == "c-x-000002"


@pytest.mark.parametrize(
    ("role", "extra"),
    [
        ("robot", {}),
        ("tool", {}),
        ("tool", {"tool_name": "t", "input": {}, "output": {}, "status": "maybe", "duration_ms": 1}),
    ],
)
def test_invalid_entries_are_refused(tmp_path: Path, role: str, extra: dict) -> None:
    t = Transcript(tmp_path, "c-bad")
    with pytest.raises(InvalidInput):
        t.append(role, "x", **extra)
    assert not t.path.exists()


def test_reserved_fields_cannot_be_overridden(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        Transcript(tmp_path, "c-r").append("user", "x", message_id="forged")


@pytest.mark.parametrize("bad_id", ["../escape", "a/b", "", "x" * 200, "sp ace"])
def test_conversation_ids_cannot_escape(tmp_path: Path, bad_id: str) -> None:
    with pytest.raises(InvalidInput):
        Transcript(tmp_path, bad_id)


def test_torn_last_line_is_reported_with_file_and_line(tmp_path: Path) -> None:
    t = Transcript(tmp_path, "c-torn")
    t.append("user", "one")
    t.append("user", "two")
    with t.path.open("ab") as handle:
        handle.write(b'{"timestamp": "2026-01-01T00:00:00.000Z", "role": "us')
    result = read_transcript(t.path)
    assert [e["content"] for e in result.entries] == ["one", "two"]
    assert len(result.problems) == 1
    problem = result.problems[0]
    assert problem.line == 3 and problem.torn and problem.path == t.path
    assert f"{t.path}:3: torn last line" in str(problem)


def test_reopening_after_a_torn_line_quarantines_it_and_keeps_everything_readable(tmp_path: Path) -> None:
    t = Transcript(tmp_path, "c-torn2")
    t.append("user", "one")
    with t.path.open("ab") as handle:
        handle.write(b'{"broken')
    resumed = Transcript(tmp_path, "c-torn2")
    assert len(resumed.recovered) == 1
    problem = resumed.recovered[0]
    assert problem.line == 2 and problem.torn and "c-torn2.ndjson.torn" in problem.reason
    resumed.append("user", "three")
    result = read_transcript(t.path)
    assert [e["content"] for e in result.entries] == ["one", "three"]
    assert result.problems == []
    # the torn fragment is not dropped silently: it is kept, with its line number, in the sidecar
    sidecar = [json.loads(line) for line in (tmp_path / "c-torn2.ndjson.torn").read_text().splitlines()]
    assert sidecar[0]["line"] == 2 and sidecar[0]["text"] == '{"broken'


def test_complete_entry_without_newline_is_kept(tmp_path: Path) -> None:
    t = Transcript(tmp_path, "c-nl")
    t.append("user", "one")
    data = t.path.read_bytes().rstrip(b"\n")
    t.path.write_bytes(data)
    assert [e["content"] for e in read_transcript(t.path).entries] == ["one"]
    Transcript(tmp_path, "c-nl").append("user", "two")
    assert [e["content"] for e in read_transcript(t.path).entries] == ["one", "two"]


def test_garbage_lines_in_the_middle_do_not_hide_later_lines(tmp_path: Path) -> None:
    path = tmp_path / "c-g.ndjson"
    good = {"timestamp": "t", "role": "user", "content": "ok", "conversation_id": "c-g", "message_id": "c-g-000001"}
    path.write_bytes(json.dumps(good).encode() + b"\n\xff\xfe\n[1,2]\n{}\n" + json.dumps(good).encode() + b"\n")
    result = read_transcript(path)
    assert len(result.entries) == 2
    assert [p.line for p in result.problems] == [2, 3, 4]


def test_missing_transcript_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        read_transcript(tmp_path / "nope.ndjson")


def test_oversized_entry_is_refused(tmp_path: Path) -> None:
    t = Transcript(tmp_path, "c-big")
    with pytest.raises(InvalidInput):
        t.append("user", "x" * (9 * 1024 * 1024))
    assert not t.path.exists()
