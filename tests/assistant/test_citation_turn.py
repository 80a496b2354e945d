"""Citation checks wired into the turn (issue 33 item 4): the real turn loop against a scripted server
on loopback, the real index and transcript; the answer is checked against the passages given to the
model in that turn and the verdicts are recorded with it."""

from __future__ import annotations

from typing import Any

import pytest

from services.assistant import Done, TurnLoop
from services.assistant.citation_turn import CHECKS_VERSION, check_turn, checks_record, given_chunks, read_checks
from services.session.session import Session
from tests.assistant.conftest import provider_for
from tests.assistant.test_loop import handle_of, run
from tests.models.servers import Reply, ScriptedServer

INVENTED = "docs:0123456789abcdef"


def answer_entry(session: Session) -> dict[str, Any]:
    return [e for e in session.conversation.read().entries if e["role"] == "assistant"][-1]


@pytest.mark.parametrize("server", ["ollama"], indirect=True)
async def test_a_turn_records_each_sentence_with_its_verdict(session: Session, server: ScriptedServer) -> None:
    handle = handle_of(session, "what is Tantivy?")
    answer = (
        f"Tantivy is a full-text search engine library written in Rust [{handle}]. "
        f"Bananas ripen faster beside apples in a paper bag [{handle}]. "
        f"Writes wait for the operator [{INVENTED}]. "
        "Tantivy was first released in 2016."
    )
    server.add(Reply(text=answer))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome, events = await run(loop, "what is Tantivy?")
    assert outcome.error is None and outcome.checks is not None
    verdicts = [(s.verdict, [c.handle for c in s.checks]) for s in outcome.checks.sentences]
    assert verdicts == [
        ("supported", [handle]),
        ("unsupported", [handle]),
        ("invented", [INVENTED]),
        ("uncited", []),
    ]
    assert outcome.checks.invented == (INVENTED,) and outcome.citations == [handle]
    # The transcript keeps them with the answer, in the recorded form; Done carries the same.
    entry = answer_entry(session)
    recorded = read_checks(entry["checks"])
    assert recorded is not None and recorded.version == CHECKS_VERSION and recorded.method == "overlap"
    assert [s.verdict for s in recorded.sentences] == ["supported", "unsupported", "invented", "uncited"]
    first = recorded.sentences[0]
    assert answer[first.start : first.end].startswith("Tantivy is a full-text")
    span = first.citations[0].span
    chunk = session.engine().show(handle).text
    assert span is not None and "full-text search engine library" in chunk[span[0] : span[1]]
    done = next(e for e in events if isinstance(e, Done))
    assert done.checks == entry["checks"]


@pytest.mark.parametrize("server", ["ollama"], indirect=True)
async def test_an_answer_with_nothing_to_mark_records_no_checks(session: Session, server: ScriptedServer) -> None:
    server.add(Reply(text="hello there, how can i help?"))
    outcome, _ = await run(TurnLoop(session, provider_for(server)), "hi")  # type: ignore[arg-type]
    assert outcome.checks is not None and [s.verdict for s in outcome.checks.sentences] == ["plain"]
    assert "checks" not in answer_entry(session)


def test_old_or_unreadable_checks_read_as_none() -> None:
    assert read_checks(None) is None  # an entry written before the checks
    assert read_checks({"method": "overlap", "sentences": [{"start": "x"}]}) is None
    assert read_checks({"version": CHECKS_VERSION + 1, "method": "overlap"}) is None  # a newer format
    passage = {"handle": "d:00000000000000aa", "text": "Runs in Rust."}
    record = checks_record(check_turn("It runs in Rust [d:00000000000000aa].", [passage]))
    recorded = read_checks(record)
    assert recorded is not None and [s.verdict for s in recorded.sentences] == ["supported"]
    assert recorded.sentences[0].citations[0].span == (0, 13)
    assert given_chunks([{"handle": "a", "text": "one"}, {"handle": "a", "text": "two"}, {"handle": 3}]) == {"a": "one"}
