"""The background build (services.history_search.background): slice by slice, the newest
conversations and what was just appended first, the writer lock free between slices."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from services.conversation import AssistantAnswer, Conversation, UserMessage
from services.history_search.background import build
from services.history_search.query import search
from services.history_search.store import Coverage, HistoryIndex
from services.workspace.transcripts import Transcript


def converse(transcripts: Path, cid: str, question: str, when: int) -> None:
    talk = Conversation(Transcript(transcripts, cid))
    turn = talk.new_turn()
    talk.record(UserMessage(text=question, turn_id=turn))
    talk.record(AssistantAnswer(text="noted", provider="offline", turn_id=turn))
    os.utime(transcripts / f"{cid}.ndjson", ns=(when, when))


def test_the_newest_conversations_come_first_and_searches_get_the_lock_between_slices(tmp_path: Path) -> None:
    transcripts = tmp_path / "transcripts"
    base = time.time_ns() - 10**12
    for n in range(12):
        converse(transcripts, f"c-{n:02d}", f"entry {n}: a dunlin, word w{n:02d}", base + n * 10**9)
    heard: list[Coverage] = []
    found_newest: list[bool] = []

    def report(coverage: Coverage) -> None:  # called between slices: the lock is free
        heard.append(coverage)
        if len(heard) == 1:
            result = search(HistoryIndex(tmp_path), "w11", budget_s=0.0)  # another reader, same lock
            found_newest.append(bool(result.hits) and result.partial)

    final = build(HistoryIndex(tmp_path), threading.Event(), slice_s=0.0, report=report)
    assert not final.partial and final.total == 12
    assert found_newest == [True]  # the most recently written conversation was in the first slice
    assert [c.indexed for c in heard] == sorted({c.indexed for c in heard}) and len(heard) >= 3
    assert len(search(HistoryIndex(tmp_path), "dunlin", limit=50).hits) == 12


def test_a_cancelled_build_stops_and_the_next_one_finishes(tmp_path: Path) -> None:
    transcripts = tmp_path / "transcripts"
    for n in range(6):
        converse(transcripts, f"c-{n:02d}", f"a sanderling {n}", time.time_ns())
    cancel = threading.Event()
    partial = build(HistoryIndex(tmp_path), cancel, slice_s=0.0, report=lambda _: cancel.set())
    assert partial.partial and partial.indexed < 6
    assert not build(HistoryIndex(tmp_path), threading.Event()).partial


def test_a_slice_ends_early_for_a_search_waiting_for_the_writer_lock(tmp_path: Path) -> None:
    """The build holds the lock for a slice (here: up to 60 s); a search that waits for it asks, the
    slice ends after its transcript, the search indexes the turn just written and answers partial."""
    import random

    from services.workspace.transcripts import Transcript

    rng = random.Random(1)
    for n in range(10):  # slow to index: long entries (secret redaction runs line by line)
        transcript = Transcript(tmp_path / "transcripts", f"c-{n:02d}")
        for k in range(3):
            lines = (" ".join(f"tern{rng.randrange(999)}" for _ in range(12)) for _ in range(300))
            transcript.append("user", "\n".join(lines), turn_id=f"c-{n:02d}-t{k + 1:04d}")
    cancel = threading.Event()
    builder = threading.Thread(target=build, args=(HistoryIndex(tmp_path), cancel), kwargs={"slice_s": 60.0})
    builder.start()
    try:
        meta = tmp_path / "cache" / "conversations" / "meta.json"
        deadline = time.monotonic() + 30
        while not meta.exists() and time.monotonic() < deadline:  # the first slice has the lock
            time.sleep(0.01)
        converse(tmp_path / "transcripts", "c-new", "a skua chases the terns", time.time_ns())
        result = search(HistoryIndex(tmp_path), "skua", budget_s=0.0, wait_s=30.0)
        assert result.hits and result.partial, result.coverage  # it did not wait for the whole build
    finally:
        cancel.set()
        builder.join()
