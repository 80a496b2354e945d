"""The context window of one turn: what a request is fitted to, what a refusal teaches, what is said.

The window is, in this order: the caller's budget (``budget_tokens``), the workspace's
``settings.models.<model>.context_window``, what a server's overflow error taught (kept per provider,
URL and model by :mod:`services.models.window`, so the next process starts from it), what the
provider says of itself (Ollama's ``show``, a ``/models`` entry: asked once a minute), else
:data:`~services.models.window.DEFAULT_WINDOW`.  A server that refuses a request as too large is
answered by fitting again (:meth:`TurnWindow.learn`, at most :data:`MAX_REFITS` times a step); what a
request leaves out is a ``ContextReport`` in the transcript (:meth:`TurnWindow.report`), so nothing is
cut silently.  :mod:`services.assistant.context` does the fitting itself; the turn loop
(:mod:`services.assistant.loop`) asks this module which window and records what it says.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from services.assistant.context import ContextFitter, Fitted, LeftOut, answer_reserve
from services.conversation import ContextReport, Notice
from services.errors import AriesError

if TYPE_CHECKING:
    from services.models.base import ContextOverflow, ModelOptions, ModelProvider
    from services.models.tokens import Calibration
    from services.models.window import ModelWindow
    from services.session.session import Session

MAX_REFITS = 2  # a step is fitted again at most this often after a server's overflow error
MIN_REFIT_WINDOW = 256
PROVIDER_WINDOW_TTL_S = 60.0

_CALIBRATIONS: dict[str, Calibration] = {}  # per provider, URL and model: the estimate's correction
_SAID: dict[str, tuple[float, int | None]] = {}  # what a provider said of its window, and when


def forget_servers() -> None:
    """Forget what this process learned of model servers (each one's calibration of the token estimate
    and what it said of its window): a fresh start, as a new process has (tests begin each one so)."""
    from services.models import template

    _CALIBRATIONS.clear()
    _SAID.clear()
    template.forget_all()


class TurnWindow:
    """The window of one turn of ``provider`` (``model_label`` names it in settings and notices)."""

    def __init__(self, session: Session, provider: ModelProvider, model_label: str, budget_tokens: int | None) -> None:
        self.session = session
        self.provider = provider
        self.model_label = model_label
        self.budget_tokens = budget_tokens  # a window that overrides every other source

    async def open(self, options: ModelOptions) -> tuple[ModelWindow, ModelOptions]:
        """The window this turn is fitted to (see :mod:`services.models.window`) and the options with
        an output cap — the model's configured ``max_tokens``, else the answer's share of the window
        (:func:`~services.assistant.context.answer_reserve`: an eighth, 64 to 2,048 tokens), so that no
        model can ramble until the window is full — and, for Ollama, the ``num_ctx`` that makes the
        server use that same window."""
        from services.models.tokens import Calibration
        from services.models.window import DEFAULT_WINDOW, ModelWindow, learned

        settings = model_settings(self.session.workspace, self.model_label)
        if settings is not None and settings.max_tokens is not None and options.max_tokens is None:
            options = dataclasses.replace(options, max_tokens=settings.max_tokens)
        key = self.key()
        calibration = _CALIBRATIONS.setdefault(key, Calibration())
        said = learned(key)
        if said is not None and calibration.samples == 0:
            calibration.factor = max(calibration.factor, float(said["factor"]))
        if self.budget_tokens is not None:
            window = ModelWindow(self.budget_tokens, "caller", calibration)
        elif settings is not None and settings.context_window is not None:
            window = ModelWindow(settings.context_window, "config", calibration)
        elif said is not None:
            window = ModelWindow(int(said["window"]), "learned", calibration)
        elif (reported := await self._provider_window(key)) is not None:
            window = ModelWindow(reported, "provider", calibration)
        else:
            window = ModelWindow(DEFAULT_WINDOW, "default", calibration)
        if window.source != "default" and options.context_window is None:
            options = dataclasses.replace(options, context_window=window.tokens)  # Ollama's num_ctx
        if options.max_tokens is None:  # every request carries an output cap: the answer's share of the window
            options = dataclasses.replace(options, max_tokens=answer_reserve(window.tokens, None))
        return window, options

    def key(self) -> str:
        from services.models.window import cache_key

        return cache_key(self.provider.name, str(getattr(self.provider, "base_url", "")), self.provider.model)

    async def _provider_window(self, key: str) -> int | None:
        """What the provider says (Ollama's ``show``, a ``/models`` entry), asked once a minute."""
        ask = getattr(self.provider, "context_window", None)
        if ask is None:
            return None
        now = time.monotonic()  # not the frozen clock of tests: this is a cache's age
        cached = _SAID.get(key)
        if cached is not None and now - cached[0] < PROVIDER_WINDOW_TTL_S:
            return cached[1]
        value = await ask()
        _SAID[key] = (now, value)
        return int(value) if value else None

    def learn(
        self, exc: ContextOverflow, fitted: Fitted, window: ModelWindow, fitter: ContextFitter, options: ModelOptions
    ) -> str:
        """A server said the request was too large: take its numbers (or, without any, shrink the
        room by a quarter), keep them for the next process, and fit again."""
        from services.models.window import remember

        said = []
        if exc.prompt_tokens:
            window.calibration.observe(fitted.estimated, exc.prompt_tokens)
            said.append(f"the request: {exc.prompt_tokens} tokens")
        if exc.window:
            said.insert(0, f"its window: {exc.window} tokens")
            window.tokens, window.source = exc.window, "learned"
            remember(self.key(), window.tokens, window.calibration.factor)
        else:  # no window given: it is less than what was just sent
            refused = exc.prompt_tokens or fitted.tokens
            window.tokens, window.source = max(MIN_REFIT_WINDOW, min(window.tokens, refused * 3 // 4)), "learned"
        fitter.window = window.tokens
        fitter.reserve = answer_reserve(window.tokens, options.max_tokens)
        detail = f" ({'; '.join(said)})" if said else ""
        return f"The server refused a request as larger than its context window{detail}; fitted again."

    def report(
        self,
        fitted: Fitted,
        window: ModelWindow,
        fitter: ContextFitter,
        turn_id: str,
        last: LeftOut | None,
        reason: str | None,
    ) -> LeftOut | None:
        """Record what this request left out (and the turns it brought back), once per turn unless it
        changes (or a refit says why)."""
        left = fitted.left_out()
        if reason is None and (left == last or not any(left[:3])):
            return left
        self.session.conversation.record(
            ContextReport(
                window=window.tokens,
                window_source=window.source,
                prompt_tokens=fitted.tokens,
                reserve=fitter.reserve,
                left_out_turns=fitted.left_out_turns,
                left_out_passages=fitted.left_out_handles,
                left_out_tools=fitted.left_out_tools,
                brought_back=[str(hit.get("handle")) for hit in fitted.brought_back],
                reason=reason,
                breakdown=fitted.breakdown,
                turn_id=turn_id,
            )
        )
        return left

    def cut_short(self, turn_id: str, step: int, options: ModelOptions, window: int) -> None:
        limit = f"max_tokens {options.max_tokens}" if options.max_tokens else f"the context window ({window} tokens)"
        settings = model_settings(self.session.workspace, self.model_label)
        if options.max_tokens and (settings is None or settings.max_tokens is None):
            limit += f", the default share of the window; settings.models.{self.model_label}.max_tokens raises it"
        self.session.conversation.record(
            Notice(
                text=f"The model stopped at its length limit ({limit}) in step {step}: the answer may be cut short.",
                level="warning",
                title="length",
                turn_id=turn_id,
            )
        )


def model_settings(workspace: Any, label: str) -> Any:
    """``settings.models.<label or model name>`` of the workspace (None when there is none)."""
    try:
        models = workspace.config.settings.models
    except (AttributeError, AriesError):
        return None
    if not models:
        return None
    return models.get(label) or models.get(label.partition(":")[2])
