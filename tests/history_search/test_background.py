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
