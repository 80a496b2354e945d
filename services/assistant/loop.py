"""The turn loop, in steps. See the package docstring for the flow; this module is the one implementation.

A turn (:meth:`TurnLoop.run`) is three stages, each a method named for it:

- **begin** (:meth:`TurnLoop._begin`): record the operator's message, retrieve (:meth:`~TurnLoop._retrieve`),
  offer the tools in force, open the context window (:class:`~services.assistant.turn_window.TurnWindow`,
  the window's seam) and fit the first request (:class:`~services.assistant.context.ContextFitter`);
  records the retrieval set and emits ``Retrieved``.
- **one step per model call** (:meth:`TurnLoop._step`): the tools offered again (a profile switch
  mid-turn changes them at once), the request fitted (:meth:`~TurnLoop._stream_fitted`: fitted again
  when a server refuses it as too large), the reply streamed (:meth:`~TurnLoop._stream`), and what it
  came to returned as a :class:`StepResult`: an ``ANSWER`` (the turn finishes), ``TOOL_CALLS`` (run
  through the gateway by :meth:`~TurnLoop._run_tools`; their results go to the model in the next step)
  or ``RETRY`` (the answer failed the profile's output schema: :meth:`~TurnLoop._ask_again`). A turn
  that reaches ``max_steps`` says so (:meth:`~TurnLoop._out_of_steps`).
- **finish** (:meth:`TurnLoop._finish`): record the answer with its citations and usage, emit
  ``UsageReport`` and ``Done``; then the cloud step (:meth:`~TurnLoop._cloud`).

:class:`~services.assistant.events.Phase` says where the turn is; a cancel reports it (``Cancelled.where``
and the notice's "while …"). The per-turn state is two values: :class:`_Turn` (what a cancel or an
error reports, from the first line on) and :class:`_Context` (what begin set up for the model calls).

Where the coming work goes (issues 30 and 33), so that each is one more step or one more branch:

- *brought-back turns* (the left-out turns most relevant to the message, :mod:`services.assistant.recall`):
  every fit goes through :meth:`~TurnLoop._fit`, which finds them (in a thread) when a fit leaves out turns
  that were never searched, and fits again with them beside the passages.
- *pins* (passages or files kept in every request): begin, where the history and the hits are handed to
  the fitter (:meth:`~TurnLoop._open_window`).
- *compaction*: a step of its own before a model call, when :meth:`~TurnLoop._stream_fitted` finds that
  the fitted request leaves turns out (a ``StepKind`` of its own, acted on in :meth:`~TurnLoop.run`).
- *tools that fit*: :meth:`~TurnLoop.tool_offer` (every enabled tool, indexed once) and
  ``_Context.choose_tools`` (each request offers the most relevant within the tools' budget,
  :mod:`services.assistant.tool_offer`); a call to an enabled tool not offered is noted and goes to the gateway.
- *constrained decoding*: :meth:`~TurnLoop._second_pass` after ``_classify`` (a started call's unreadable
  arguments asked again under the tool's schema, :mod:`services.assistant.constrained`).
- *text tool calls* (a model that writes its calls in the text): :meth:`~TurnLoop._classify` reads the
  reply's trailing call block (:meth:`~TurnLoop._text_calls`, :mod:`services.assistant.text_turn`) into
  ``TOOL_CALLS`` with ``from_text``; the gateway never approves those by commander mode or a grant.
- *citation checks*: :meth:`~TurnLoop._classify` next to the output-schema check (a ``RETRY`` with the
  reason), and the report of them in :meth:`~TurnLoop._finish`.

Every tool call the model asks for goes through ``Session.call_tool`` — the one gateway, with the
approver this loop was given — and is recorded there (audit row + transcript event, with the turn,
step and the model's call id). Denials and schema errors go back to the model as structured results.
A cancel (the caller cancels the task running ``run``) is recorded as a notice with whatever text had
streamed, then passed on; no half-written line is left behind because every record is one whole line.
The tools offered (and their cost in tokens) are kept on the tool registry (``ToolRegistry.memo``),
which forgets them when its tools change or the gateway rebinds.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from services.assistant.compaction import auto_enabled, current, piece, wanted
from services.assistant.compaction import compact as compact_turns
from services.assistant.constrained import constrains
from services.assistant.context import (
    ContextFitter,
    Fitted,
    HistoryTurn,
    LeftOut,
    answer_reserve,
    history_from_entries,
    profile_system_prompt,
    tool_result_limit,
    tool_result_text,
)
from services.assistant.events import (
    Cancelled,
    CloudResult,
    ContextMeasured,
    Decided,
    Done,
    Failed,
    LoopEvent,
    Phase,
    Retrieved,
    SchemaInvalid,
    TextDelta,
    ToolFinished,
    ToolProposed,
    UsageReport,
)
from services.assistant.recall import TurnRecall
from services.assistant.structured import MAX_RETRIES, retry_instruction
from services.assistant.text_turn import TextCallState, as_tool_calls, refused_notice
from services.assistant.tool_offer import Ranker, Selection, ToolDoc, compact, named_tools
from services.assistant.turn_window import MAX_REFITS, TurnWindow
from services.clock import monotonic
from services.conversation import AssistantAnswer, Notice, RetrievalSet, UserMessage
from services.conversation.events import passage_record
from services.errors import AriesError
from services.history_search.documents import turn_number
from services.models.template import asked, local_server, mark_uncounted, probe, uncounted

if TYPE_CHECKING:
    from services.assistant.citations import CitationReport
    from services.assistant.cloud import CloudStep
    from services.assistant.text_calls import TextCallError, TextCalls
    from services.bridge import Approve
    from services.models.base import ChatMessage, ModelOptions, ModelProvider, ModelRequest, ToolCall, ToolSchema
    from services.models.toolnames import ToolNameMap
    from services.models.window import ModelWindow
    from services.profiles import ActiveProfile
    from services.session.session import Session
    from services.tools.calls import Approver
    from services.tools.gateway import ToolGateway

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
    brought_back: list[dict[str, Any]] = field(default_factory=list)  # earlier turns sent back, as hits
    finish_reason: str | None = None  # the last model step's: stop, length (cut short), tool_calls…
    checks: CitationReport | None = None  # each sentence against the passages it cites (citation_turn)


@dataclass(frozen=True)
class ToolOffer:
    """The tools a model may be offered under the policy in force: their schemas as sent, the map from
    the provider-side names back to tool ids, the schemas' cost in estimated tokens, and the index that
    ranks them for a request (:mod:`services.assistant.tool_offer`: the best within the tools' budget)."""

    schemas: list[ToolSchema]
    names: ToolNameMap
    tokens: int
    docs: tuple[ToolDoc, ...] = ()
    ranker: Ranker | None = None

    def choose(self, selection: Selection) -> tuple[list[ToolSchema], int]:
        """The schemas ``selection`` offers (in rank order) and their cost."""
        from services.models.tokens import tools_tokens

        if selection.all_offered:
            return self.schemas, self.tokens
        by_id = {doc.tool_id: schema for doc, schema in zip(self.docs, self.schemas, strict=True)}
        chosen = [by_id[tool_id] for tool_id in selection.offered]
        return chosen, tools_tokens(chosen)


class StepKind(StrEnum):
    ANSWER = "answer"  # the model answered: the turn finishes
    TOOL_CALLS = "tool_calls"  # the model asked for tools: they run, the next step sends the results
    RETRY = "retry"  # the answer failed the profile's output schema: the model is asked once more


@dataclass(frozen=True)
class StepResult:
    """What one model call came to."""

    kind: StepKind
    text: str  # what streamed in this step
    finish_reason: str  # the server's: stop, length (cut short), tool_calls…
    calls: tuple[ToolCall, ...] = ()  # TOOL_CALLS: as the model asked for them
    error: str | None = None  # RETRY: why the answer was refused
    from_text: bool = False  # TOOL_CALLS read from the model's text (``text`` is then the prose before them)
    refused: Mapping[str, TextCallError] = field(default_factory=dict)  # text calls answered with their error
    read: TextCalls | None = None  # the text's call block (what of it does not run is said once the step is decided)
    errors_sent: bool = False  # its errors go back to the model (else: no retry left, they are only said)


@dataclass
class _Turn:
    """One turn's progress: what a cancel or an error reports, from the first line of ``run`` on."""

    text: str
    outcome: TurnOutcome
    started: float
    phase: Phase = Phase.RETRIEVAL
    streamed: str = ""  # the current step's text so far
    prompt_tokens: int = 0
    completion_tokens: int = 0
    completion_estimated: int = 0  # Aries' own count of the text of steps whose server gave no count
    native_calls: int = 0  # tool calls the model returned natively
    text_calls: int = 0  # tool calls read from its text and handed to the gateway
    vector: tuple[str, list[float]] | None = None  # the message's vector, when the retrieval made one
    generating_ms: float = 0.0  # from each step's first streamed text to its end: the rate's time


@dataclass
class _Context:
    """What begin set up for the model calls of one turn."""

    query: str
    index: str | None
    schema: dict[str, Any] | None  # the profile's output_schema
    offer: ToolOffer | None  # None: the provider takes no tools
    options: ModelOptions
    windowing: TurnWindow
    window: ModelWindow
    fitter: ContextFitter
    text: TextCallState  # tool calls written as text: read or not, the turn's untrusted input
    recall: TurnRecall  # earlier turns brought back (searched when a fit leaves turns out)
    messages: list[ChatMessage] = field(default_factory=list)  # the turn's steps so far, as sent
    reported: LeftOut | None = None  # the last left-out report
    retries: int = 0  # output-schema retries asked
    pinned: frozenset[str] = frozenset()  # tools offered whatever the ranking (the profile names them)
    tool_budget: int = 0  # the tokens the tool definitions may take (before the window's room)
    tool_budget_set: bool = False  # the model's settings give it (else the default, and half the room at most)
    selection: Selection | None = None  # the tools chosen for the request (None: no tools)
    constrained: bool | None = None  # settings.models.<name>.constrained (services.assistant.constrained)
    sent: list[ChatMessage] = field(default_factory=list)  # the messages of the last request, as sent
    tools_shown: bool | None = None  # whether the server's template shows the tools (services.models.template)

    @property
    def names(self) -> ToolNameMap | None:
        return self.offer.names if self.offer is not None else None

    def choose_tools(self) -> None:
        """Rank the enabled tools against the message and the recent turns and keep the best within
        the tools' budget (:mod:`services.assistant.tool_offer`; the window's room caps the budget)."""
        from services.assistant.tool_offer import select

        if self.offer is None or self.offer.ranker is None:
            self.selection = None
            return
        recent = [m.content for turn in self.fitter.history[-2:] for m in turn.messages if m.role == "user"]
        # by default at most half of what the window leaves (the passages and the history keep the rest);
        # a budget the model's settings give is kept up to all of it
        room = self.fitter.tool_room(self.messages)
        budget = max(0, min(self.tool_budget, room if self.tool_budget_set else room // 2))
        self.selection = select(
            self.offer.docs,
            self.query,
            recent,
            budget=budget,
            pinned=self.pinned,
            ranker=self.offer.ranker,
        )

    def fit(self) -> Fitted:
        """The next request, fitted to the window: the steps so far and the tools chosen."""
        if self.offer is None:
            return self.fitter.fit(self.messages, [], 0)
        if self.selection is None:
            schemas, tokens = self.offer.schemas, self.offer.tokens
        else:
            schemas, tokens = self.offer.choose(self.selection)
        # a template that leaves the tools out: they are sent (a forced call works) and cost the model nothing
        return self.fitter.fit(self.messages, schemas, 0 if self.tools_shown is False else tokens)

    def offered(self, tool_id: str) -> bool:
        """Whether ``tool_id`` was among the tools offered in the last request."""
        return self.selection is None or tool_id in self.selection.offered


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
        only: tuple[str, frozenset[str]] | None = None,
        pinned_tools: Iterable[str] = (),
    ) -> None:
        self.session = session
        self.only = only  # a workspace command's turn: (its name, the tools it may use)
        # offered whatever the ranking (a command's turn is offered only its own tools: all of them
        # when they fit the tools' budget, else the best of them)
        self.pinned_tools = frozenset(pinned_tools)
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
    def tool_offer(self) -> ToolOffer:
        """Exactly the tools the policy in force enables, with their registry schemas and their cost
        (built once per registry and policy, and kept on the registry)."""
        gateway = self.session.gateway()
        offer = gateway.registry.memo(("assistant.offer", gateway.policy.hash), lambda: _offer(gateway))
        return offer if self.only is None else _narrowed(offer, self.only[1])

    def _model_setting(self, name: str) -> Any:
        """``settings.models.<this model>.<name>`` (None when unset)."""
        from services.assistant.turn_window import model_settings

        return getattr(model_settings(self.session.workspace, self.model_label), name, None)

    def _tool_budget(self) -> int:
        """The model's ``settings.models.<name>.tool_budget``, else ``DEFAULT_TOOL_BUDGET`` (1,200)."""
        from services.assistant.tool_offer import DEFAULT_TOOL_BUDGET

        budget = self._model_setting("tool_budget")
        return DEFAULT_TOOL_BUDGET if budget is None else int(budget)

    def offered_tools(self) -> tuple[list[ToolSchema], ToolNameMap]:
        """The schemas of :meth:`tool_offer` and the map of their names."""
        offer = self.tool_offer()
        return offer.schemas, offer.names

    # -- one turn --------------------------------------------------------------------------------
    async def run(self, text: str, *, query: str | None = None) -> TurnOutcome:
        """One turn for the message ``text``; retrieval searches ``query`` when given (the message as
        typed, without the text of files attached to it), else ``text``."""
        turn = _Turn(text, TurnOutcome(self.session.conversation.new_turn()), monotonic())
        try:
            context = await self._begin(turn, query or text)
            for step in range(1, self.max_steps + 1):
                result = await self._step(turn, context, step)
                if result.kind is StepKind.ANSWER:
                    break
                if result.kind is StepKind.RETRY:
                    self._ask_again(context, result)
                else:
                    await self._run_tools(turn, context, step, result)
            else:
                self._out_of_steps(turn)
            self._finish(turn)
            if context.recall.searched:  # the conversation index kept current, after the answer
                await asyncio.to_thread(context.recall.after_turn)
            await self._auto_compact(turn.outcome)
            turn.phase = Phase.CLOUD
            await self._cloud(text, turn.outcome)
            return turn.outcome
        except asyncio.CancelledError:
            self._cancelled(turn)
            raise
        except AriesError as exc:
            self._failed(turn, exc)
            return turn.outcome

    async def _auto_compact(self, outcome: TurnOutcome) -> None:
        """After a turn whose request left out turns no summary covers: the summary (``/compact``) when
        the operator turned that on; a failure is one warning and loses nothing."""
        left_out = outcome.context.get("left_out") or {}
        if outcome.error or not wanted(self.session.conversation, left_out.get("last_turn")):
            return
        if self.provider.name == "offline" or not await asyncio.to_thread(auto_enabled):
            return
        try:
            await compact_turns(self.session, self.provider, self.model_label)
        except AriesError as exc:
            self.session.conversation.record(
                Notice(text=f"Automatic summary: {exc.message}", level="warning", title="compact")
            )

    async def _mcp_tools(self, turn_id: str) -> None:
        """Enabled MCP servers started off the event loop so that their tools can be offered — but a turn
        never waits for a server that is starting elsewhere (the workbench starts them in the background
        once the workspace is ready) nor, twice, for one that failed: their tools are left out, said once."""
        registry = self.session.gateway().registry
        if registry.loading:
            self.session.conversation.record(
                Notice(
                    text="MCP servers are still starting: their tools are not offered in this turn.",
                    title="tools",
                    turn_id=turn_id,
                )
            )
            return
        failed = await asyncio.to_thread(registry.load_all, retry=False)
        said = registry.memo(("assistant.mcp_failures_said",), set)
        for group, why in sorted(failed.items()):
            if group not in said:
                said.add(group)
                self.session.conversation.record(
                    Notice(
                        text=f"{group} did not start ({why}): its tools are left out; /doctor tries again.",
                        level="warning",
                        title="tools",
                        turn_id=turn_id,
                    )
                )

    # -- begin -----------------------------------------------------------------------------------
    async def _begin(self, turn: _Turn, query: str) -> _Context:
        """Record the message, retrieve, offer the tools, open the window and fit the first request;
        the retrieval set is recorded (with what was kept) and ``Retrieved`` emitted."""
        outcome = turn.outcome
        profile = self.session.profile()  # None when it cannot be loaded (reported by the session)
        outcome.profile = self.session.profile_name
        self.session.conversation.record(UserMessage(text=turn.text, turn_id=outcome.turn_id, step=0))
        hits, index = await self._retrieve(query, outcome.turn_id, profile, turn)
        outcome.index = index
        offer: ToolOffer | None = None
        if getattr(self.provider, "supports_tools", self.provider.name != "offline"):
            if self.session.gateway().mcp is not None:
                await self._mcp_tools(outcome.turn_id)
            offer = self.tool_offer()
        context = await self._open_window(turn, profile, hits, query, index, offer)
        context.pinned = named_tools(profile.tool_patterns if profile is not None else None) | self.pinned_tools
        context.tool_budget = self._tool_budget()
        context.tool_budget_set = self._model_setting("tool_budget") is not None
        context.constrained = self._model_setting("constrained")
        context.choose_tools()
        if context.selection is not None and context.selection.pinned_over:  # said once, at the turn's start
            note = str(context.selection.note())
            self.session.conversation.record(Notice(text=note, level="warning", title="tools", turn_id=outcome.turn_id))
        fitted = await self._fit(context)
        outcome.hits = fitted.kept_hits
        if index is not None:
            handles = [str(h.get("handle")) for h in fitted.kept_hits]
            passages = [passage_record(h) for h in fitted.kept_hits]  # the text as seen: an export shows it
            self.session.conversation.record(
                RetrievalSet(
                    query=query, index=index, handles=handles, passages=passages, turn_id=outcome.turn_id, step=1
                )
            )
        context.reported = context.windowing.report(fitted, context.window, context.fitter, outcome.turn_id, None, None)
        self._emit(
            Retrieved(outcome.turn_id, query, index, fitted.kept_hits, fitted.left_out_handles, fitted.brought_back)
        )
        outcome.context = {"window": context.window.tokens, "window_source": context.window.source}
        return context

    async def _open_window(
        self,
        turn: _Turn,
        profile: ActiveProfile | None,
        hits: list[dict[str, Any]],
        query: str,
        index: str | None,
        offer: ToolOffer | None,
    ) -> _Context:
        """The model's options (the profile's temperature), the window they are fitted to, and the fitter
        over the system prompt, the message, the hits and the history before this turn."""
        from services.models.base import ModelOptions

        options = self.options or ModelOptions()
        if options.temperature is None and profile is not None and profile.model.temperature is not None:
            options = dataclasses.replace(options, temperature=profile.model.temperature)
        windowing = TurnWindow(self.session, self.provider, self.model_label, self.budget_tokens)
        window, options = await windowing.open(options)
        if (schema_format := self._model_setting("schema_format")) is not None:
            options = dataclasses.replace(options, schema_format=schema_format)
        history = history_from_entries(self.session.conversation.dialogue(), turn.outcome.turn_id)
        summary = piece(current(self.session.conversation))
        fitter = ContextFitter(
            profile_system_prompt(profile.system_prompt if profile is not None else None),
            turn.text,
            hits,
            history,
            window=window.tokens,
            reserve=answer_reserve(window.tokens, options.max_tokens),
            calibration=window.calibration,
            label=self.model_label,
            pinned=_pinned(self.session, history),
            instructions=_instructions(self.session),
            summary=summary,
        )
        schema = profile.output_schema if profile is not None else None
        text = TextCallState.open(
            self.session, self.model_label, takes_tools=offer is not None, hits=hits, message=turn.text
        )
        recall = TurnRecall(self.session, query, turn_number(turn.outcome.turn_id), turn.vector, dense=_dense_recall())
        if turn.vector is not None:  # this message's vector, kept for the turns after it to find this one
            await asyncio.to_thread(recall.keep_own)
        made = _Context(query, index, schema, offer, options, windowing, window, fitter, text, recall)
        if offer is not None:
            from services.models.template import known

            made.tools_shown = known(windowing.key())
        return made

    async def _fit(self, context: _Context) -> Fitted:
        """The next request, fitted (:meth:`_Context.fit`); when it leaves out turns that were never
        searched, the most relevant of them are found (in a thread) and it is fitted again with them."""
        fitted = context.fit()
        if not fitted.wants_recall:
            return fitted
        found = await asyncio.to_thread(context.recall.find, context.fitter.history, fitted.wants_recall)
        context.fitter.bring_back(found, fitted.wants_recall)
        for warning in context.recall.warnings:
            self.session.conversation.record(Notice(text=warning, level="warning", title="earlier turns"))
        context.recall.warnings.clear()
        return context.fit()

    # -- one step per model call -------------------------------------------------------------------
    async def _step(self, turn: _Turn, context: _Context, step: int) -> StepResult:
        """One model call: the tools in force offered, the request fitted and streamed; what it came to."""
        turn.outcome.steps = step
        turn.phase = Phase.STREAMING
        turn.streamed = ""
        if context.offer is not None:  # asked each step: a profile switch mid-turn changes them at once
            context.offer = self.tool_offer()
            context.choose_tools()
            offers = bool(context.offer.schemas) and (context.selection is None or bool(context.selection.offered))
            if offers and context.tools_shown is None and uncounted(context.windowing.key()):
                await self._learn_template(context, turn.outcome.turn_id)  # before the request it measures
        calls, finish = await self._stream_fitted(turn, context, step)
        turn.outcome.finish_reason = finish
        if finish == "length":
            context.windowing.cut_short(turn.outcome.turn_id, step, context.options, context.window.tokens)
        result = self._classify(turn, context, step, calls, finish)
        if result.kind is StepKind.TOOL_CALLS and constrains(self.provider, context.constrained):
            result = await self._second_pass(turn, context, step, result)
        if result.read is not None:  # what of a text call block is not run, said once the second pass is done
            left = {error.position for error in result.refused.values()}
            kept = tuple(e for e in result.read.errors if e.position in left or not result.errors_sent)
            self._refused_text_calls(turn, step, dataclasses.replace(result.read, errors=kept), result.errors_sent)
        return result

    async def _stream_fitted(self, turn: _Turn, context: _Context, step: int) -> tuple[list[ToolCall], str]:
        """Fit the request (recording what it leaves out) and stream the reply: the calls asked for and
        the finish reason. A server that refuses the request as too large teaches the window, and the
        step is fitted again (at most ``MAX_REFITS`` times, and only before anything streamed)."""
        from services.models.base import ContextOverflow

        calls: list[ToolCall] = []
        refit: str | None = None  # why this step is fitted again (a server's overflow error)
        attempt = 0
        while True:
            fitted = await self._fit(context)
            context.reported = context.windowing.report(
                fitted, context.window, context.fitter, turn.outcome.turn_id, context.reported, refit
            )
            try:
                finish = await self._stream(turn, context, step, fitted, calls)
            except ContextOverflow as exc:
                if turn.streamed or calls or attempt == MAX_REFITS:
                    raise
                refit = context.windowing.learn(exc, fitted, context.window, context.fitter, context.options)
                attempt += 1
                continue
            self._note_request(turn.outcome, context.window, fitted, context.recall.elapsed_ms)
            if context.selection is not None:  # what was offered and why (ask --json, /tools offered)
                turn.outcome.context["tools_offered"] = {**context.selection.to_dict(), "sent": bool(fitted.tools)}
            if fitted.breakdown is not None:
                self._emit(ContextMeasured(turn.outcome.turn_id, step, fitted.breakdown))
            return calls, finish

    async def _stream(self, turn: _Turn, context: _Context, step: int, fitted: Fitted, calls: list[ToolCall]) -> str:
        """Send one fitted request and follow the stream (``TextDelta`` per chunk); the calls asked for
        are added to ``calls``. Returns the finish reason."""
        from services.models.base import Done as ModelDone
        from services.models.base import ModelRequest, ToolCallEvent, Usage
        from services.models.base import TextDelta as ModelText

        request = ModelRequest(
            messages=fitted.messages,
            tools=fitted.tools,
            options=context.options,
            retrieved=fitted.kept_hits,
            index=context.index,
            output_schema=context.schema if context.constrained is not False else None,  # structured output
        )
        context.sent = fitted.messages
        finish = "stop"
        counted = 0
        usage_seen = False
        first: float | None = None
        async for event in self.provider.stream(request):
            if isinstance(event, ModelText):
                first = monotonic() if first is None else first
                turn.streamed += event.text
                self._emit(TextDelta(turn.outcome.turn_id, step, event.text))
            elif isinstance(event, ToolCallEvent):
                calls.append(event.call)
            elif isinstance(event, Usage):
                usage_seen = usage_seen or event.reported
                turn.prompt_tokens += event.prompt_tokens
                turn.completion_tokens += event.completion_tokens
                counted += event.completion_tokens
                context.window.calibration.observe(fitted.estimated, event.prompt_tokens)
            elif isinstance(event, ModelDone):
                finish = event.finish_reason
        if first is not None:
            turn.generating_ms += (monotonic() - first) * 1000
        if not counted and turn.streamed:  # the server did not count its output (llama-cpp-python's stream)
            from services.models.tokens import estimate_tokens

            turn.completion_estimated += estimate_tokens(turn.streamed)
        if not usage_seen:
            shown_at_fit = context.tools_shown
            mark_uncounted(context.windowing.key())
            if fitted.tools and context.tools_shown is None:
                await self._learn_template(context, turn.outcome.turn_id)
            if not fitted.tools or shown_at_fit is not None:  # an estimate that counted the tools rightly
                await self._count_request(turn, context, fitted, request)
        return finish

    async def _count_request(self, turn: _Turn, context: _Context, fitted: Fitted, request: ModelRequest) -> None:
        """A local server whose stream counted nothing is asked to count the request just sent (the
        same body, one token out: llama.cpp answers from its prompt cache), which calibrates the
        estimate as a counted stream does and gives the usage line its tokens in."""
        count = getattr(self.provider, "count_request", None)
        if count is None or not local_server(str(getattr(self.provider, "base_url", ""))):
            return
        counted = await count(request)
        if counted:
            turn.prompt_tokens += counted
            context.window.calibration.observe(fitted.estimated, counted)

    async def _learn_template(self, context: _Context, turn_id: str) -> None:
        """A server that counted nothing of a request that carried tools: ask it once whether its chat
        template shows the model the tools (:mod:`services.models.template`); when it leaves them out,
        the estimate stops counting them and the operator is told, once per server and model."""
        key = context.windowing.key()
        if asked(key):
            return
        context.tools_shown = await probe(self.provider, key)
        if context.tools_shown is False:
            self.session.conversation.record(
                Notice(
                    text=(
                        f"The model server does not show {self.model_label} the tool definitions (its chat "
                        "template leaves them out, found by asking it to count two one-token prompts): the "
                        "model can call a tool only by writing the call as text; the context meter no longer "
                        "counts them."
                    ),
                    level="warning",
                    title="tools",
                    turn_id=turn_id,
                )
            )

    @staticmethod
    def _note_request(outcome: TurnOutcome, window: ModelWindow, fitted: Fitted, recall_ms: float) -> None:
        """The outcome's account of the last request: the window, the prompt as estimated, what it left out."""
        outcome.context["window"], outcome.context["window_source"] = window.tokens, window.source
        outcome.context["prompt_tokens_estimated"] = fitted.tokens
        outcome.context["left_out"] = {
            "turns": len(fitted.left_out_turns),
            "passages": list(fitted.left_out_handles),
            "tools": len(fitted.left_out_tools),
        }
        if fitted.left_out_turns:  # the newest turn left out: automatic compaction's cue
            outcome.context["left_out"]["last_turn"] = fitted.left_out_turns[-1]
        if fitted.summary:
            outcome.context["summary"] = fitted.summary
        outcome.brought_back = list(fitted.brought_back)
        outcome.context["brought_back"] = [str(hit.get("handle")) for hit in fitted.brought_back]
        if fitted.breakdown is not None:  # the one budget's account, part by part (services.models.window_budget)
            outcome.context["breakdown"] = fitted.breakdown.to_dict()
        if recall_ms:  # the time spent finding earlier turns in this turn (bench/long_conversation.py)
            outcome.context["recall_ms"] = round(recall_ms, 3)

    def _classify(self, turn: _Turn, context: _Context, step: int, calls: list[ToolCall], finish: str) -> StepResult:
        """What the streamed reply is: tool calls (native, or read from the text's trailing call block
        while reading is on for this model), an answer, or an answer the output schema refused (retried
        while retries are left)."""
        if calls:
            turn.native_calls += len(calls)
            context.text.saw_native()
            return StepResult(StepKind.TOOL_CALLS, turn.streamed, finish, tuple(calls))
        read = context.text.read(turn.streamed, context.names, self._tool_ids)
        if read is not None:
            result = self._text_calls(turn, context, step, read, finish)
            if result is not None:
                return result
        outcome = turn.outcome
        outcome.text = turn.streamed
        if context.schema is not None and self._check(outcome, context.schema, step, context.retries < MAX_RETRIES):
            return StepResult(StepKind.RETRY, turn.streamed, finish, error=str(outcome.schema_error))
        return StepResult(StepKind.ANSWER, turn.streamed, finish)

    def _tool_ids(self) -> list[str]:
        return [spec.tool_id for spec in self.session.gateway().registry.list()]

    def _text_calls(self, turn: _Turn, context: _Context, step: int, read: TextCalls, finish: str) -> StepResult | None:
        """Tool calls the model wrote as text (:mod:`services.assistant.text_turn`): ``TOOL_CALLS`` read
        from the text, with the errors answered (a notice says what was refused) while retries are
        left; None when nothing is to run and no error goes back (the text is the answer)."""
        sent = context.text.errors_sent(read)
        if not read.calls and not sent:
            self._refused_text_calls(turn, step, read, sent)
            return None
        calls, refused = as_tool_calls(read, step, with_errors=sent)
        turn.text_calls += len(read.calls)
        return StepResult(
            StepKind.TOOL_CALLS, read.prose, finish, calls, from_text=True, refused=refused, read=read, errors_sent=sent
        )

    def _refused_text_calls(self, turn: _Turn, step: int, read: TextCalls, sent: bool) -> None:
        """A notice of what the text's call block had that does not run (after a second pass, if any)."""
        if read.errors:
            text, level = refused_notice(read, sent)
            self.session.conversation.record(
                Notice(text=text, level=level, title="text tool call", turn_id=turn.outcome.turn_id, step=step)
            )

    async def _second_pass(self, turn: _Turn, context: _Context, step: int, result: StepResult) -> StepResult:
        """``TOOL_CALLS`` that started a call to an offered tool with arguments that are not a JSON object
        (native, or written as text): each one's arguments asked again, constrained by the tool's schema
        (:mod:`services.assistant.constrained`); a notice says what came of it."""
        from services.assistant.constrained import repaired, second_pass

        calls, refused = list(result.calls), dict(result.refused)
        for n, call in enumerate(calls):
            found = self._unreadable(call, refused.get(call.id), context)
            if found is None:
                continue
            tool_id, schema, why = found
            call = dataclasses.replace(
                call, name=context.offer.names.provider_name(tool_id) if context.offer else call.name
            )
            done = await second_pass(self.provider, context.sent, call, schema, context.options, why)
            turn.prompt_tokens += done.prompt_tokens
            turn.completion_tokens += done.completion_tokens
            if done.arguments is not None:
                calls[n] = repaired(call, done.arguments)
                refused.pop(call.id, None)
            then = (
                "written again under the tool's schema, and the call goes to the gateway with them"
                if done.error is None
                else f"{done.error}, so the model is sent the error"
            )
            self.session.conversation.record(
                Notice(
                    text=f"The arguments of the call to {tool_id} could not be read ({why}); constrained "
                    f"second pass: {then}.",
                    level="info" if done.error is None else "warning",
                    title="constrained decoding",
                    turn_id=turn.outcome.turn_id,
                    step=step,
                )
            )
        return dataclasses.replace(result, calls=tuple(calls), refused=refused)

    @staticmethod
    def _unreadable(
        call: ToolCall, refused: TextCallError | None, context: _Context
    ) -> tuple[str, dict[str, Any], str] | None:
        """``(tool_id, its offered schema, why)`` when ``call`` names an offered tool and its arguments
        could not be read (None otherwise: it runs, or it is refused for another reason)."""
        from services.assistant.constrained import started_name

        if context.offer is None:
            return None
        name: str | None = call.name
        if refused is not None:  # a call written as text: malformed, naming a tool (in its JSON at least)
            name = (refused.name or started_name(refused.raw)) if refused.kind == "malformed" else None
            why = refused.message.split("; write one call as")[0] if name else None
        else:
            why = call.arguments_error
        tool_id = context.offer.names.tool_id(name) if why is not None and name else None
        if tool_id is None or not context.offered(tool_id):
            return None
        schemas = {schema.name: schema.parameters for schema in context.offer.schemas}
        schema = schemas.get(context.offer.names.provider_name(tool_id))
        return None if schema is None or why is None else (tool_id, schema, why)

    def _ask_again(self, context: _Context, result: StepResult) -> None:
        """A ``RETRY``: the refused answer and the error go back to the model in the next step."""
        from services.models.base import ChatMessage

        context.retries += 1
        context.messages.append(ChatMessage(role="assistant", content=result.text))
        context.messages.append(ChatMessage(role="user", content=retry_instruction(str(result.error))))

    async def _run_tools(self, turn: _Turn, context: _Context, step: int, result: StepResult) -> None:
        """``TOOL_CALLS``: the model's message, then each call through the gateway (its result goes to
        the model in the next step)."""
        from services.models.base import ChatMessage

        context.messages.append(ChatMessage(role="assistant", content=result.text, tool_calls=list(result.calls)))
        turn.phase = Phase.TOOL
        limit = tool_result_limit(context.window.tokens - context.fitter.reserve)
        for call in result.calls:
            refused = result.refused.get(call.id)
            if refused is not None:  # a text call that cannot run: its structured error, nothing else
                content = tool_result_text(call.name, refused.result(), limit)
                context.messages.append(ChatMessage(role="tool", content=content, tool_call_id=call.id, name=call.name))
                continue
            reply = await self._tool_call(call, context, step, turn.outcome, limit, from_text=result.from_text)
            context.messages.append(reply)

    def _out_of_steps(self, turn: _Turn) -> None:
        """``max_steps`` reached without an answer: the last step's text is the answer, and a notice says why."""
        turn.outcome.text = turn.streamed
        self.session.conversation.record(
            Notice(
                text=f"The turn stopped after {self.max_steps} model steps (max_steps).",
                level="warning",
                title="assistant",
                turn_id=turn.outcome.turn_id,
            )
        )

    # -- finish ------------------------------------------------------------------------------------
    def _finish(self, turn: _Turn) -> None:
        """Record the answer with its citations and usage; emit ``UsageReport`` and ``Done``."""
        outcome = turn.outcome
        handles = [str(h.get("handle")) for h in [*outcome.hits, *outcome.brought_back]]
        outcome.citations = [handle for handle in handles if handle in outcome.text]
        from services.assistant.citation_turn import check_turn, checks_record  # pydantic: at the turn's end only

        outcome.checks = check_turn(outcome.text, [*outcome.hits, *outcome.brought_back])
        checks = checks_record(outcome.checks)
        elapsed_ms = round((monotonic() - turn.started) * 1000, 1)
        outcome.usage = {
            "prompt_tokens": turn.prompt_tokens,
            "completion_tokens": turn.completion_tokens,
            "elapsed_ms": elapsed_ms,
            "steps": outcome.steps,
        }
        if turn.generating_ms:  # the usage line's tokens per second
            outcome.usage["generating_ms"] = round(turn.generating_ms, 1)
        if turn.native_calls:  # read back by the next turn: native calls seen, text calls not read
            outcome.usage["native_tool_calls"] = turn.native_calls
        if turn.text_calls:
            outcome.usage["text_tool_calls"] = turn.text_calls
        if "breakdown" in outcome.context:  # the last request's share of the window, recorded with the turn
            outcome.usage["context"] = outcome.context["breakdown"]
        if "tools_offered" in outcome.context:  # what /tools offered reads back
            outcome.usage["tools_offered"] = compact(outcome.context["tools_offered"])
        counted = self.provider.name != "offline"  # the offline provider has no model to count for
        if counted and not turn.prompt_tokens and "prompt_tokens_estimated" in outcome.context:
            # the server did not count (llama-cpp-python's stream): say what was estimated
            outcome.usage["prompt_tokens_estimated"] = outcome.context["prompt_tokens_estimated"]
        if counted and turn.completion_estimated:  # some step's output was not counted by the server
            outcome.usage["completion_tokens_estimated"] = turn.completion_tokens + turn.completion_estimated
        self.session.conversation.record(
            AssistantAnswer(
                text=outcome.text,
                provider=self.provider.name,
                provenance=str(getattr(self.provider, "provenance", "local")),
                model=self.model_label,
                citations=outcome.citations,
                usage=outcome.usage,
                turn_id=outcome.turn_id,
                step=outcome.steps + 1,
                checks=checks,
            )
        )
        estimated = int(outcome.context.get("prompt_tokens_estimated") or 0) if counted else 0
        self._emit(
            UsageReport(
                outcome.turn_id,
                turn.prompt_tokens,
                turn.completion_tokens,
                elapsed_ms,
                outcome.steps,
                estimated,
                int(outcome.usage.get("completion_tokens_estimated") or 0),
                generating_ms=turn.generating_ms,
            )
        )
        self._emit(Done(outcome.turn_id, outcome.text, outcome.citations, checks))

    def _cancelled(self, turn: _Turn) -> None:
        """The operator cancelled: a notice says where, with the text streamed so far; ``Cancelled``."""
        partial = f" Text so far: {turn.streamed}" if turn.streamed else ""
        self.session.conversation.record(
            Notice(
                text=f"Turn cancelled by the operator while {turn.phase.doing}.{partial}",
                level="warning",
                title="cancelled",
                turn_id=turn.outcome.turn_id,
            )
        )
        turn.outcome.cancelled = True
        self._emit(Cancelled(turn.outcome.turn_id, turn.phase))

    def _failed(self, turn: _Turn, exc: AriesError) -> None:
        """A typed error ended the turn: an error notice (one line, no traceback) and ``Failed``."""
        turn.outcome.error = exc.message
        self.session.conversation.record(
            Notice(
                text=f"{self.model_label}: {exc.message}",
                level="error",
                title=type(exc).__name__,
                turn_id=turn.outcome.turn_id,
            )
        )
        self._emit(Failed(turn.outcome.turn_id, type(exc).__name__, exc.message))

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
        self, text: str, turn_id: str, profile: ActiveProfile | None = None, turn: _Turn | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """The chunks to inject: the index in use (or the profile's), queried (audited by the engine),
        then only those that pass the relevance threshold (recorded in the same audit row). The query's
        vector is kept on ``turn`` (earlier turns are searched with it: the message is encoded once)."""
        from services.retrieval.relevance import relevance_for
        from services.settings.config import env_settings

        spec = profile.retrieval if profile is not None else None
        k = self.k or (spec.k if spec is not None else DEFAULT_K)

        warnings: list[str] = []

        def query() -> tuple[list[dict[str, Any]], str | None]:
            engine = self.session.engine()
            index = (spec.index if spec is not None else None) or engine.active_index
            if index is None:
                return [], None
            relevance = relevance_for(self.session.workspace)
            if spec is not None and spec.threshold is not None and env_settings().min_score is None:
                relevance = dataclasses.replace(relevance, min_score=spec.threshold)
            result = engine.query(text, k=k, index=index, relevance=relevance)  # the relevant ones before the cut
            warnings.extend(result.warnings)  # keyword-only (damaged vector store): said in the transcript
            if turn is not None:
                turn.vector = result.query_vector
            if result.dense_note:  # keywords first: the vectors are still being written
                warnings.append(f"index {index}: {result.dense_note}; the rest is searched by keyword only")
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
        self, call: ToolCall, context: _Context, step: int, outcome: TurnOutcome, limit: int, *, from_text: bool
    ) -> ChatMessage:
        from services.models.base import ChatMessage

        names, turn_id = context.names, outcome.turn_id
        mapped = names.tool_id(call.name) if names is not None else None
        if mapped is None and names is not None:
            # A registered tool that is not offered (e.g. one the profile switched off mid-session,
            # still in the model's memory) is mapped too: the gateway refuses it with its rule.
            from services.models.toolnames import ToolNameMap

            mapped = ToolNameMap(s.tool_id for s in self.session.gateway().registry.list()).tool_id(call.name)
        # An unknown name still goes through the gateway: it is refused there (registry.unknown_tool)
        # and audited like every other call, and the model gets the structured error.
        tool_id = mapped or call.name
        if mapped is not None and not context.offered(mapped):
            self.session.conversation.record(
                Notice(
                    text=f"The model called {mapped}, which was not offered in this request (left out as less "
                    "relevant, /tools offered); the gateway decides it like any call.",
                    title="tools",
                    turn_id=turn_id,
                    step=step,
                )
            )
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
            from_text=from_text,
            only=self.only,
        )
        context.text.add_result(result.to_dict())  # what a tool returned is untrusted input of the turn
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
        self._emit(ToolFinished(turn_id, step, tool_id, call.id, call_id, result.ok, summary, from_text))
        content = tool_result_text(tool_id, result.to_dict(), limit)
        return ChatMessage(role="tool", content=content, tool_call_id=call.id, name=call.name)


def _instructions(session: Session) -> str:
    """The project's instructions in force (the workspace's AGENTS.md, trusted or its own), as the
    system prompt carries them; '' without any."""
    found = session.in_force.instructions
    return found[0].system_part() if found else ""


def _narrowed(offer: ToolOffer, tools: frozenset[str]) -> ToolOffer:
    """``offer`` without the tools a workspace command may not use (the names keep their map)."""
    from services.models.tokens import tools_tokens

    schemas = [schema for schema in offer.schemas if offer.names.tool_id(schema.name) in tools]
    return ToolOffer(schemas, offer.names, tools_tokens(schemas))


def _offer(gateway: ToolGateway) -> ToolOffer:
    from services.models.base import ToolSchema
    from services.models.tokens import tools_tokens
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
    docs = tuple(
        ToolDoc.of(t["id"], schema.name, schema.description, schema.parameters, tools_tokens([schema]))
        for t, schema in zip(enabled, schemas, strict=True)
    )
    return ToolOffer(schemas, names, tools_tokens(schemas), docs, Ranker(docs))


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


def _dense_recall() -> bool:
    """Earlier turns are searched by meaning too, unless ``ARIES_RECALL=keyword``."""
    from services.settings.env import env_settings

    try:
        return env_settings().recall != "keyword"
    except AriesError:  # a bad variable elsewhere is reported where it is used
        return True


def _pinned(session: Session, history: list[HistoryTurn]) -> frozenset[str]:
    """The turn ids of the pinned turns in force (``/pin``): sent in every request, never left out."""
    pins = set(session.conversation.timeline().pinned)
    return frozenset(turn.turn_id for turn in history if turn_number(turn.turn_id) in pins)
