"""The turn loop against the real engine (llama-cpp-python's server, Gemma 3 270M): a length stop,
a context window far smaller than the conversation, forced tool calls with whatever arguments the
model writes — each decided by the gateway — and the token estimate against the real tokenizer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.assistant import TurnLoop
from services.audit.log import AuditStore
from services.models.base import ModelOptions
from services.models.config import make_provider, resolve_model
from services.models.tokens import estimate_tokens
from services.models.window import CACHE_FILE, forget_all
from services.session.session import Session
from services.tools.calls import ApprovalDecision, ApprovalRequest
from tests.real_model.helpers import real_workspace
from tests.real_model.llama_server import LlamaServer

pytestmark = pytest.mark.timeout(600)


async def ask(session: Session, server: LlamaServer, alias: str, text: str, **loop: Any) -> Any:
    provider = make_provider(resolve_model(None, server.env(alias)))
    turn = TurnLoop(session, provider, **loop)
    try:
        return await turn.run(text)
    finally:
        await provider.aclose()


def entries(session: Session) -> list[dict[str, Any]]:
    return session.conversation.read().entries


async def test_a_length_stop_is_said_and_the_answer_kept(llama_server: LlamaServer) -> None:
    workspace = real_workspace("length", models={"openai:gemma": {"max_tokens": 8}})
    session = Session(workspace, interactive=False)
    try:
        outcome = await ask(session, llama_server, "gemma", "Write a long story about a lighthouse.")
    finally:
        await session.aclose()
    assert outcome.error is None and outcome.finish_reason == "length" and outcome.text.strip()
    notice = [e for e in entries(session) if e.get("title") == "length"]
    assert len(notice) == 1 and "max_tokens 8" in notice[0]["content"]
    answer = [e for e in entries(session) if e["role"] == "assistant"][-1]
    assert answer["content"] == outcome.text
    # llama-cpp-python streams no usage: the answer says what was estimated instead of "0 tokens in".
    assert answer["usage"]["prompt_tokens"] == 0 and answer["usage"]["prompt_tokens_estimated"] > 0


async def test_a_conversation_far_larger_than_the_window_never_errors(
    llama_server: LlamaServer, aries_home: Path
) -> None:
    """n_ctx 512, nothing configured: the first overflow (an empty stream from this server) is
    explained, the window learned, and every later request fits; each says what it left out."""
    forget_all()
    workspace = real_workspace("tiny", models={"openai:gemma-tiny": {"max_tokens": 12}})
    session = Session(workspace, interactive=False)
    outcomes = []
    try:
        for n in range(1, 13):
            question = f"Turn {n}: tell me about lighthouses, harbours and ships at night, in detail please."
            outcomes.append(await ask(session, llama_server, "gemma-tiny", question))
    finally:
        await session.aclose()
    assert [o.error for o in outcomes] == [None] * 12
    assert outcomes[-1].context["window"] == 512 and outcomes[-1].context["window_source"] == "learned"
    reports = [e for e in entries(session) if e.get("kind") == "context"]
    assert any("refused a request as larger than its context window (its window: 512" in r["content"] for r in reports)
    late = [r for r in reports if r.get("turn_id", "").endswith(("-t0011", "-t0012"))]
    assert late and all(r["left_out"]["turns"]["count"] >= 3 for r in late)
    cached = json.loads((aries_home / "cache" / CACHE_FILE).read_text())
    assert any(key.endswith(" gemma-tiny") and value["window"] == 512 for key, value in cached.items())
    # Nothing was cut silently: each request that left something out has its report.
    assert all(o.context["left_out"]["turns"] == 0 or any(r["turn_id"] == o.turn_id for r in reports) for o in outcomes)


async def test_forced_tool_calls_are_each_decided_by_the_gateway(llama_server: LlamaServer, tmp_path: Path) -> None:
    """chatml-function-calling with a forced tool_choice: the server's grammar makes the model call
    the tool, with whatever arguments it writes. Every call goes through the gateway: a typed result
    (ok, or the error's type), an audit row with the policy decision, nothing run outside the policy."""
    workspace = real_workspace("tools", models={"openai:gemma-tools": {"max_tokens": 32, "context_window": 4096}})
    outside = tmp_path / "outside.txt"
    asked: list[ApprovalRequest] = []

    def deny(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision.deny("the real-model lane approves nothing")

    session = Session(workspace, interactive=False)
    results = []
    try:
        for tool, question in (
            ("builtin__fs__read_text", "Read the file notes.txt and tell me what it says."),
            ("builtin__fs__write_text", f"Write the word hello into the file {outside}."),
            ("builtin__fs__list_dir", "List the files of the folder /etc."),
        ):
            outcome = await ask(
                session,
                llama_server,
                "gemma-tools",
                question,
                options=ModelOptions(tool_choice=tool, temperature=0.8, seed=11),
                max_steps=1,  # forced again at every step: one call a question is enough
                approver=deny,
            )
            results.append(outcome)
    finally:
        await session.aclose()
    assert all(o.error is None for o in results), [o.error for o in results]
    calls = [e for e in entries(session) if e["role"] == "tool"]
    assert len(calls) == 3  # the grammar forces the call
    with AuditStore.for_workspace(workspace.root) as audit:
        rows = {row["call_id"]: row for row in audit.calls(limit=100)}
    for call in calls:
        assert call["source"] == "assistant" and call["tool_call_id"]
        row = rows[call["call_id"]]  # every call has its audit row, with the decision
        assert row["decision"] in ("allow", "confirm", "deny") and row["rule_id"]
        output = call["output"]
        assert output["status"] in ("ok", "error", "denied") or "status" in output
        if call["status"] == "fail":
            assert output["error"]["type"]  # a typed error: PolicyDenied, InvalidInput, NotFound…
    # Writes needed an approval, which was refused; nothing was written anywhere.
    writes = [c for c in calls if c["tool_name"] == "builtin:fs:write_text"]
    assert writes and all(c["status"] == "fail" for c in writes)
    assert not outside.exists()
    assert all(r.tool_id == "builtin:fs:write_text" for r in asked)
    # The arguments are the model's own, passed on as written (e.g. a path with odd characters).
    assert all(isinstance(c["input"], dict | str) for c in calls)


def test_the_estimate_against_the_real_tokenizer(llama_server: LlamaServer) -> None:
    """The documented estimate (services/models/tokens.py): within 10 % of the real count for English
    prose, code, hex and ids; within 20 % for German; within a bound on base64 (which the server's
    own count corrects, see Calibration)."""
    import base64
    import uuid

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")[:12000]
    code = (root / "services" / "assistant" / "loop.py").read_text(encoding="utf-8")[:12000]
    ids = " ".join(str(uuid.UUID(int=n * 7919 + 12345)) for n in range(80))
    empty = llama_server.count_tokens("")  # the tokenizer's start marker
    for text in (readme, code, "9f8a7b6c5d4e3f2a1b0c" * 50, ids):
        actual = llama_server.count_tokens(text) - empty
        assert actual * 0.9 <= estimate_tokens(text) <= actual * 1.1, (actual, estimate_tokens(text), text[:40])
    german = "Die Würde des Menschen ist unantastbar. " * 40
    assert llama_server.count_tokens(german) * 0.8 <= estimate_tokens(german) <= llama_server.count_tokens(german) * 1.3
    noise = base64.b64encode(bytes(range(256)) * 8).decode()
    assert llama_server.count_tokens(noise) <= estimate_tokens(noise) * 1.35
