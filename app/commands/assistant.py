"""Turns in the TUI: the headless ``TurnLoop`` with the App's approver (the approval queue and its
modal); ``/model``.

Nothing about a turn is decided here: the loop (``services.assistant``) retrieves, calls the model,
sends each tool call through the session's gateway and records everything. This controller only
starts and cancels it; the loop's events are published on the session's ``turn`` signal as
``TurnEvent``s (in order): the Transcript pane streams the answer from them and reconciles it with the
recorded one, the status row follows the turn and its tool calls.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from services.errors import AriesError
from widgets.messages import SessionChanged, TurnEvent

if TYPE_CHECKING:
    from textual.worker import Worker

    from app.commands.approvals import ApprovalsController
    from app.host import Host
    from widgets.commands import Action, Named


class AssistantController:
    def __init__(self, host: Host, approvals: ApprovalsController) -> None:
        self.host = host
        self.approvals = approvals
        self.worker: Worker[Any] | None = None
        self.model_label = ""

    @property
    def running(self) -> bool:
        return self.worker is not None

    def operator_model(self) -> str | None:
        """The operator's ``ARIES_MODEL``, as what is in force holds it (``services.session.inforce``)."""
        session = self.host.session
        if session is not None:
            return session.in_force.operator.model
        from services.session.inforce import Operator

        return Operator.for_session().model

    def model_setting(self) -> str:
        """The model in force (``InForce.model``): ``ARIES_MODEL``, else the workspace's ``model``
        setting, else the profile's default model, as a ``provider:model`` label."""
        from services.session.inforce import Operator

        session = self.host.session
        in_force = session.in_force if session is not None else None
        operator = in_force.operator if in_force is not None else Operator.for_session()
        if not operator.model and (
            in_force is None or (in_force.workspace_model in (None, "", "offline") and not in_force.profile_may_set())
        ):
            return "offline"  # the default needs no provider code (nor profile loading) at start-up
        from services.models.config import resolve_model

        setting = session.model_setting() if session is not None else None
        return str(resolve_model(setting, operator.model_env()).label)

    def ask(self, text: str, *, only: tuple[str, frozenset[str]] | None = None) -> None:
        """A turn for ``text`` (``only``: a workspace command's ``(name, tools)``: the turn may use no others)."""
        session = self.host.require_session()
        if self.running:
            self.host.report_error("A turn is running: wait for it, or cancel it with Ctrl+X.", "assistant")
            return
        from services.models.config import make_provider, resolve_model

        try:
            config = resolve_model(session.model_setting(), session.in_force.model_env())
            provider = make_provider(config)
        except AriesError as exc:
            self.host.report_error(exc.message, "model")
            return
        self.model_label = config.label
        self.worker = self.host.run_worker(self._turn(text, provider, only), group="turn", exit_on_error=False)
        self.host.refresh_bindings()
        self.host.run_worker(_warm_redactor, thread=True, group="warm-redactor", exit_on_error=False)

    async def _turn(self, text: str, provider: Any, only: tuple[str, frozenset[str]] | None = None) -> None:
        from services.assistant import TurnLoop

        session = self.host.require_session()
        label = self.model_label
        loop = TurnLoop(
            session,
            provider,
            on_event=lambda event: self.host.publish(TurnEvent(event, label, session)),
            cloud_approve=self._cloud_approver(session),
            only=only,
        )
        try:
            sent = await self._attach(session, text)
            await loop.run(sent, query=text)  # retrieval searches what was typed, not the attached files
        finally:
            await provider.aclose()
            self.worker = None
            self.host.refresh_bindings()

    async def _attach(self, session: Any, text: str) -> str:
        """``@path`` words: each file read through the gateway (its call in the transcript) and its
        text added to what the model is sent (``services.assistant.attachments``)."""
        from services.assistant.attachments import attach, describe, mentions

        if not mentions(text):
            return text
        key = f"attach-{id(text)}"
        self.host.status_start(key, "attaching " + " ".join(f"@{m}" for m in mentions(text)), cancellable=True)
        try:
            sent, attached = await attach(session, text)
        finally:
            self.host.status_stop(key)
        line, problem = describe(attached)
        self.host.notify(line, title="@ attachments", severity="warning" if problem else "information", timeout=6)
        return sent

    def _cloud_approver(self, session: Any) -> Any:
        """The bridge's ``ask`` approval: the modal showing exactly the redacted text."""
        from screens.cloud_send import modal_approver
        from services.assistant.cloud import bridge_for
        from services.workspace.bridge_config import BridgeConfig

        try:
            config = bridge_for(session)
        except AriesError:
            config = BridgeConfig()  # the turn's cloud step reports the bad configuration itself
        return modal_approver(self.host.push_screen, config)

    def usage(self) -> None:
        """``/usage``: how the last request shared the window, part by part, as a transcript notice —
        the one heard in this session, else the last one recorded in the conversation."""
        from services.models.window_budget import recorded

        session = self.host.require_session()
        breakdown = self.host.meter or recorded(session.conversation.read().entries)
        if breakdown is None:
            self.host.say("No request has been sent to a model in this conversation yet.", "usage")
            return
        lines = ["The last request to the model, as Aries counts it (tokens):", *breakdown.lines()]
        self.host.say("\n".join(lines), "usage")

    def tools_offered(self) -> None:
        """``/tools offered``: the tools the last request offered the model and why (the last answer's
        ``usage.tools_offered``, services/assistant/tool_offer.py)."""
        from services.assistant.tool_offer import offered_lines

        session = self.host.require_session()
        for entry in reversed(session.conversation.read().entries):
            usage = entry.get("usage")
            if isinstance(usage, dict) and isinstance(usage.get("tools_offered"), dict):
                self.host.say("\n".join(offered_lines(usage["tools_offered"])), "tools offered")
                return
        self.host.say("No request has offered tools to a model in this conversation yet.", "tools offered")

    def cancel(self) -> bool:
        if self.worker is None:
            return False
        self.worker.cancel()
        return True

    # -- /model -------------------------------------------------------------------------------
    def model_command(self, parsed: Action | Named) -> None:
        """The parsed ``/model`` line: ``list``, or ``use PROVIDER:MODEL`` / ``use offline``."""
        from widgets.commands import Action, CommandError

        session = self.host.require_session()
        if isinstance(parsed, Action):
            self.host.run_worker(self._list_models(), group="model", exit_on_error=False)
            return
        from services.models.config import resolve_model  # use PROVIDER:MODEL | use offline

        try:
            config = resolve_model(parsed.name, {k: v for k, v in os.environ.items() if k != "ARIES_MODEL"})
        except AriesError as exc:
            raise CommandError(exc.message) from exc
        session.update_settings(model=parsed.name)
        note = ""
        if session.in_force.operator.model:
            note = f" ARIES_MODEL={session.in_force.operator.model} is set in the environment and wins while it is."
        self.host.say(f"Model for workspace {session.workspace.name}: {config.label}.{note}", "model")
        self.host.publish(SessionChanged(session))

    async def _list_models(self) -> None:
        from services.models.listing import list_providers

        listings = await list_providers(os.environ)
        try:
            current = self.model_setting()
        except AriesError as exc:
            current = f"not usable: {exc.message}"
        lines = [f"Model in use: {current}"]
        for listing in listings:
            lines.append(f"  {listing.line()}")
        lines.append("Choose one with /model use PROVIDER:MODEL (e.g. /model use ollama:llama3.2); ARIES_MODEL wins.")
        self.host.say("\n".join(lines), "model")

    def probe_local_ollama(self) -> None:
        """Ask a local Ollama which models it has, in the background, after start-up (never delaying it)."""
        if self.operator_model():
            return

        self.host.run_worker(self._probe, group="probe", exit_on_error=False)

    async def _probe(self) -> None:
        def probe() -> list[str]:  # a thread with its own event loop: aiohttp loads there, not here
            import asyncio

            from services.models.config import probe_ollama

            return asyncio.run(probe_ollama(os.environ.get("OLLAMA_HOST"))) or []

        import asyncio

        models = await asyncio.to_thread(probe)
        if models:
            self.host.notify(
                f"Ollama answers here with {len(models)} model(s): /model lists them, /model use picks one.",
                title="model",
                timeout=6,
            )


def _warm_redactor() -> None:
    """A turn's text is indexed for ``/history search`` through the secret detectors: they (and the
    search's modules, Tantivy) load while the turn runs — as the prompt history's record loads the
    detectors on the prompt's path —, not in the first search after it (~0.3 s). Never at start-up: the
    idle workbench does not keep them (issue 29)."""
    import tantivy  # noqa: F401 - loaded now, not in the first search

    from services.history_search import query  # noqa: F401
    from services.history_search.redaction import redact_secrets

    redact_secrets("")
