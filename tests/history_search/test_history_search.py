"""Search every conversation (issue 32 item 1): real transcripts written through the real writer,
a real Tantivy index, real processes for the cross-process cases."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.conversation import AssistantAnswer, Conversation, ToolCallRecord, UserMessage
from services.errors import InvalidInput
from services.history_search.query import Filters, search, split_filters, unsplit
from services.history_search.store import HistoryIndex
from services.workspace.transcripts import Transcript

REPO = Path(__file__).resolve().parents[2]
OPENAI_KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2
H = "\u202e\u009b\x1b]52;c;aGVsbG8=\x07\x1b[2J"


def converse(transcripts: Path, *turns: tuple[str, str], conversation_id: str | None = None) -> Conversation:
    """A conversation of ``(question, answer)`` turns written through the real writer."""
    conversation = Conversation(Transcript(transcripts, conversation_id))
    for question, answer in turns:
        turn = conversation.new_turn()
        conversation.record(UserMessage(text=question, turn_id=turn))
        conversation.record(AssistantAnswer(text=answer, provider="offline", turn_id=turn))
    return conversation


@pytest.fixture
def root(tmp_path: Path) -> Path:
    transcripts = tmp_path / "transcripts"
    converse(transcripts, ("where did the kestrel nest", "In the old barn by the river."), conversation_id="c-a")
    talk = converse(transcripts, ("read the survey", "The survey counts owls."), conversation_id="c-b")
    talk.record(
        ToolCallRecord(
            tool_id="builtin:fs:read",
            input={"path": "survey.md", "encoding": "latin1"},
            output={"text": "owl census: twelve barn owls near the quarry"},
            ok=True,
            duration_ms=3.0,
            call_id="a1",
            summary="read survey.md",
            turn_id=talk.new_turn(),
        )
    )
    attached = (
        "what does it say?\n\n--- attached file notes/heron.md ---\n"
        "the grey heron fishes at dawn\n--- end of notes/heron.md ---"
    )
    talk.record(UserMessage(text=attached, turn_id=talk.new_turn()))
    return tmp_path


def keys(result: object) -> list[tuple[str, str, str]]:
    return [(h.conversation_id, h.message_id, h.kind) for h in result.hits]  # type: ignore[attr-defined]


def test_messages_tool_calls_results_and_attached_files_are_found_with_a_highlight(root: Path) -> None:
    index = HistoryIndex(root)
    kestrel = search(index, "kestrel")
    assert keys(kestrel) == [("c-a", "c-a-000001", "message")]
    hit = kestrel.hits[0]
    assert (hit.role, hit.turn) == ("user", 1)
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["kestrel"]
    assert not kestrel.partial and kestrel.coverage.total == 2

    owls = search(index, "owls")  # the answer, and the tool's result (stemmed: owl)
    assert {(h.role, h.kind) for h in owls.hits} == {("assistant", "message"), ("tool", "result")}
    assert [(h.kind, h.tool) for h in search(index, "latin1", Filters(role="tool")).hits] == [
        ("call", "builtin:fs:read")
    ]
    assert [h.kind for h in search(index, "owls", Filters(tool="builtin:fs:read")).hits] == ["result"]
    heron = search(index, "dawn")
    assert [(h.kind, h.tool, h.role) for h in heron.hits] == [("file", "notes/heron.md", "user")]
    assert search(index, "barn", Filters(conversation="c-a")).hits[0].conversation_id == "c-a"
    assert search(index, "kestrel", Filters(since="2999-01-01")).hits == []
    assert len(search(index, "kestrel", Filters(since="2000-01-01")).hits) == 1


def test_the_earlier_turns_of_one_conversation_can_be_asked_for(tmp_path: Path) -> None:
    """What issue 30 brings back: the left-out turns 1..N of the open conversation, by relevance."""
    turns = [(f"fact {n}: the tern count is {n}", "noted") for n in range(1, 7)]
    converse(tmp_path / "transcripts", *turns, conversation_id="c-long")
    converse(tmp_path / "transcripts", ("another tern count", "ok"), conversation_id="c-other")
    index = HistoryIndex(tmp_path)
    hits = search(index, "tern count", Filters(conversation="c-long", through_turn=4, role="user")).hits
    assert sorted(h.turn for h in hits) == [1, 2, 3, 4] and {h.conversation_id for h in hits} == {"c-long"}


def test_filters_do_not_change_the_scores(root: Path) -> None:
    index = HistoryIndex(root)
    plain = {h.message_id: h.score for h in search(index, "owls").hits if h.role == "assistant"}
    filtered = {h.message_id: h.score for h in search(index, "owls", Filters(role="assistant")).hits}
    assert filtered == plain


def test_bad_input_is_one_clear_error(root: Path) -> None:
    index = HistoryIndex(root)
    for query, filters, said in [
        ("", Filters(), "needs words"),
        ("owls", Filters(role="system"), "role must be one of"),
        ("owls", Filters(since="yesterday"), "not a date"),
        ('"unclosed', Filters(), "cannot read the query"),
    ]:
        with pytest.raises(InvalidInput, match=said):
            search(index, query, filters)


def test_a_new_entry_is_findable_within_one_second(root: Path) -> None:
    index = HistoryIndex(root)
    search(index, "kestrel")  # warm
    talk = Conversation(Transcript(root / "transcripts", "c-a"))
    talk.record(UserMessage(text="a wandering albatross overhead", turn_id=talk.new_turn()))
    written = time.monotonic()
    found = False
    while time.monotonic() - written < 1.0:
        if search(index, "albatross").hits:
            found = True
            break
    assert found, "not findable within 1 s of the write"
    assert search(index, "albatross").hits[0].turn == 2  # the writer's turn numbering, continued


def test_the_index_rebuilt_after_deletion_or_damage_gives_the_same_hits(root: Path) -> None:
    queries = ["kestrel", "owls", "barn", "heron OR survey", '"barn owls"']

    def asked() -> tuple[list[list[object]], list[str]]:
        results = [search(HistoryIndex(root), q) for q in queries]
        return [[h.to_dict() for h in r.hits] for r in results], [r.rebuilt for r in results]

    before, said = asked()
    assert said == [""] * 5
    folder = root / "cache" / "conversations"
    shutil.rmtree(folder)  # deleted: built again, nothing to say (as on a first search)
    assert asked() == (before, [""] * 5)
    (folder / "tantivy" / "meta.json").write_text("{not json")
    assert asked() == (before, ["its Tantivy files are missing or damaged"] + [""] * 4)  # one notice
    (folder / "offsets.json").write_bytes(b"\x00garbage")
    assert asked() == (before, ["offsets.json is missing or unreadable"] + [""] * 4)
    (folder / "meta.json").write_text(json.dumps({"format": 999, "generation": 1}))  # another format: rebuilt
    hits, said = asked()
    assert hits == before and said[0].startswith("it is of another format (999") and said[1:] == [""] * 4
    assert json.loads((folder / "meta.json").read_text())["format"] != 999


@pytest.mark.parametrize("damage", ["removed", "garbage"])
def test_damaged_segment_files_are_rebuilt_not_a_traceback(root: Path, damage: str) -> None:
    index = HistoryIndex(root)
    before = [[h.to_dict() for h in search(index, q).hits] for q in ("kestrel", "owls")]
    for path in (root / "cache" / "conversations" / "tantivy").iterdir():
        if path.suffix in (".idx", ".term", ".store", ".pos"):
            if damage == "removed":
                path.unlink()
            else:
                path.write_bytes(b"not a segment" * 8)
    said = []
    for reader in (index, HistoryIndex(root)):  # the open handle (its files may still be open), a new one
        results = [search(reader, "kestrel"), search(reader, "owls")]
        assert [[h.to_dict() for h in r.hits] for r in results] == before
        said += [r.notice() for r in results if r.rebuilt]
    assert len(said) == 1, said  # one notice, by the first search that found the damage
    assert said[0].startswith("The conversation search index was rebuilt from the transcripts: ")
    assert "segment cannot be read" in said[0] or "Tantivy files are missing or damaged" in said[0]


def test_a_deleted_or_rewritten_transcript_leaves_the_index(root: Path) -> None:
    index = HistoryIndex(root)
    assert search(index, "kestrel").hits
    (root / "transcripts" / "c-a.ndjson").unlink()
    assert search(index, "kestrel").hits == []
    converse(root / "transcripts", ("the osprey dives", "It does."), conversation_id="c-a")
    assert keys(search(index, "osprey")) == [("c-a", "c-a-000001", "message")]
    assert search(index, "kestrel").hits == []


def test_a_secret_is_neither_findable_nor_shown(root: Path) -> None:
    converse(root / "transcripts", (f"use the key {OPENAI_KEY} for the puffin api", "Noted."), conversation_id="c-s")
    index = HistoryIndex(root)
    assert search(index, OPENAI_KEY).hits == []
    assert search(index, f'"{OPENAI_KEY[:20]}"').hits == []
    puffin = search(index, "puffin")
    assert puffin.hits and "[REDACTED:api_key]" in puffin.hits[0].snippet
    stored = b"".join(p.read_bytes() for p in (root / "cache").rglob("*") if p.is_file())
    assert OPENAI_KEY.encode() not in stored


def test_the_attachment_block_the_assistant_writes_is_read_in_both_forms() -> None:
    from services.assistant.context import untrusted_block
    from services.text.attached import attached_files

    new = "see\n\n" + untrusted_block("attached file notes/a.md", "the grey heron")
    old = "see\n\n--- attached file notes/a.md ---\nthe grey heron\n--- end of notes/a.md ---"
    for message in (new, old):
        (found,) = attached_files(message)
        assert (found.path, found.text) == ("notes/a.md", "the grey heron")


def test_the_ranking_is_deterministic_on_ties(tmp_path: Path) -> None:
    for n in range(12):  # equal documents: equal scores
        converse(tmp_path / "transcripts", ("the same gannet line", "ok"), conversation_id=f"c-{n:02d}")
    index = HistoryIndex(tmp_path)
    first = keys(search(index, "gannet", limit=5))
    assert first == [(f"c-{n:02d}", f"c-{n:02d}-000001", "message") for n in range(5)]
    shutil.rmtree(tmp_path / "cache")
    assert keys(search(HistoryIndex(tmp_path), "gannet", limit=5)) == first


HOLD_WRITER = """
import sys, time
from services.history_search.store import HistoryIndex
index = HistoryIndex(sys.argv[1])
assert index.locks.try_writer()
print("held", flush=True)
time.sleep(30)
"""


def test_a_search_answers_partial_while_another_process_indexes(root: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITER, str(root)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        result = search(HistoryIndex(root), "kestrel")
        assert result.partial and result.hits == [] and result.coverage.total == 2
    finally:
        holder.kill()
        holder.wait()
    assert not search(HistoryIndex(root), "kestrel").partial


WRITE_MANY = """
import sys
from services.conversation import Conversation, UserMessage
from services.workspace.transcripts import Transcript
talk = Conversation(Transcript(sys.argv[1], "c-w"))
for n in range(int(sys.argv[2])):
    talk.record(UserMessage(text=f"cormorant number w{n:04d}", turn_id=talk.new_turn()))
"""
SEARCH_MANY = """
import sys
from services.history_search.query import search
from services.history_search.store import HistoryIndex
index = HistoryIndex(sys.argv[1])
for _ in range(int(sys.argv[2])):
    search(index, "cormorant", limit=3)
"""


def test_another_process_writing_and_searching_while_this_one_searches_does_not_corrupt(root: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    count = 300
    writer = subprocess.Popen([sys.executable, "-c", WRITE_MANY, str(root / "transcripts"), str(count)], env=env)
    other = subprocess.Popen([sys.executable, "-c", SEARCH_MANY, str(root), "150"], env=env)
    index = HistoryIndex(root)
    while writer.poll() is None or other.poll() is None:
        search(index, "cormorant", limit=3)
    assert writer.returncode == 0 and other.returncode == 0
    final = search(index, "cormorant", limit=count + 10)
    assert not final.partial
    ids = [h.message_id for h in final.hits]
    assert len(ids) == count == len(set(ids))  # each entry once: none lost, none doubled
    for n in (0, count // 2, count - 1):
        assert search(index, f"w{n:04d}").hits[0].message_id == f"c-w-{n + 1:06d}"
    assert keys(search(index, "kestrel")) == [("c-a", "c-a-000001", "message")]


def test_a_tool_filter_takes_whole_parts_of_the_id(root: Path) -> None:
    index = HistoryIndex(root)
    for tool, found in [("builtin:fs:read", True), ("fs", True), ("fs:read", True), ("read", True)]:
        assert bool(search(index, "owls", Filters(tool=tool)).hits) is found, tool
    for tool in ("f", "s:read", "builtin:fs:rea", "web", ".*"):
        assert search(index, "owls", Filters(tool=tool)).hits == [], tool


@pytest.mark.parametrize(
    ("line", "text", "filters"),
    [
        ("kestrel role:user", "kestrel", Filters(role="user")),
        ('"barn owls" tool:fs since:2026-11-01', '"barn owls"', Filters(tool="fs", since="2026-11-01")),
        ("x --role tool --tool=fs:read", "x", Filters(role="tool", tool="fs:read")),
        ('"role:user stays in a phrase" y', '"role:user stays in a phrase" y', Filters()),
        ("a:b role:assistant role:user", "a:b", Filters(role="user")),  # the last counts
    ],
)
def test_filters_typed_in_the_query_line(line: str, text: str, filters: Filters) -> None:
    assert split_filters(line) == (text, filters)
    assert split_filters(unsplit(text, filters)) == (text, filters)


def test_a_phrase_in_quotes_is_a_phrase(root: Path) -> None:
    index = HistoryIndex(root)
    assert [h.kind for h in search(index, *split_filters('"barn owls"')).hits] == ["result"]
    assert search(index, *split_filters('"owls barn"')).hits == []


def test_segment_files_are_checked_by_their_footer_and_crc(root: Path) -> None:
    from services.history_search.footers import damaged_files

    search(HistoryIndex(root), "kestrel")
    tantivy = root / "cache" / "conversations" / "tantivy"
    assert damaged_files(tantivy) == []
    store = next(tantivy.glob("*.store"))
    body = store.read_bytes()
    for damaged in (body[:-3], body[:10] + bytes([body[10] ^ 0x80]) + body[11:], b"", body + b"x"):
        store.write_bytes(damaged)
        assert damaged_files(tantivy) == [store.name]
    store.write_bytes(body)
    assert damaged_files(tantivy) == []
