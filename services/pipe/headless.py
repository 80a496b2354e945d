"""One headless turn: what ``aries ask`` (and, later, plan runs) drive.

The turn is the ONE turn loop (``services.assistant.TurnLoop``) on a ``Session`` of the workspace
(an ephemeral one without a name), opened by ``Session.open(…, surface=Surface.ASK)``, with:

* :class:`HeadlessApprover` — a call the policy wants approved is denied unless its tool id was
  named with ``--approve``; the denial reaches the model as a structured ``PolicyDenied`` result,
  exactly as an operator's denial in the TUI would;
* a renderer that only collects (nothing is written to the terminal here): the tool calls, their
  decisions and the provider's failure, if any.

:func:`ask` returns an :class:`AskResult`: the spec's response JSON (``id``, ``answer``,
``provenance.local|cloud``, ``confidence.local|cloud``, ``logs_ref``) plus Aries' additions, and
the exit code: 0 ok, 3 a tool call of the turn was refused (by the policy, or for want of an
approval), or the provider's error (``ProviderError.exit_code``, 4) when the model gave no answer;
after a good local answer, the cloud step's problem: 3 the question was refused by the sanitizer's
allowlist (nothing sent), 2 the bridge is on but not configured, 4 the cloud did not answer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.assistant.confidence import strength
from services.errors import AriesError, InvalidInput
from services.pipe.request import AskRequest

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from services.assistant import LoopEvent, TurnOutcome
    from services.models.base import ModelEvent, ModelProvider, ModelRequest
    from services.session.session import Session
    from services.tools.calls import ApprovalDecision, ApprovalRequest

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_POLICY = 3
EXIT_PROVIDER = 4
CLOUD_MODES = ("off", "ask", "auto")
ID_NAMESPACE = uuid.UUID("6b1f7c1e-52a4-4d8e-9d3a-6a1e0c2f9a11")


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
    cloud_problem: str | None = None  # the cloud step refused/failed (the local answer stands)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


class _Watched:
    """The provider, passed through unchanged, remembering the error its last stream raised (the turn
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
        if hasattr(provider, "base_url"):  # the context window is known per provider, URL and model
            self.base_url = provider.base_url
        if hasattr(provider, "context_window"):
            self.context_window = provider.context_window

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        # Only the last stream's failure counts: the loop answers a server's overflow error by fitting
        # the request again, and a turn that then succeeds must not exit with that first error.
        self.failure = None
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
    """The cloud bridge's mode in force (the profile's ``cloud`` block, else the workspace setting
    ``cloud``); ``off`` when nothing is configured (the bridge is off by default) and when the
    configuration is invalid (the turn reports that error itself)."""
    from services.assistant.cloud import bridge_for

    try:
        return bridge_for(session).mode
    except AriesError:
        return "off"


def open_session(
    workspace_name: str | None,
    approver: HeadlessApprover,
    *,
    profile: str | None = None,
    conversation: str | None = "last",
    on_warning: Callable[[str], None] | None = None,
) -> Session:
    """``Session.open`` of the ``ask`` surface: a non-interactive session of the named workspace (an
    ephemeral one without a name), on its last conversation, a new one (``conversation=None``) or the
    one named. Close it with ``services.session.opening.close_session`` (the workspace too)."""
    from services.session.opening import Surface
    from services.session.session import Session

    return Session.open(
        workspace_name,
        surface=Surface.ASK,
        approver=approver,
        profile=profile,
        conversation=conversation,
        on_warning=on_warning,
    )


async def ask(
    session: Session,
    request: AskRequest,
    provider: ModelProvider,
    *,
    approver: HeadlessApprover,
    k: int,
    model_label: str | None = None,
    conversation: str | None = None,
    cloud: bool = False,
    only: tuple[str, frozenset[str]] | None = None,
) -> AskResult:
    """Run one turn for ``request`` and build the response (see the module docstring).

    Without ``conversation`` (the default) the turn starts a conversation of its own: no earlier
    dialogue reaches the model, so the same question under the same configuration gets the same
    prompt, and the workbench's own conversation is left as it was. With ``conversation`` (``last``,
    an id or a unique start of one) the turn is added to that stored conversation: the model sees
    its earlier turns (within its context window) and the turn continues its ids.

    ``cloud`` is the operator's yes for the bridge's ``ask`` mode (``--cloud``, or the request's
    ``settings.cloud_allowed``); ``auto`` mode needs no yes, ``off`` sends nothing whatever it says.

    The conversation is held for the turn: while another Aries (the TUI) holds it, the turn is refused
    before anything is sent or written (``ConversationBusy``, exit code 5, naming the holder's pid)."""
    _use_conversation(session, conversation)
    with _hold(session):
        return await _run_turn(session, request, provider, approver, k, model_label, cloud, only)


def _hold(session: Session) -> AbstractContextManager[object]:
    """The turn's conversation held for the turn (one writer at a time: ``services.conversation.hold``),
    unless the session already holds it; ``ConversationBusy`` (exit 5) names the holder's pid."""
    from services.conversation.hold import hold_conversation

    conversation_id = session.conversation.conversation_id
    if session.hold is not None and session.hold.conversation_id == conversation_id:
        return nullcontext()
    return hold_conversation(session.workspace.transcripts_dir, conversation_id, purpose="ask")


async def _run_turn(
    session: Session,
    request: AskRequest,
    provider: ModelProvider,
    approver: HeadlessApprover,
    k: int,
    model_label: str | None,
    cloud: bool,
    only: tuple[str, frozenset[str]] | None = None,
) -> AskResult:
    from services.assistant import Decided, ToolFinished, TurnLoop
    from services.bridge import headless_approver

    decisions: dict[str, Decided] = {}
    finished: list[ToolFinished] = []

    def on_event(event: LoopEvent) -> None:
        if isinstance(event, Decided):
            decisions[event.tool_call_id] = event
        elif isinstance(event, ToolFinished):
            finished.append(event)

    watched = _Watched(provider)
    loop = TurnLoop(
        session,
        watched,
        approver=approver,
        on_event=on_event,
        k=k,
        model_label=model_label,
        cloud_approve=headless_approver(cloud or request.cloud_allowed),
        only=only,
    )
    outcome = await loop.run(request.query)
    tool_calls = [_tool_call(done, decisions.get(done.tool_call_id)) for done in finished]
    result = AskResult(_response(session, request, outcome, loop.model_label, tool_calls), tool_calls=tool_calls)
    _set_exit(result, watched.failure, outcome)
    return result


def _has_conversation(session: Session) -> bool:
    """Whether the session's workspace holds a stored conversation (a new session's has no file yet)."""
    from services.workspace.transcripts import by_recency

    return bool(by_recency(session.workspace.transcripts_dir))


def _use_conversation(session: Session, conversation: str | None) -> None:
    """The turn's conversation: a new one (``None``), else the stored one named (``last``, an id)."""
    current = session.conversation
    if conversation is None:
        if current.transcript.path.exists():  # a new session's new conversation has no file yet
            session.new_conversation()
        return
    from services.conversation.history import resolve

    if resolve(session.workspace, conversation) != current.conversation_id:
        session.open_conversation(conversation)


def _local_provenance(session: Session, outcome: TurnOutcome) -> list[dict[str, Any]]:
    """The response's ``provenance.local``: each passage injected, its strength, whether it was cited."""
    from services.retrieval.relevance import relevance_for

    relevance = relevance_for(session.workspace)
    cited = set(outcome.citations)
    return [
        {
            "handle": str(hit.get("handle")),
            "source": str(hit.get("source_path", "")),
            "page": hit.get("page"),
            "section": hit.get("section"),
            "rank": int(hit.get("rank") or position),
            "score": float(hit.get("score") or 0.0),
            "bm25_score": hit.get("bm25_score"),
            "dense_score": hit.get("dense_score"),
            "strength": round(strength(hit, relevance.min_score, relevance.min_keyword, relevance.min_bm25), 4),
            "cited": str(hit.get("handle")) in cited,
        }
        for position, hit in enumerate(outcome.hits, start=1)
    ]


def _response(
    session: Session, request: AskRequest, outcome: TurnOutcome, model: str | None, tool_calls: list[dict[str, Any]]
) -> dict[str, Any]:
    """The spec's response JSON plus Aries' additions."""
    from services.assistant.cloud import CLOUD_CONFIDENCE

    step = outcome.cloud
    transcript = session.conversation.transcript.path
    cloud = step.provenance() if step is not None else []
    return {
        "id": request.id or str(uuid.uuid5(ID_NAMESPACE, f"{outcome.turn_id}\n{request.query}")),
        "answer": outcome.text,
        "provenance": {"local": _local_provenance(session, outcome), "cloud": cloud},
        "confidence": {
            "local": outcome.confidence,
            "cloud": CLOUD_CONFIDENCE if step is not None and step.reply is not None else 0.0,
            "inputs": outcome.confidence_inputs,
        },
        "logs_ref": f"{transcript}#{outcome.turn_id}",
        "turn_id": outcome.turn_id,
        "index": outcome.index,
        "model": model,
        "conversation_id": session.conversation.conversation_id,
        "finish_reason": outcome.finish_reason,
        "context": outcome.context,
        "cloud": _cloud_report(step, cloud_mode(session)),
        "tool_calls": tool_calls,
        "citation_checks": outcome.checks.as_json() if outcome.checks is not None else None,
    }


def _set_exit(result: AskResult, failure: AriesError | None, outcome: TurnOutcome) -> None:
    """The exit code, first match wins: the provider's failure, the turn's error, a refused tool call,
    then (after a good local answer) the cloud step's problem."""
    step = outcome.cloud
    if failure is not None:
        result.error = failure
        result.exit_code = failure.exit_code
    elif outcome.error is not None:
        result.error = AriesError(outcome.error)
        result.exit_code = 1
    elif any(call["status"] == "denied" for call in result.tool_calls):
        result.exit_code = EXIT_POLICY
    elif step is not None and step.exit_code:
        result.cloud_problem = f"cloud {step.status}: {step.reason}"
        result.exit_code = step.exit_code


def _cloud_report(step: Any, mode: str) -> dict[str, Any]:
    """The response's ``cloud`` block: the mode, what the step did and why (never the question)."""
    if step is None:
        return {"mode": mode, "status": "not_run"}
    report: dict[str, Any] = {"mode": step.mode, "status": step.status}
    if step.reason:
        report["reason"] = step.reason
    if step.reply is not None:
        report["request_id"] = step.reply.request_id
    return report


def _tool_call(done: Any, decided: Any) -> dict[str, Any]:
    rule = getattr(decided, "rule", None)
    if done.ok:
        status = "ok"
    elif done.summary.startswith("PolicyDenied") or getattr(decided, "action", None) == "deny":
        status = "denied"
    else:
        status = "error"
    return {
        "tool_id": done.tool_id,
        "call_id": done.call_id,
        "status": status,
        "rule": rule,
        "summary": done.summary,
        "from_text": bool(getattr(done, "from_text", False)),
    }


def run_ask(
    request: AskRequest,
    *,
    workspace: str | None = None,
    k: int | None = None,
    approve: Iterable[str] = (),
    profile: str | None = None,
    env: Mapping[str, str] | None = None,
    cloud: bool = False,
    conversation: str | None = None,
    on_warning: Callable[[str], None] | None = None,
    command: tuple[str, list[str]] | None = None,
) -> AskResult:
    """Open the workspace, resolve the model (``ARIES_MODEL``, else the workspace's, else offline),
    run :func:`ask`, close everything. ``on_warning`` hears, once, that a named workspace's settings
    need review (as every CLI command says it). Typed errors (bad input, config, an unknown ``conversation``)
    are raised before the turn. ``command``: ``(NAME, arguments)`` of a workspace command, whose
    expanded template is the question (``services.session.command_turn``)."""
    import os

    from services.assistant.loop import DEFAULT_K
    from services.models.config import make_provider, resolve_model
    from services.session.opening import close_session

    environ = dict(os.environ if env is None else env)
    approver = HeadlessApprover(check_tool_ids(approve))
    session = open_session(workspace, approver, profile=profile, conversation=conversation, on_warning=on_warning)
    if conversation == "last" and not _has_conversation(session):  # as `llm -c` does: start one, and say so
        conversation = None
        if on_warning is not None:
            on_warning(f"workspace {session.workspace.name} has no conversation yet: this starts a new one")
    try:
        only = None
        if command is not None:
            import dataclasses

            from services.session.command_turn import command_turn

            made = command_turn(session.in_force, *command)
            request, only = dataclasses.replace(request, query=made.text), made.only
        config = resolve_model(session.authority_setting("model"), environ)
        provider = make_provider(config)
        size = k if k is not None else request.k if request.k is not None else DEFAULT_K

        async def turn() -> AskResult:
            try:
                return await ask(
                    session,
                    request,
                    provider,
                    approver=approver,
                    k=size,
                    model_label=config.label,
                    cloud=cloud,
                    conversation=conversation,
                    only=only,
                )
            finally:
                await provider.aclose()
                await session.aclose()

        return asyncio.run(turn())
    finally:
        close_session(session)


__all__ = [
    "EXIT_OK",
    "EXIT_POLICY",
    "EXIT_PROVIDER",
    "EXIT_USAGE",
    "AskResult",
    "HeadlessApprover",
    "ask",
    "check_tool_ids",
    "cloud_mode",
    "open_session",
    "run_ask",
]
