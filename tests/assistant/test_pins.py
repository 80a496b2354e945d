"""Pins (issue 30 item 3): a pinned turn is sent in every request, in its place, never left out; the
meter's ``pins`` part says what it costs; a pin that cannot fit says so before the request is sent."""

from __future__ import annotations

import pytest

from services.assistant.context import ContextFitter, ContextTooSmall
from tests.assistant.test_context_window import turns


def _users(fitted: object) -> list[str]:
    return [m.content.split(" ", 2)[1] for m in fitted.messages if m.role == "user"][:-1]  # type: ignore[attr-defined]


def test_a_pinned_turn_is_never_left_out_and_its_cost_is_shown() -> None:
    history = turns(20)
    plain = ContextFitter("system", "the question", [], history, window=1000, reserve=100).fit([], [], 0)
    assert "c-t0002" in plain.left_out_turns
    pinned = ContextFitter(
        "system", "the question", [], history, window=1000, reserve=100, pinned=frozenset({"c-t0002"})
    ).fit([], [], 0)
    assert "c-t0002" not in pinned.left_out_turns
    sent = _users(pinned)
    assert sent[0] == "2" and sent[1:] == sorted(sent[1:], key=int) and int(sent[1]) > 2  # in its place, first
    assert pinned.breakdown is not None and pinned.breakdown.pins > 0
    assert plain.breakdown is not None and plain.breakdown.pins == 0
    assert pinned.breakdown.used == pinned.tokens


def test_a_pin_that_cannot_fit_says_so_before_the_request() -> None:
    history = turns(6, words=200)
    fitter = ContextFitter(
        "system", "the question", [], history, window=500, reserve=100, pinned=frozenset({"c-t0001", "c-t0003"})
    )
    with pytest.raises(ContextTooSmall, match=r"the pinned turn\(s\) 1, 3 \(about \d+ tokens\) do not fit.*/unpin"):
        fitter.fit([], [], 0)


async def test_a_pinned_turn_reaches_the_model_in_a_long_conversation(session, server) -> None:  # type: ignore[no-untyped-def]
    """The turn loop reads the pins of the conversation (``/pin``): turn 1, pinned, is in the history of
    the last request although the window left out every other old turn; ``usage.context`` counts it."""
    from services.assistant import TurnLoop
    from services.conversation.marks import pin
    from tests.assistant.conftest import provider_for
    from tests.assistant.test_context_window import configure
    from tests.models.servers import Reply

    configure(session, server, context_window=700, max_tokens=50)
    outcome = None
    for n in range(1, 11):
        server.add(Reply(text=f"answer number {n}: " + "blah " * 30, prompt_tokens=0))
        loop = TurnLoop(session, provider_for(server))
        outcome = await loop.run(f"question number {n}: " + "tell me more " * 10)
        await loop.provider.aclose()
        assert outcome.error is None, outcome.error
        if n == 1:
            pin(session.conversation, 1)
    history = server.chat_requests()[-1]["messages"][1:-1]
    assert any("answer number 1:" in str(m["content"]) for m in history)  # pinned: sent as history
    assert not any("answer number 2:" in str(m["content"]) for m in history)  # not pinned: left out
    assert outcome is not None and outcome.context["breakdown"]["pins"] > 0
