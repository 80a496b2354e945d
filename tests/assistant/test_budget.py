"""The one budget (issue 30 item 6): the order in which the window is shared, the breakdown that adds up
to what was sent, and where it is recorded (the answer's usage, the context report, the loop's event).

The pure sharing is checked on numbers; the fitter on real messages; the loop against the scripted
Ollama / OpenAI-compatible servers with the real session and transcript."""

from __future__ import annotations

from typing import Any

import pytest

from services.assistant import ContextMeasured, LoopEvent, TurnLoop
from services.assistant.context import ContextFitter
from services.models.base import ToolSchema
from services.models.tokens import REQUEST_OVERHEAD, Calibration, message_tokens, tools_tokens
from services.models.window_budget import PARTS, ContextBreakdown, Ranked, recorded, share
from services.session.session import Session
from tests.assistant.conftest import provider_for
from tests.assistant.test_context_window import configure, hit, turns
from tests.models.servers import Reply, ScriptedServer

ALWAYS = {"system_and_profile": 30, "pins": 0, "current_message": 10, "this_turn": 0}


# -- the order -----------------------------------------------------------------------------------------
def test_what_is_always_sent_comes_first_and_says_when_it_cannot_fit() -> None:
    decided = share(100, {**ALWAYS, "pins": 70}, 10, [Ranked("passages", 5)], [5])
    assert not decided.fits and not decided.tools_kept and decided.ranked_kept == 0 and decided.history_dropped == 1
    assert share(110, {**ALWAYS, "pins": 70}, 0, [], []).fits  # exactly the room: it fits


def test_tools_then_passages_by_relevance_then_history_newest_first() -> None:
    ranked = [Ranked("passages", 20), Ranked("brought_back", 20), Ranked("passages", 20)]
    history = [15, 15, 15, 15]
    # Room for everything: nothing left out, each part counted where it belongs.
    everything = share(1000, ALWAYS, 50, ranked, history)
    assert everything.tools_kept and everything.ranked_kept == 3 and everything.history_dropped == 0
    assert everything.parts["passages"] == 40 and everything.parts["brought_back"] == 20
    assert everything.parts["tool_definitions"] == 50 and everything.parts["history"] == 60
    # Less room: history goes first (the oldest), then the lowest-ranked pieces, then the tools.
    assert share(40 + 50 + 60 + 30, ALWAYS, 50, ranked, history).history_dropped == 2
    fewer = share(40 + 50 + 45, ALWAYS, 50, ranked, history)
    assert fewer.tools_kept and fewer.ranked_kept == 2 and fewer.history_dropped == 4
    no_tools = share(40 + 49, ALWAYS, 50, ranked, history)
    assert not no_tools.tools_kept and no_tools.ranked_kept == 2 and no_tools.parts["tool_definitions"] == 0


def test_a_better_piece_that_does_not_fit_is_not_replaced_by_a_smaller_worse_one() -> None:
    decided = share(40 + 25, ALWAYS, 0, [Ranked("passages", 20), Ranked("passages", 30), Ranked("passages", 1)], [])
    assert decided.ranked_kept == 1


def test_the_intro_of_the_passages_is_counted_once_and_only_when_one_is_sent() -> None:
    assert share(1000, ALWAYS, 0, [Ranked("passages", 20)] * 2, [], ranked_intro=7).parts["passages"] == 47
    assert share(1000, ALWAYS, 0, [], [], ranked_intro=7).parts["passages"] == 0


def test_the_tools_keep_to_their_budget() -> None:
    assert not share(1000, ALWAYS, 50, [], [], tool_budget=49).tools_kept
    assert share(1000, ALWAYS, 50, [], [], tool_budget=50).tools_kept


def test_history_is_left_out_in_blocks_from_the_oldest() -> None:
    decided = share(40 + 30, ALWAYS, 0, [], [10] * 10, drop_block=4)
    assert decided.history_dropped == 8 and decided.parts["history"] == 20


# -- the breakdown -------------------------------------------------------------------------------------
@pytest.mark.parametrize("factor", [1.0, 0.87, 1.3])
def test_the_breakdown_adds_up_to_what_was_sent(factor: float) -> None:
    tool = ToolSchema("a_tool", "reads a file " * 5, {"type": "object", "properties": {"path": {"type": "string"}}})
    calibration = Calibration(factor=factor)
    fitter = ContextFitter(
        "the system prompt", "what is in the notes?", [hit(1), hit(2)], turns(30), window=2048, reserve=256,
        calibration=calibration,
    )  # fmt: skip
    fitted = fitter.fit([], [tool], tools_tokens([tool]))
    breakdown = fitted.breakdown
    assert breakdown is not None and fitted.left_out_turns and fitted.tools
    assert breakdown.used == fitted.tokens == sum(breakdown.to_dict()[name] for name in PARTS)
    assert breakdown.free == 2048 - fitted.tokens and breakdown.window == 2048 and breakdown.reserve == 256
    assert breakdown.left_out  # turns were left out to fit
    assert breakdown.passages > 0 and breakdown.history > 0 and breakdown.tool_definitions > 0
    # What was sent, counted as a whole (messages, tool schemas, the request's markers), within 2 %.
    sent = REQUEST_OVERHEAD + sum(message_tokens(m) for m in fitted.messages) + tools_tokens(fitted.tools)
    assert abs(calibration.scale(sent) - breakdown.used) <= breakdown.used * 0.02


def test_the_meter_says_how_full_in_words_too() -> None:
    assert ContextBreakdown(window=2048, reserve=256, history=1420).meter() == "ctx 1,420/2,048 high"
    assert ContextBreakdown(window=2048, reserve=256, history=1000).meter() == "ctx 1,000/2,048"
    assert ContextBreakdown(window=2048, reserve=256, history=1700).meter() == "ctx 1,700/2,048 full"
    assert ContextBreakdown(window=2048, reserve=256, history=900, left_out=True).level == "full"


def test_a_breakdown_reads_back_and_an_older_transcript_has_none() -> None:
    breakdown = ContextBreakdown(window=4096, reserve=512, system_and_profile=80, passages=300, left_out=True)
    assert ContextBreakdown.from_dict(breakdown.to_dict()) == breakdown
    assert ContextBreakdown.from_dict({"window": 100, "future_part": 5}) == ContextBreakdown(window=100)
    assert ContextBreakdown.from_dict({"turns": 3}) is None
    old = [{"role": "assistant", "usage": {"prompt_tokens": 3}}, {"role": "notice", "kind": "context", "window": 9}]
    assert recorded(old) is None
    assert recorded([*old, {"role": "assistant", "usage": {"context": breakdown.to_dict()}}]) == breakdown
    lines = breakdown.lines()
    assert lines[0].startswith("system and profile") and "80" in lines[0]
    assert lines[-1].startswith("window") and "4,096" in lines[-1] and "(ctx 380/4,096 full)" in lines[-1]


# -- the loop --------------------------------------------------------------------------------------------
async def test_every_request_is_measured_and_the_turn_records_its_breakdown(
    session: Session, server: ScriptedServer
) -> None:
    configure(session, server, context_window=900, max_tokens=60)
    heard: list[LoopEvent] = []
    for n in range(1, 9):
        server.add(Reply(text=f"answer {n}: " + "blah " * 80, prompt_tokens=0))
        loop = TurnLoop(session, provider_for(server), on_event=heard.append)  # type: ignore[arg-type]
        outcome = await loop.run(f"question {n}: approvals " + "tell me more " * 12)
        await loop.provider.aclose()
        assert outcome.error is None, outcome.error
    measured = [event for event in heard if isinstance(event, ContextMeasured)]
    assert len(measured) == 8  # one request per turn, each measured
    entries = session.conversation.read().entries
    answers = [e for e in entries if e.get("role") == "assistant"]
    for answer, event in zip(answers, measured, strict=True):
        assert ContextBreakdown.from_dict(answer["usage"]["context"]) == event.breakdown
        assert event.breakdown.window == 900 and event.breakdown.reserve == 60
    last = measured[-1].breakdown
    assert last.used == outcome.context["prompt_tokens_estimated"] == outcome.context["breakdown"]["used"]
    assert last.used <= 900 - 60 and last.history > 0
    assert recorded(entries) == last
    reports: list[dict[str, Any]] = [e for e in entries if e.get("kind") == "context"]
    assert reports and all(ContextBreakdown.from_dict(r["breakdown"]) for r in reports)
    # "full" (left_out) means earlier turns or passages had to go; the tool schemas alone do not count.
    for report in reports:
        crowded = bool(report["left_out"]["turns"] or report["left_out"]["passages"])
        assert report["breakdown"]["left_out"] is crowded
    assert any(r["left_out"]["turns"] for r in reports)
