"""The context meter against llama.cpp's own count (issue 30 item 6): every request of a short
conversation through the real turn loop, the meter's total (what the header shows) against the prompt
tokens the server reports for that same request — before any calibration, since llama-cpp-python's
stream reports none. ``bench/meter_accuracy.py`` runs the long version and publishes the numbers."""

from __future__ import annotations

from typing import Any

import pytest

from bench.long_conversation import messages
from bench.meter_accuracy import Metered
from services.assistant import TurnLoop
from services.models.config import make_provider, resolve_model
from services.session.session import Session
from tests.real_model.helpers import real_workspace
from tests.real_model.llama_server import LlamaServer

pytestmark = pytest.mark.timeout(600)
TURNS = 8


async def metered_turns(session: Session, llama_server: LlamaServer, texts: list[str]) -> list[dict[str, Any]]:
    """``texts`` as turns: a row per request, the meter's total against the server's count
    (``bench/meter_accuracy.py``'s :class:`Metered`)."""
    config = resolve_model(None, llama_server.env("gemma"))
    metered = Metered(llama_server.base_url, lambda: make_provider(config))
    for n, text in enumerate(texts, 1):
        provider = metered.provider()
        outcome = await TurnLoop(session, provider, on_event=provider.on_event).run(text)
        await provider.aclose()
        await metered.after(n, outcome)
        assert outcome.error is None
    return metered.rows


async def test_the_meter_is_within_reach_of_the_servers_count(llama_server: LlamaServer) -> None:
    # no tools offered here: the next test is the template that leaves them out
    settings = {"openai:gemma": {"max_tokens": 24, "context_window": 2048}}
    session = Session(real_workspace("meter", models=settings, tools=()), interactive=False)
    try:
        rows = await metered_turns(session, llama_server, messages(2)[:TURNS])
    finally:
        await session.aclose()
    errors = [row["error_pct"] / 100 for row in rows]
    assert len(rows) == TURNS
    assert abs(errors[0]) <= 0.15, errors  # the first request, before anything was learned
    assert all(abs(error) <= 0.08 for error in errors), errors
    assert abs(sum(errors) / len(errors)) <= 0.05, errors


async def test_a_template_that_leaves_the_tools_out_is_found_and_not_counted(llama_server: LlamaServer) -> None:
    """Gemma's template on llama-cpp-python drops ``tools``, and its stream counts nothing: Aries asks
    the server once (two one-token prompts), says so in one notice, and the meter stops counting the
    schemas — the second request, which carries them, is within reach of the server's count."""
    from services.models import template
    from services.models.window import cache_key

    settings = {"openai:gemma": {"max_tokens": 16, "context_window": 2048}}
    session = Session(real_workspace("template", models=settings), interactive=False)
    asks = ["Read the file notes.txt for me.", "List the files in this folder, then read notes.txt."]
    try:
        rows = await metered_turns(session, llama_server, asks)
        notices = [e for e in session.conversation.read().entries if e.get("title") == "tools"]
    finally:
        await session.aclose()
    probe = make_provider(resolve_model(None, llama_server.env("gemma")))
    assert template.known(cache_key(probe.name, str(probe.base_url), probe.model)) is False
    assert any("does not show" in str(notice["content"]) for notice in notices)
    assert rows[1]["tools"] and abs(rows[1]["error_pct"]) <= 15, rows  # the tools are sent, and not counted
