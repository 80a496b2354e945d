"""One headless turn: what ``aries ask`` (and, later, plan runs) drive.

The turn is the ONE turn loop (``services.assistant.TurnLoop``) on a ``Session`` of the workspace
(an ephemeral one without a name), with:

* :class:`HeadlessApprover` — a call the policy wants approved is denied unless its tool id was
  named with ``--approve``; the denial reaches the model as a structured ``PolicyDenied`` result,
  exactly as an operator's denial in the TUI would;
* a renderer that only collects (nothing is written to the terminal here): the tool calls, their
  decisions and the provider's failure, if any.

:func:`ask` returns an :class:`AskResult`: the spec's response JSON (``id``, ``answer``,
``provenance.local|cloud``, ``confidence.local|cloud``, ``logs_ref``) plus Aries' additions, and
the exit code: 0 ok, 3 a tool call of the turn was refused (by the policy, or for want of an
approval), or the provider's error (``ProviderError.exit_code``, 4) when the model gave no answer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.errors import AriesError, ConfigError, InvalidInput
from services.pipe.confidence import local_confidence, strength
from services.pipe.request import AskRequest

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from services.assistant import LoopEvent
    from services.models.base import ModelEvent, ModelProvider, ModelRequest
    from services.session import Session
    from services.tools.calls import ApprovalDecision, ApprovalRequest

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_POLICY = 3
EXIT_PROVIDER = 4
CLOUD_MODES = ("off", "ask", "auto")
ID_NAMESPACE = uuid.UUID("6b1f7c1e-52a4-4d8e-9d3a-6a1e0c2f9a11")


class ProfilesUnavailable(ConfigError):
    """``--profile`` before profiles exist in this build."""

    code = "profiles_unavailable"


class HeadlessApprover:
    """Approves exactly the tools named (``--approve TOOL``), once per call; denies the rest."""

    def __init__(self, approved: Iterable[str] = ()) -> None:
        self.approved = frozenset(approved)
        self.asked: list[tuple[str, bool]] = []  # (tool id, approved), in order

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        from services.tools.calls import ApprovalDecision

        allowed = request.tool_id in self.approved
        self.asked.append((request.tool_id, allowed))
        if allowed:
            return ApprovalDecision.once()
        return ApprovalDecision.deny(
            f"headless mode: {request.tool_id} needs approval and nobody can give it; "
            f"the operator may rerun with --approve {request.tool_id}"
        )


def check_tool_ids(tool_ids: Iterable[str]) -> list[str]:
    """The ``--approve`` tool ids, each checked against the registry (InvalidInput for an unknown one)."""
    from services.tools.builtin import default_registry

    registry = default_registry()
    out = []
    for tool_id in tool_ids:
        if tool_id not in registry:
            raise InvalidInput(f"--approve {tool_id}: no such tool; see: aries tool list")
        out.append(tool_id)
    return out


@dataclass
class AskResult:
    response: dict[str, Any]
    exit_code: int = EXIT_OK
    error: AriesError | None = None  # the provider's failure (the answer is then empty)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


class _Watched:
    """The provider, passed through unchanged, remembering the error its stream raised (the turn
    loop records it as a notice and goes on; ``aries ask`` needs its type for the exit code)."""

    def __init__(self, provider: ModelProvider) -> None:
        self.inner = provider
        self.name = provider.name
        self.model = provider.model
        self.failure: AriesError | None = None
        if hasattr(provider, "supports_tools"):
            self.supports_tools = provider.supports_tools
        if hasattr(provider, "provenance"):
            self.provenance = provider.provenance

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        try:
            async for event in self.inner.stream(request):
                yield event
        except AriesError as exc:
            self.failure = exc
            raise

    async def list_models(self) -> list[str]:
        return await self.inner.list_models()

    async def aclose(self) -> None:
        await self.inner.aclose()


def cloud_mode(session: Session) -> str:
    """The cloud bridge's mode from the workspace setting ``cloud`` (a mode, or ``{mode: …}``);
    ``off`` when nothing is configured (the bridge is off by default)."""
    value = session.workspace.setting("cloud")
    if isinstance(value, Mapping):
        value = value.get("mode")
    return str(value) if value in CLOUD_MODES else "off"


def open_session(workspace_name: str | None, approver: HeadlessApprover, *, profile: str | None = None) -> Session:
    """A non-interactive session of the named workspace (an ephemeral one without a name)."""
    import inspect

    from services.session import Session
    from services.workspaces import WorkspaceManager, ephemeral_workspace

    extra: dict[str, Any] = {}
    if profile is not None:
        if "profile" not in inspect.signature(Session).parameters:
            raise ProfilesUnavailable(f"--profile {profile}: profiles are not available in this build yet")
        extra["profile"] = profile
    workspace = WorkspaceManager().open(workspace_name)[0] if workspace_name else ephemeral_workspace()
    try:
        return Session(workspace, source="cli", interactive=False, approver=approver, **extra)
    except BaseException:
        workspace.close()
        raise


async def ask(
    session: Session,
    request: AskRequest,
    provider: ModelProvider,
    *,
    approver: HeadlessApprover,
    k: int,
    model_label: str | None = None,
    new_conversation: bool = True,
) -> AskResult:
    """Run one turn for ``request`` and build the response (see the module docstring).

    With ``new_conversation`` (the default) the turn starts a conversation of its own: no earlier
    dialogue reaches the model, so the same question under the same configuration gets the same
    prompt, and the workbench's own conversation is left as it was."""
    from services.answers import relevance_for
    from services.assistant import Decided, ToolFinished, TurnLoop

    decisions: dict[str, Decided] = {}
    finished: list[ToolFinished] = []

    def on_event(event: LoopEvent) -> None:
        if isinstance(event, Decided):
            decisions[event.tool_call_id] = event
        elif isinstance(event, ToolFinished):
            finished.append(event)

    if new_conversation:
        session.new_conversation()
    watched = _Watched(provider)
    loop = TurnLoop(session, watched, approver=approver, on_event=on_event, k=k, model_label=model_label)
    outcome = await loop.run(request.query)
    tool_calls = [_tool_call(done, decisions.get(done.tool_call_id)) for done in finished]
    relevance = relevance_for(session.workspace)
    confidence, inputs = local_confidence(
        outcome.hits, outcome.citations, min_score=relevance.min_score, min_bm25=relevance.min_bm25
    )
    cited = set(outcome.citations)
    local = [
        {
            "handle": str(hit.get("handle")),
            "source": str(hit.get("source_path", "")),
            "page": hit.get("page"),
            "section": hit.get("section"),
            "rank": int(hit.get("rank") or position),
            "score": float(hit.get("score") or 0.0),
            "bm25_score": hit.get("bm25_score"),
            "dense_score": hit.get("dense_score"),
            "strength": round(strength(hit, relevance.min_score, relevance.min_bm25), 4),
            "cited": str(hit.get("handle")) in cited,
        }
        for position, hit in enumerate(outcome.hits, start=1)
    ]
    transcript = session.conversation.transcript.path
    response: dict[str, Any] = {
        "id": request.id or str(uuid.uuid5(ID_NAMESPACE, f"{outcome.turn_id}\n{request.query}")),
        "answer": outcome.text,
        "provenance": {"local": local, "cloud": []},
        "confidence": {"local": confidence, "cloud": 0.0, "inputs": inputs},
        "logs_ref": f"{transcript}#{outcome.turn_id}",
        "turn_id": outcome.turn_id,
        "index": outcome.index,
        "model": loop.model_label,
        "cloud": {"mode": cloud_mode(session)},
        "tool_calls": tool_calls,
    }
    result = AskResult(response, tool_calls=tool_calls)
    if watched.failure is not None:
        result.error = watched.failure
        result.exit_code = watched.failure.exit_code
    elif outcome.error is not None:
        result.error = AriesError(outcome.error)
        result.exit_code = 1
    elif any(call["status"] == "denied" for call in tool_calls):
        result.exit_code = EXIT_POLICY
    return result


def _tool_call(done: Any, decided: Any) -> dict[str, Any]:
    rule = getattr(decided, "rule", None)
    if done.ok:
        status = "ok"
    elif done.summary.startswith("PolicyDenied") or getattr(decided, "action", None) == "deny":
        status = "denied"
    else:
        status = "error"
    return {"tool_id": done.tool_id, "call_id": done.call_id, "status": status, "rule": rule, "summary": done.summary}


def run_ask(
    request: AskRequest,
    *,
    workspace: str | None = None,
    k: int | None = None,
    approve: Iterable[str] = (),
    profile: str | None = None,
    env: Mapping[str, str] | None = None,
) -> AskResult:
    """Open the workspace, resolve the model (``ARIES_MODEL``, else the workspace's, else offline),
    run :func:`ask`, close everything. Typed errors (bad input, config) are raised before the turn."""
    import os

    from services.assistant.loop import DEFAULT_K
    from services.models.config import make_provider, resolve_model

    environ = dict(os.environ if env is None else env)
    approver = HeadlessApprover(check_tool_ids(approve))
    session = open_session(workspace, approver, profile=profile)
    try:
        config = resolve_model(session.workspace.setting("model"), environ)
        provider = make_provider(config)
        size = k if k is not None else request.k if request.k is not None else DEFAULT_K

        async def turn() -> AskResult:
            try:
                return await ask(session, request, provider, approver=approver, k=size, model_label=config.label)
            finally:
                await provider.aclose()
                await session.aclose()

        return asyncio.run(turn())
    finally:
        if not session.closed:
            session.close()
        session.workspace.close()


__all__ = [
    "EXIT_OK",
    "EXIT_POLICY",
    "EXIT_PROVIDER",
    "EXIT_USAGE",
    "AskResult",
    "HeadlessApprover",
    "ProfilesUnavailable",
    "ask",
    "check_tool_ids",
    "cloud_mode",
    "open_session",
    "run_ask",
]
