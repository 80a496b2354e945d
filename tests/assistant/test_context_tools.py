"""The assistant uses ``builtin:context:find``/``search`` through the gateway: the scripted Ollama
server proposes the call, the real turn loop sends it to the session's gateway, the policy allows it
as READ_ONLY (no approval), the hits reach the model, and the audit store and the transcript record
it; under a profile that does not enable it, the same proposal is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.assistant import TurnLoop
from services.audit.log import AuditStore
from services.context.service import ContextService
from services.session.session import Session
from services.tools.calls import ApprovalDecision, ApprovalRequest
from services.tools.gateway import ToolGateway
from tests.assistant.conftest import provider_for
from tests.models.servers import Call, Reply, ScriptedServer

FIND = "builtin__context__find"
SEARCH = "builtin__context__search"


@pytest.fixture
def ollama() -> Iterator[ScriptedServer]:
    server = ScriptedServer("ollama").start()
    yield server
    server.stop()


@pytest.fixture
def ctx_session(session: Session, tmp_path: Path) -> Session:
    """The session's workspace with a context tree (two documents) added and indexed."""
    docs = tmp_path / "ctxdocs"
    docs.mkdir()
    (docs / "raft.md").write_text("# Raft\n\nRaft elects a leader with randomized election timeouts.\n")
    (docs / "paxos.md").write_text("# Paxos\n\nPaxos reaches consensus with proposers and acceptors.\n")
    service = ContextService(session.workspace, engine_factory=session.engine)
    service.add(str(docs))
    report = service.process_queue()
    assert not report.failed and report.remaining == 0
    service.close()
    return session


def audit_row(session: Session, call_id: str) -> dict[str, Any]:
    with AuditStore.for_workspace(session.workspace.root) as audit:
        row = audit.get_call(call_id)
    assert row is not None
    return row


def offered(server: ScriptedServer, n: int) -> set[str]:
    return {t["function"]["name"] for t in server.chat_requests()[n].get("tools") or []}


async def run(session: Session, server: ScriptedServer, text: str, asked: list[str]) -> Any:
    def approver(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request.tool_id)
        return ApprovalDecision.once()

    loop = TurnLoop(session, provider_for(server), approver=approver)  # type: ignore[arg-type]
    outcome = await loop.run(text)
    await loop.provider.aclose()
    return outcome


async def test_the_model_finds_in_the_context_tree_through_the_gateway(
    ctx_session: Session, ollama: ScriptedServer
) -> None:
    session = ctx_session
    session.use_profile("researcher")
    ollama.add(
        Reply(tool_calls=[Call(FIND, {"query": "leader election timeouts", "limit": 3})]),
        Reply(tool_calls=[Call(SEARCH, {"query": "consensus acceptors", "target_uri": "axiom://resources"})]),
        Reply(text="Raft uses randomized election timeouts."),
    )
    asked: list[str] = []
    outcome = await run(session, ollama, "how does raft elect a leader?", asked)
    assert outcome.error is None and outcome.text == "Raft uses randomized election timeouts."
    assert asked == []  # READ_ONLY: the policy allows it without asking anyone
    assert FIND in offered(ollama, 0) and SEARCH in offered(ollama, 0)
    # Audit: allowed by the read-only rule, ran, with the hits and the trace id in the result.
    find_id, search_id = outcome.tool_calls
    row = audit_row(session, find_id)
    assert row["tool_name"] == "builtin:context:find" and row["status"] == "success"
    assert row["rule_id"].endswith(".read_only") and row["tier"] == "READ_ONLY"
    assert audit_row(session, search_id)["status"] == "success"
    # Transcript: the tool entries carry the hits (URIs, scores, snippets) and the trace id.
    entries = [e for e in session.conversation.read().entries if e["role"] == "tool"]
    found, searched = (e["output"]["data"] for e in entries)
    assert found["hits"][0]["uri"] == "axiom://resources/ctxdocs/raft.md"
    assert found["hits"][0]["score"] > 0 and "randomized election" in found["hits"][0]["snippet"]
    assert searched["hits"][0]["uri"] == "axiom://resources/ctxdocs/paxos.md"
    # The trace is the persisted one.
    backend = session.gateway().backends["context"]
    assert backend.retriever().trace(found["trace_id"]).kind == "find"
    # The result reached the model.
    sent = json.dumps(ollama.chat_requests()[1]["messages"])
    assert "axiom://resources/ctxdocs/raft.md" in sent and found["trace_id"] in sent


async def test_a_profile_without_the_context_tools_refuses_them(ctx_session: Session, ollama: ScriptedServer) -> None:
    session = ctx_session
    session.use_profile("operator")  # enables fs and shell only
    ollama.add(Reply(tool_calls=[Call(FIND, {"query": "raft"})]), Reply(text="I cannot look it up."))
    asked: list[str] = []
    outcome = await run(session, ollama, "find raft", asked)
    assert asked == [] and FIND not in offered(ollama, 0)
    row = audit_row(session, outcome.tool_calls[0])
    assert row["status"] == "denied" and row["rule_id"] == "profile.operator"
    [entry] = [e for e in session.conversation.read().entries if e["role"] == "tool"]
    assert entry["status"] == "fail" and entry["output"]["error"]["type"] == "PolicyDenied"
    assert "PolicyDenied" in json.dumps(ollama.chat_requests()[1]["messages"])


def test_a_gateway_without_the_context_backend_says_so(session: Session) -> None:
    with ToolGateway(session.workspace) as gateway:
        result = gateway.execute_sync("builtin:context:find", {"query": "raft"})
    assert result.error is not None and result.error.type == "InvalidInput"
    assert "context service" in result.error.message
