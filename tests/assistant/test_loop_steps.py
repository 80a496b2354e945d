"""The turn loop in steps: the tool offer kept on the registry that lists the tools (not in a module
dict keyed by ``id()``), forgotten when the tools or the binding change; a cancel names its phase."""

from __future__ import annotations

import asyncio

import pytest

from services.assistant import Cancelled, LoopEvent, TextDelta, TurnLoop
from services.assistant.events import Phase
from services.models.offline import OfflineProvider
from services.models.tokens import tools_tokens
from services.session.session import Session
from services.tools.builtin import BuiltinProvider
from services.tools.calls import approve_all
from services.tools.registry import ToolRegistry
from tests.assistant.conftest import provider_for
from tests.models.servers import Reply, ScriptedServer

NO_SHELL_POLICY = (
    "version: 1\nproviders: {builtin: {enabled: true}}\ntool_classes: {fs: enabled, shell: disabled}\n"
    "filesystem: {allowed_roots: ['${workspace}']}\n"
)


def test_the_tool_offer_is_kept_on_the_registry_and_forgotten_on_rebind(session: Session) -> None:
    loop = TurnLoop(session, OfflineProvider())
    first = loop.tool_offer()
    assert loop.tool_offer() is first  # built once for this registry and policy
    assert first.tokens == tools_tokens(first.schemas) > 0
    assert "builtin:fs:read_text" in first.names and "builtin:shell:run" in first.names

    gateway = session.gateway()
    gateway.rebind(gateway.policy, mode=gateway.mode)  # the same policy, bound again
    again = loop.tool_offer()
    assert again is not first  # built again
    assert again.schemas == first.schemas and dict(again.names.items()) == dict(first.names.items())

    (session.workspace.root / "policy.yaml").write_text(NO_SHELL_POLICY, encoding="utf-8")
    session.reload_policy()
    narrowed = loop.tool_offer()
    assert "builtin:fs:read_text" in narrowed.names and "builtin:shell:run" not in narrowed.names
    assert 0 < narrowed.tokens == tools_tokens(narrowed.schemas) < first.tokens


def test_a_value_kept_on_the_registry_follows_the_tools_registered() -> None:
    registry = ToolRegistry()
    assert registry.memo("count", lambda: len(registry.list())) == 0
    assert registry.memo("count", lambda: -1) == 0  # kept
    registry.add_provider(BuiltinProvider())  # as an MCP server's tools are, when loaded on demand
    assert registry.memo("count", lambda: len(registry.list())) == len(registry.list()) > 0


async def test_a_cancel_names_the_phase_it_interrupted(session: Session, server: ScriptedServer) -> None:
    server.add(Reply(text="partial answer that stalls", chunk_size=8, stall_after=2))
    events: list[LoopEvent] = []
    loop = TurnLoop(session, provider_for(server), approver=approve_all, on_event=events.append)  # type: ignore[arg-type]
    task = asyncio.create_task(loop.run("say something"))
    for _ in range(200):
        await asyncio.sleep(0.02)
        if any(isinstance(e, TextDelta) for e in events):
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await loop.provider.aclose()
    cancelled = events[-1]
    assert isinstance(cancelled, Cancelled) and cancelled.where is Phase.STREAMING and cancelled.where == "streaming"
    notice = session.conversation.read().entries[-1]
    assert notice["content"].startswith("Turn cancelled by the operator while the model was answering. Text so far: ")
