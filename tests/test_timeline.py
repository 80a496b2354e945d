"""The transcript's format version and the conversation's timeline: turns in force, pins, checkpoints."""

import json
from pathlib import Path

import pytest

from services.conversation import AssistantAnswer, Conversation, UserMessage
from services.conversation.timeline import (
    checkpoint_fields,
    pin_fields,
    rewind_fields,
    timeline_of,
    valid_checkpoint_name,
)
from services.errors import InvalidInput, NotFound
from services.workspace.transcript_format import FORMAT_VERSION, KNOWN_KINDS, format_of
from services.workspace.transcripts import Transcript, read_transcript


def _turns(conversation: Conversation, count: int) -> None:
    for _ in range(count):
        turn = conversation.new_turn()
        n = turn.rsplit("-t", 1)[-1]
        conversation.record(UserMessage(text=f"question {int(n)}", turn_id=turn))
        conversation.record(AssistantAnswer(text=f"answer {int(n)}", provider="offline", turn_id=turn))


def test_old_transcript_opens_unchanged_and_is_format_1(tmp_path: Path) -> None:
    conversation = Conversation(Transcript(tmp_path, "c-old"))
    _turns(conversation, 3)
    before = conversation.transcript.path.read_bytes()
    again = Conversation(Transcript(tmp_path, "c-old"))
    assert [e["content"] for e in again.dialogue()] == [
        "question 1",
        "answer 1",
        "question 2",
        "answer 2",
        "question 3",
        "answer 3",
    ]
    assert again.format_notice is None
    assert format_of(read_transcript(again.transcript.path).entries) == 1
    assert again.transcript.path.read_bytes() == before
    assert again.timeline().numbers == [1, 2, 3]


def test_new_kinds_raise_the_version_and_compaction_is_known(tmp_path: Path) -> None:
    assert {"pin", "unpin", "checkpoint", "rewind", "compaction"} <= KNOWN_KINDS
    conversation = Conversation(Transcript(tmp_path, "c-v2"))
    _turns(conversation, 1)
    conversation.mark("pinned", pin_fields("pin", 1, conversation.timeline().head))
    entries = read_transcript(conversation.transcript.path).entries
    assert entries[-1]["kind"] == "pin" and entries[-1]["format"] == 2
    assert format_of(entries) == FORMAT_VERSION == 2


def test_newer_transcript_says_what_it_cannot_read(tmp_path: Path) -> None:
    conversation = Conversation(Transcript(tmp_path, "c-new"))
    _turns(conversation, 2)
    with conversation.transcript.path.open("a") as handle:
        future = {
            "timestamp": "2027-01-01T00:00:00Z",
            "role": "notice",
            "content": "?",
            "conversation_id": "c-new",
            "message_id": "c-new-000099",
            "kind": "hologram",
            "format": 7,
        }
        handle.write(json.dumps(future) + "\n")
    again = Conversation(Transcript(tmp_path, "c-new"))
    assert again.format_notice is not None
    assert "transcript format 7" in again.format_notice and "reads up to 2" in again.format_notice
    assert "1 hologram" in again.format_notice
    assert len(again.dialogue()) == 4  # everything else is read


def test_rewind_puts_turns_away_and_a_rewind_of_it_brings_them_back(tmp_path: Path) -> None:
    conversation = Conversation(Transcript(tmp_path, "c-rw"))
    _turns(conversation, 5)
    timeline = conversation.timeline()
    conversation.mark("pin 2", pin_fields("pin", 2, timeline.head))  # made at turn 5: goes with turns 4-5
    conversation.mark("cp", checkpoint_fields("late", timeline.turn_id(5), timeline.head))
    assert conversation.timeline().pinned == [2]
    conversation.mark("rewind", rewind_fields(timeline.turn_id(3), timeline.head, [4, 5]))
    timeline = conversation.timeline()
    assert timeline.numbers == [1, 2, 3] and timeline.away == frozenset({4, 5})
    assert timeline.pinned == []
    assert [e["content"] for e in conversation.dialogue()][-1] == "answer 3"
    _turns(conversation, 1)  # the next turn is 6, after 3
    assert conversation.timeline().numbers == [1, 2, 3, 6]
    assert timeline_of(read_transcript(conversation.transcript.path).entries).numbers == [1, 2, 3, 6]
    back = conversation.timeline()
    conversation.mark("rewind", rewind_fields(back.resolve("late"), back.head, [6]))
    assert conversation.timeline().numbers == [1, 2, 3, 4, 5]
    assert conversation.timeline().pinned == [2]
    reopened = Conversation(Transcript(tmp_path, "c-rw"))
    assert reopened.timeline().numbers == [1, 2, 3, 4, 5] and reopened.timeline().away == frozenset({6})


def test_checkpoint_names_and_references() -> None:
    assert valid_checkpoint_name("before-refactor") == "before-refactor"
    for bad in ("12", "", "a b", "x" * 41):
        with pytest.raises(InvalidInput):
            valid_checkpoint_name(bad)
    timeline = timeline_of([])
    with pytest.raises(NotFound, match="no checkpoint 'nope'"):
        timeline.resolve("nope")
    with pytest.raises(NotFound, match="no turn 4"):
        timeline.resolve("4")


def test_a_malformed_mark_is_skipped_and_listed(tmp_path: Path) -> None:
    conversation = Conversation(Transcript(tmp_path, "c-bad"))
    _turns(conversation, 2)
    conversation.mark("odd", {"kind": "rewind", "format": 2})  # no to_turn
    timeline = conversation.timeline()
    assert (
        timeline.numbers == [1, 2] and len(timeline.problems) == 1 and "rewind entry not read" in timeline.problems[0]
    )


def test_pin_unpin_and_checkpoints_in_the_operators_words(tmp_path: Path) -> None:
    from services.conversation.marks import checkpoint, checkpoint_lines, pin, unpin

    conversation = Conversation(Transcript(tmp_path, "c-marks"))
    with pytest.raises(InvalidInput, match="no turn yet"):
        pin(conversation)
    _turns(conversation, 4)
    assert pin(conversation).startswith("Pinned turn 4")
    assert "pinned: 2, 4" in pin(conversation, 2)
    assert "already" in pin(conversation, 2)
    with pytest.raises(InvalidInput, match="turn 9 is not in this conversation"):
        pin(conversation, 9)
    assert unpin(conversation, 4) == "Unpinned turn 4 (pinned: 2)."
    with pytest.raises(InvalidInput, match="turn 4 is not pinned"):
        unpin(conversation, 4)
    assert "marks the end of turn 4" in checkpoint(conversation, "draft-done")
    with pytest.raises(InvalidInput, match="marks turn 4 already"):
        checkpoint(conversation, "draft-done")
    with pytest.raises(InvalidInput, match="not all digits"):
        checkpoint(conversation, "2024")
    [line] = checkpoint_lines(conversation)
    assert line.startswith("draft-done") and "turn 4" in line and "put away" not in line
    timeline = conversation.timeline()
    conversation.mark("rw", rewind_fields(timeline.turn_id(2), timeline.head, [3, 4]))
    assert "put away by a rewind" in checkpoint_lines(conversation)[0]
    assert conversation.timeline().pinned == []  # made at turn 4 (of turn 2): it went with turns 3-4
    from services.conversation.history import summarize

    summary = summarize(conversation.transcript.path)
    assert summary.checkpoints == ["draft-done@4"] and summary.rewound == [3, 4]
    assert summary.marks() == "checkpoints draft-done@4; turns 3, 4 rewound away (/rewind 4 brings them back)"


def test_importing_a_newer_transcript_says_what_cannot_be_read(tmp_path: Path) -> None:
    """A workspace bundle from a newer Aries: the import report names the transcript and what is skipped."""
    from services.bundles.export import export_workspace
    from services.bundles.importer import import_bundle
    from services.workspace.manager import WorkspaceManager

    workspace, _ = WorkspaceManager(tmp_path / "src").create("newer")
    conversation = Conversation(workspace.new_transcript())
    _turns(conversation, 1)
    with conversation.transcript.path.open("a") as handle:
        future = {
            "timestamp": "2027-01-01T00:00:00Z", "role": "notice", "content": "?",
            "conversation_id": conversation.conversation_id, "message_id": "x-000099", "kind": "hologram", "format": 3,
        }  # fmt: skip
        handle.write(json.dumps(future) + "\n")
    export_workspace(workspace, tmp_path / "n.tar.zst", aries_version="t")
    report = import_bundle(tmp_path / "n.tar.zst", WorkspaceManager(tmp_path / "dst"))
    [line] = report.unreadable
    assert conversation.conversation_id in line and "transcript format 3" in line and "1 hologram" in line
    assert "are skipped" in line


def test_recall_never_brings_back_a_turn_a_rewind_put_away(tmp_path: Path) -> None:
    from services.assistant.recall import rewound_away

    conversation = Conversation(Transcript(tmp_path, "c-recall"))
    _turns(conversation, 5)
    assert rewound_away(conversation) == frozenset()
    timeline = conversation.timeline()
    conversation.mark("rw", rewind_fields(timeline.turn_id(3), timeline.head, [4, 5]))
    assert rewound_away(conversation) == frozenset({4, 5})
