"""``aries ask --json``'s ``context.breakdown`` (issue 30 item 6): the last request part by part, valid
against the shipped response schema, adding up to what Aries counted, against the scripted Ollama
server on loopback (a real subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

from services.models.window_budget import PARTS, ContextBreakdown
from services.pipe.request import RESPONSE_SCHEMA
from tests.models.servers import Reply, ScriptedServer
from tests.pipe.test_ask_cli import QUESTION, aries, demo, model_env, ollama, valid

__all__ = ["demo", "ollama"]  # the fixtures, used by name


def test_ask_json_gives_the_context_breakdown(demo: Path, aries_home: Path, ollama: ScriptedServer) -> None:
    ollama.num_ctx = 4096
    ollama.add(Reply(text="Tantivy is a Rust search library.", prompt_tokens=0))
    done = aries("-w", "demo", "ask", "--json", QUESTION, home=aries_home, **model_env(ollama))
    assert done.returncode == 0, done.stderr
    response = valid(json.loads(done.stdout), RESPONSE_SCHEMA)
    context = response["context"]
    parts = context["breakdown"]
    assert parts["window"] == context["window"] == 4096
    assert parts["used"] == sum(parts[name] for name in PARTS) == context["prompt_tokens_estimated"]
    assert parts["free"] == 4096 - parts["used"]
    assert parts["system_and_profile"] > 0 and parts["current_message"] > 0 and parts["passages"] > 0
    assert parts["history"] == 0 and parts["pins"] == 0 and parts["brought_back"] == 0
    # 4,096 tokens cannot hold the thirteen tool schemas (≈4,700): those that match the question are
    # offered within the tools' budget (services/assistant/tool_offer.py), and the meter counts them.
    offered = context["tools_offered"]
    assert 0 < len(offered["offered"]) < 13 and offered["sent"] and offered["tokens"] <= offered["budget"] <= 1200
    assert 0 < parts["tool_definitions"] <= 1200 and parts["left_out"] is False
    assert context["left_out"]["tools"] == 0 and context["left_out"]["turns"] == 0
    # The same breakdown is recorded with the turn's answer in the transcript.
    transcript = Path(response["logs_ref"].split("#")[0])
    answers = [json.loads(line) for line in transcript.read_text().splitlines() if '"role": "assistant"' in line]
    assert ContextBreakdown.from_dict(answers[-1]["usage"]["context"]) == ContextBreakdown.from_dict(parts)


def test_the_schema_refuses_a_breakdown_with_a_stray_or_a_missing_part() -> None:
    """The schema checks the breakdown's parts: a missing part or a stray one is an error."""
    from services.pipe.request import schema_errors

    breakdown = ContextBreakdown(window=10).to_dict()
    response = {"context": {"breakdown": {**breakdown, "extra": 1}}}
    assert any("extra" in error for error in schema_errors(response, RESPONSE_SCHEMA))
    del breakdown["free"]
    assert any("free" in error for error in schema_errors({"context": {"breakdown": breakdown}}, RESPONSE_SCHEMA))
