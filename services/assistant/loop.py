"""The turn loop. See the package docstring for the flow; this module is the one implementation.

Every tool call the model asks for goes through ``Session.call_tool`` — the one gateway, with the
approver this loop was given — and is recorded there (audit row + transcript event, with the turn,
step and the model's call id). Denials and schema errors go back to the model as structured results.
A cancel (the caller cancels the task running ``run``) is recorded as a notice with whatever text had
streamed, then passed on; no half-written line is left behind because every record is one whole line.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.assistant.context import (
    ContextFitter,
    answer_reserve,
    history_from_entries,
    profile_system_prompt,
    tool_result_limit,
    tool_result_text,
)
from services.assistant.events import (
    Cancelled,
    CloudResult,
    Decided,
    Done,
    Failed,
    LoopEvent,
    Retrieved,
    SchemaInvalid,
    TextDelta,
    ToolFinished,
    ToolProposed,
    UsageReport,
)
from services.assistant.structured import MAX_RETRIES, retry_instruction
from services.assistant.turn_window import MAX_REFITS, TurnWindow
from services.clock import monotonic
from services.conversation import AssistantAnswer, Notice, RetrievalSet, UserMessage
from services.errors import AriesError

if TYPE_CHECKING:
    from services.assistant.cloud import CloudStep
    from services.bridge import Approve
    from services.models.base import ChatMessage, ModelOptions, ModelProvider, ToolCall, ToolSchema
    from services.models.toolnames import ToolNameMap
    from services.profiles import ActiveProfile
    from services.session import Session
    from services.tools.calls import Approver

DEFAULT_MAX_STEPS = 6
DEFAULT_K = 5


@dataclass
class TurnOutcome:
    turn_id: str
    text: str = ""
    index: str | None = None
    hits: list[dict[str, Any]] = field(default_factory=list)
    citations: list[str] = field(default_factory=list)
    steps: int = 0
    tool_calls: list[str] = field(default_factory=list)  # audit call ids, in order
    error: str | None = None
    cancelled: bool = False
    usage: dict[str, Any] = field(default_factory=dict)
    profile: str | None = None
    structured: Any = None  # the parsed answer, when the profile has an output_schema it satisfies
    schema_error: str | None = None  # the last validation failure (None: valid, or no schema)
    confidence: float = 0.0  # confidence.local (services.assistant.confidence)
    confidence_inputs: dict[str, Any] = field(default_factory=dict)
    cloud: CloudStep | None = None  # the cloud step (None: the turn ended before it)
    context: dict[str, Any] = field(default_factory=dict)  # window, its source, the prompt as estimated
    finish_reason: str | None = None  # the last model step's: stop, length (cut short), tool_calls…


class TurnLoop:
    def __init__(
        self,
        session: Session,
        provider: ModelProvider,
        *,
        approver: Approver | None = None,
        on_event: Callable[[LoopEvent], object] | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        k: int | None = None,
        budget_tokens: int | None = None,
        options: ModelOptions | None = None,
        model_label: str | None = None,
        cloud_approve: Approve | None = None,
    ) -> None:
        self.session = session
        self.provider = provider
        self.approver = approver
        self.on_event = on_event
        self.max_steps = max_steps
        self.k = k  # None: the profile's retrieval.k (DEFAULT_K without a profile)
        self.budget_tokens = budget_tokens  # a context window that overrides every other source
        self.options = options
        self.cloud_approve = cloud_approve  # None: ask-mode cloud questions are declined
        self.model_label = model_label or (
            provider.name if provider.name == "offline" else f"{provider.name}:{provider.model}"
        )

    def _emit(self, event: LoopEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    # -- the tools offered ---------------------------------------------------------------------
    def offered_tools(self) -> tuple[list[ToolSchema], ToolNameMap]:
        """Exactly the tools the policy in force enables, with their registry schemas (built once per
        registry and policy)."""
        gateway = self.session.gateway()
        key = (id(gateway.registry), gateway.policy.hash, len(gateway.registry.list()))
        cached = _OFFERED.get(key)
        if cached is None:
            cached = _OFFERED[key] = _offer(gateway)
        return cached

    # -- one turn --------------------------------------------------------------------------------
    async def run(self, text: str, *, query: str | None = None) -> TurnOutcome:
        """One turn for the message ``text``; retrieval searches ``query`` when given (the message as
        typed, without the text of files attached to it), else ``text``."""
        conversation = self.session.conversation
        turn_id = conversation.new_turn()
        outcome = TurnOutcome(turn_id)
        started = monotonic()
        where = "retrieval"
        streamed = ""
        prompt_tokens = completion_tokens = 0
        try:
            profile = self.session.profile()  # None when it cannot be loaded (reported by the session)
            outcome.profile = self.session.profile_name
            schema = profile.output_schema if profile is not None else None
            retries = 0
            conversation.record(UserMessage(text=text, turn_id=turn_id, step=0))
            query = query or text
            hits, index = await self._retrieve(query, turn_id, profile)
            outcome.index = index
            offers_tools = getattr(self.provider, "supports_tools", self.provider.name != "offline")
            if offers_tools and self.session.gateway().mcp is not None:
                # Enabled MCP servers start here, off the event loop, so their tools can be offered.
                await asyncio.to_thread(self.session.gateway().registry.load_all)
            tools, names = self.offered_tools() if offers_tools else ([], None)
            from services.models.base import (
                ChatMessage,
                ContextOverflow,
                ModelOptions,
                ModelRequest,
                ToolCallEvent,
                Usage,
            )
            from services.models.base import Done as ModelDone
            from services.models.base import TextDelta as ModelText

            options = self.options or ModelOptions()
            if options.temperature is None and profile is not None and profile.model.temperature is not None:
                options = dataclasses.replace(options, temperature=profile.model.temperature)
            windowing = TurnWindow(self.session, self.provider, self.model_label, self.budget_tokens)
            window, options = await windowing.open(options)
            history = history_from_entries(conversation.dialogue(), turn_id)
            system = profile_system_prompt(profile.system_prompt if profile is not None else None)
            fitter = ContextFitter(
                system,
                text,
                hits,
                history,
                window=window.tokens,
                reserve=answer_reserve(window.tokens, options.max_tokens),
                calibration=window.calibration,
                label=self.model_label,
            )
            fitted = fitter.fit([], tools, _tools_cost(tools))
            outcome.hits = fitted.kept_hits
            if index is not None:
                handles = [str(h.get("handle")) for h in fitted.kept_hits]
                conversation.record(RetrievalSet(query=query, index=index, handles=handles, turn_id=turn_id, step=1))
            reported = windowing.report(fitted, window, fitter, turn_id, None, None)
            self._emit(Retrieved(turn_id, query, index, fitted.kept_hits, fitted.left_out_handles))
            steps: list[ChatMessage] = []
            outcome.context = {"window": window.tokens, "window_source": window.source}

            for step in range(1, self.max_steps + 1):
                outcome.steps = step
                where = "streaming"
                streamed = ""
                calls: list[ToolCall] = []
                finish = "stop"
                if offers_tools:  # asked each step: a profile switch mid-turn changes them at once
                    tools, names = self.offered_tools()
                refit: str | None = None  # why this step is fitted again (a server's overflow error)
                for attempt in range(MAX_REFITS + 1):
                    fitted = fitter.fit(steps, tools, _tools_cost(tools))
                    reported = windowing.report(fitted, window, fitter, turn_id, reported, refit)
                    request = ModelRequest(
                        messages=fitted.messages,
                        tools=fitted.tools,
                        options=options,
                        retrieved=fitted.kept_hits,
                        index=index,
                        output_schema=schema,
                    )
                    try:
                        async for event in self.provider.stream(request):
                            if isinstance(event, ModelText):
                                streamed += event.text
                                self._emit(TextDelta(turn_id, step, event.text))
                            elif isinstance(event, ToolCallEvent):
                                calls.append(event.call)
                            elif isinstance(event, Usage):
                                prompt_tokens += event.prompt_tokens
                                completion_tokens += event.completion_tokens
                                window.calibration.observe(fitted.estimated, event.prompt_tokens)
                            elif isinstance(event, ModelDone):
                                finish = event.finish_reason
                        outcome.context["window"], outcome.context["window_source"] = window.tokens, window.source
                        outcome.context["prompt_tokens_estimated"] = fitted.tokens
                        outcome.context["left_out"] = {
                            "turns": len(fitted.left_out_turns),
                            "passages": list(fitted.left_out_handles),
                            "tools": len(fitted.left_out_tools),
                        }
                        break
                    except ContextOverflow as exc:
                        if streamed or calls or attempt == MAX_REFITS:
                            raise
                        refit = windowing.learn(exc, fitted, window, fitter, options)
                outcome.finish_reason = finish
                if finish == "length":
                    windowing.cut_short(turn_id, step, options, window.tokens)
                if not calls:
                    outcome.text = streamed
                    if schema is not None and self._check(outcome, schema, step, retries < MAX_RETRIES):
                        retries += 1
                        steps.append(ChatMessage(role="assistant", content=streamed))
                        steps.append(ChatMessage(role="user", content=retry_instruction(str(outcome.schema_error))))
                        continue
                    break
                steps.append(ChatMessage(role="assistant", content=streamed, tool_calls=calls))
                where = "tool"
                limit = tool_result_limit(window.tokens - fitter.reserve)
                for call in calls:
                    steps.append(await self._tool_call(call, names, turn_id, step, outcome, limit))
                    where = "tool"
            else:
                outcome.text = streamed
                conversation.record(
                    Notice(
                        text=f"The turn stopped after {self.max_steps} model steps (max_steps).",
                        level="warning",
                        title="assistant",
                        turn_id=turn_id,
                    )
                )
            outcome.citations = [str(h.get("handle")) for h in outcome.hits if str(h.get("handle")) in outcome.text]
            elapsed_ms = round((monotonic() - started) * 1000, 1)
            outcome.usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "elapsed_ms": elapsed_ms,
                "steps": outcome.steps,
            }
            counted = self.provider.name != "offline"  # the offline provider has no model to count for
            if counted and not prompt_tokens and "prompt_tokens_estimated" in outcome.context:
                # the server did not count (llama-cpp-python's stream): say what was estimated
                outcome.usage["prompt_tokens_estimated"] = outcome.context["prompt_tokens_estimated"]
            conversation.record(
                AssistantAnswer(
                    text=outcome.text,
                    provider=self.provider.name,
                    provenance=str(getattr(self.provider, "provenance", "local")),
                    model=self.model_label,
                    citations=outcome.citations,
                    usage=outcome.usage,
                    turn_id=turn_id,
                    step=outcome.steps + 1,
                )
            )
            estimated = int(outcome.context.get("prompt_tokens_estimated") or 0) if counted else 0
            self._emit(UsageReport(turn_id, prompt_tokens, completion_tokens, elapsed_ms, outcome.steps, estimated))
            self._emit(Done(turn_id, outcome.text, outcome.citations))
            where = "cloud"
            await self._cloud(text, outcome)
            return outcome
        except asyncio.CancelledError:
            partial = f" Text so far: {streamed}" if streamed else ""
            conversation.record(
                Notice(
                    text=f"Turn cancelled by the operator while {_WHERE[where]}.{partial}",
                    level="warning",
                    title="cancelled",
                    turn_id=turn_id,
                )
            )
            outcome.cancelled = True
            self._emit(Cancelled(turn_id, where))
            raise
        except AriesError as exc:
            outcome.error = exc.message
            conversation.record(
                Notice(
                    text=f"{self.model_label}: {exc.message}", level="error", title=type(exc).__name__, turn_id=turn_id
                )
            )
            self._emit(Failed(turn_id, type(exc).__name__, exc.message))
            return outcome

    async def _cloud(self, text: str, outcome: TurnOutcome) -> None:
        """confidence.local, then the bridge's step (:mod:`services.assistant.cloud`); the local answer
        is recorded and shown before anything is prepared for the cloud."""
        from services.assistant.cloud import cloud_step
        from services.assistant.confidence import local_confidence
        from services.bridge import headless_approver
        from services.retrieval.relevance import relevance_for

        relevance = relevance_for(self.session.workspace)
        outcome.confidence, outcome.confidence_inputs = local_confidence(
            outcome.hits,
            outcome.citations,
            min_score=relevance.min_score,
            min_keyword=relevance.min_keyword,
            min_bm25=relevance.min_bm25,
        )
        approve = self.cloud_approve or headless_approver(False)
        step = await cloud_step(self.session, text, outcome.confidence, approve, turn_id=outcome.turn_id)
        outcome.cloud = step
        if step.status not in ("off", "confident"):
            model = step.reply.model if step.reply is not None else None
            answer = step.reply.text if step.reply is not None else ""
            self._emit(CloudResult(outcome.turn_id, step.mode, step.status, model, answer, step.reason))

    def _check(self, outcome: TurnOutcome, schema: dict[str, Any], step: int, may_retry: bool) -> bool:
        """Validate the answer against the profile's schema; True when it failed and is to be retried.
        A failure is shown (notice + event) with the failing path."""
        from services.assistant.structured import check_answer

        check = check_answer(outcome.text, schema)
        outcome.structured, outcome.schema_error = (check.value, None) if check.ok else (None, check.error)
        if check.ok:
            return False
        then = "asking the model once more with the error" if may_retry else "no retry left; the answer is kept as is"
        attempt = outcome.text if len(outcome.text) <= 4000 else outcome.text[:4000] + "… [cut]"
        self.session.conversation.record(
            Notice(
                text=f"The answer does not satisfy the output schema of profile {outcome.profile}: "
                f"{check.error} ({then}).\nThe answer was:\n{attempt}",
                level="warning" if may_retry else "error",
                title="output schema",
                turn_id=outcome.turn_id,
            )
        )
        self._emit(SchemaInvalid(outcome.turn_id, step, str(check.error), may_retry))
        return may_retry

    async def _retrieve(
        self, text: str, turn_id: str, profile: ActiveProfile | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """The chunks to inject: the index in use (or the profile's), queried (audited by the engine),
        then only those that pass the relevance threshold (recorded in the same audit row)."""
        from services.config import env_settings
        from services.retrieval.relevance import relevance_for

        spec = profile.retrieval if profile is not None else None
        k = self.k or (spec.k if spec is not None else DEFAULT_K)

        warnings: list[str] = []

        def query() -> tuple[list[dict[str, Any]], str | None]:
            engine = self.session.engine()
            index = (spec.index if spec is not None else None) or engine.active_index
            if index is None:
                return [], None
            result = engine.query(text, k=k, index=index)
            warnings.extend(result.warnings)  # keyword-only (damaged vector store): said in the transcript
            relevance = relevance_for(self.session.workspace)
            if spec is not None and spec.threshold is not None and env_settings().min_score is None:
                relevance = dataclasses.replace(relevance, min_score=spec.threshold)
            kept = relevance.filter([hit.to_dict() for hit in result.hits])
            if result.audit_id is not None:
                engine.audit.record_threshold(result.audit_id, relevance.to_dict(kept))
            return kept, index

        try:
            found = await asyncio.to_thread(query)
            for warning in warnings:
                self.session.conversation.record(
                    Notice(text=warning, level="warning", title="retrieval", turn_id=turn_id)
                )
            return found
        except AriesError as exc:  # the turn goes on without retrieval, and says so
            self.session.conversation.record(
                Notice(text=f"Retrieval failed: {exc.message}", level="error", title="retrieval", turn_id=turn_id)
            )
            return [], None

    async def _tool_call(
        self, call: ToolCall, names: ToolNameMap | None, turn_id: str, step: int, outcome: TurnOutcome, limit: int
    ) -> ChatMessage:
        from services.models.base import ChatMessage

        mapped = names.tool_id(call.name) if names is not None else None
        if mapped is None and names is not None:
            # A registered tool that is not offered (e.g. one the profile switched off mid-session,
            # still in the model's memory) is mapped too: the gateway refuses it with its rule.
            from services.models.toolnames import ToolNameMap

            mapped = ToolNameMap(s.tool_id for s in self.session.gateway().registry.list()).tool_id(call.name)
        # An unknown name still goes through the gateway: it is refused there (registry.unknown_tool)
        # and audited like every other call, and the model gets the structured error.
        tool_id = mapped or call.name
        args: Any = call.arguments
        if call.arguments_error is not None:
            args = call.raw_arguments  # not a JSON object: the gateway answers InvalidInput, the model sees why
        self._emit(ToolProposed(turn_id, step, tool_id, args, call.id))
        result = await self.session.call_tool(
            tool_id,
            args,
            approver=self.approver,
            source="assistant",
            turn_id=turn_id,
            tool_call_id=call.id,
            turn_step=step,
            model=self.model_label,
        )
        call_id = result.meta.get("call_id")
        if call_id:
            outcome.tool_calls.append(str(call_id))
        decision = result.meta.get("decision") or {}
        self._emit(
            Decided(
                turn_id,
                step,
                tool_id,
                call.id,
                call_id,
                str(decision.get("action")),
                decision.get("rule"),
                decision.get("approved_by"),
            )
        )
        summary = "ok" if result.ok else f"{result.error.type}: {result.error.message}" if result.error else "error"
        self._emit(ToolFinished(turn_id, step, tool_id, call.id, call_id, result.ok, summary))
        content = tool_result_text(tool_id, result.to_dict(), limit)
        return ChatMessage(role="tool", content=content, tool_call_id=call.id, name=call.name)


_OFFERED: dict[tuple[int, str, int], tuple[list[ToolSchema], ToolNameMap]] = {}
_COSTS: dict[int, tuple[list[ToolSchema], int]] = {}


def _tools_cost(tools: list[ToolSchema]) -> int:
    """The offered tools' schemas in estimated tokens (counted once per offered list)."""
    from services.models.tokens import tools_tokens

    cached = _COSTS.get(id(tools))
    if cached is None or cached[0] is not tools:
        cached = _COSTS[id(tools)] = (tools, tools_tokens(tools))
    return cached[1]


def _offer(gateway: Any) -> tuple[list[ToolSchema], ToolNameMap]:
    from services.models.base import ToolSchema
    from services.models.toolnames import ToolNameMap
    from services.tools.records import describe_tools

    enabled = [t for t in describe_tools(gateway.registry, gateway.policy) if t["enabled"]]
    names = ToolNameMap([t["id"] for t in enabled])
    schemas = [
        ToolSchema(
            name=names.provider_name(t["id"]),
            description=str(t["description"]),
            parameters=offered_schema(gateway.registry.get(t["id"]).input_schema),
        )
        for t in enabled
    ]
    return schemas, names


OFFERED_BOUND_LIMIT = 256
_BOUNDS = ("maxLength", "maxItems", "maxProperties")


def offered_schema(schema: Any) -> Any:
    """A tool's argument schema as the model is offered it: without length bounds above
    :data:`OFFERED_BOUND_LIMIT` (``maxLength: 8192`` on a path, ``64 MiB`` on a file's text). The
    gateway still enforces every bound; a model gains nothing from them, and llama.cpp's server turns
    each into grammar rules when it constrains a forced tool call — with 8192 its grammar parser gives
    up and the server process dies (seen with the real-model lane)."""
    if isinstance(schema, list):
        return [offered_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: offered_schema(value)
        for key, value in schema.items()
        if not (key in _BOUNDS and isinstance(value, int) and value > OFFERED_BOUND_LIMIT)
    }


_WHERE = {
    "retrieval": "retrieving",
    "streaming": "the model was answering",
    "tool": "a tool call ran or waited for approval",
    "cloud": "the cloud step ran (the local answer is recorded)",
}
