"""The background build in a child process (services.history_search.child, issue 29): the index is
built by a real ``python -m services.history_search.child``, its reports reach the caller, closing its
stdin stops it, and a failure is one line."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from services.conversation import AssistantAnswer, Conversation, UserMessage
from services.history_search.child import build_in_child
from services.history_search.coverage import Coverage, SearchIndexError
from services.history_search.query import search
from services.history_search.store import HistoryIndex
from services.workspace.transcripts import Transcript


def seed(root: Path, count: int) -> Path:
    transcripts = root / "transcripts"
    for n in range(count):
        talk = Conversation(Transcript(transcripts, f"c-{n:03d}"))
        turn = talk.new_turn()
        talk.record(UserMessage(text=f"entry {n}: a turnstone, word w{n:03d}, key sk-{'a' * 40}", turn_id=turn))
        talk.record(AssistantAnswer(text="noted", provider="offline", turn_id=turn))
    return transcripts


def test_the_child_builds_the_index_and_its_reports_arrive(tmp_path: Path) -> None:
    transcripts = seed(tmp_path, 5)
    heard: list[Coverage] = []
    final = build_in_child(tmp_path, transcripts, threading.Event(), report=heard.append)
    assert (final.indexed, final.total) == (5, 5) and final.entries_added == 10
    assert heard and heard[-1] == final
    result = search(HistoryIndex(tmp_path), "turnstone w003", budget_s=0.0)
    assert not result.partial and [h.conversation_id for h in result.hits][:1] == ["c-003"]
    assert "sk-aaaa" not in result.hits[0].snippet and "[REDACTED:" in result.hits[0].snippet  # as in-process


def test_closing_its_stdin_stops_the_child(tmp_path: Path) -> None:
    transcripts = seed(tmp_path, 60)
    cancel = threading.Event()
    cancel.set()  # the workspace closed before the build began
    started = time.monotonic()
    final = build_in_child(tmp_path, transcripts, cancel)
    assert final.partial and final.total == 60
    assert time.monotonic() - started < 30


def test_a_child_that_fails_is_one_line(tmp_path: Path) -> None:
    blocked = tmp_path / "ws"
    blocked.mkdir()
    (blocked / "cache").write_text("a file where the cache folder goes", encoding="utf-8")
    transcripts = seed(blocked, 1)
    with pytest.raises(SearchIndexError) as caught:
        build_in_child(blocked, transcripts, threading.Event())
    assert "\n" not in caught.value.message and "conversation search index" in caught.value.message
