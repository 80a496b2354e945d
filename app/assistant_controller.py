"""Turns in the TUI: the headless ``TurnLoop`` with the App's approver (the approval queue and its
modal) and a renderer that streams into the Transcript pane.

Nothing about a turn is decided here: the loop (``services.assistant``) retrieves, calls the model,
sends each tool call through the session's gateway and records everything. This controller only
starts and cancels it, and turns its events into widget updates (in order, as App messages).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from app.messages import TurnEvent
from services.errors import AriesError

if TYPE_CHECKING:
    from textual.worker import Worker

    from app.aries_app import AriesApp
    from widgets.transcript.streaming import StreamingAnswer


class AssistantController:
    def __init__(self, app: AriesApp) -> None:
        self.app = app
        self.worker: Worker[Any] | None = None
        self.turn_id: str | None = None
        self.widget: StreamingAnswer | None = None
        self.model_label = ""
        self._streamed: set[str] = set()  # turns whose answer was streamed (not shown twice)
        self._usage: dict[str, Any] | None = None

    @property
    def running(self) -> bool:
        return self.worker is not None

    def model_setting(self) -> str:
        """The configured provider:model: ``ARIES_MODEL``, else the workspace's ``model`` setting."""
        session = self.app.session
        setting = session.workspace.setting("model") if session is not None else None
        if not (os.environ.get("ARIES_MODEL") or "").strip() and setting in (None, "", "offline"):
            if session is None or not self._profile_may_name_a_model():
                return "offline"  # the default needs no provider code (nor profile loading) at start-up
            setting = session.model_setting()
        from services.models.config import resolve_model

        return str(resolve_model(setting, os.environ).label)

    def _profile_may_name_a_model(self) -> bool:
        """False for the shipped ``default`` profile (which names no model): no need to load it."""
        session = self.app.session
        if session is None:
            return False
        from services.profiles.loader import WORKSPACE_PROFILES

        own = session.workspace.root / WORKSPACE_PROFILES / f"{session.profile_name}.yaml"
        return session.profile_name != "default" or own.exists()

    def ask(self, text: str) -> None:
        session = self.app.require_session()
        if self.running:
            self.app.report_error("A turn is running: wait for it, or cancel it with Ctrl+X.", "assistant")
            return
        from services.models.config import make_provider, resolve_model

        try:
            config = resolve_model(session.model_setting(), os.environ)
            provider = make_provider(config)
        except AriesError as exc:
            self.app.report_error(exc.message, "model")
            return
        self.model_label = config.label
        self.worker = self.app.run_worker(self._turn(text, provider), group="turn", exit_on_error=False)
        self.app.refresh_bindings()

    async def _turn(self, text: str, provider: Any) -> None:
        from services.assistant import TurnLoop

        session = self.app.require_session()
        loop = TurnLoop(
            session,
            provider,
            on_event=lambda event: self.app.post_message(TurnEvent(event)),
            cloud_approve=self._cloud_approver(session),
        )
        try:
            await loop.run(text)
        finally:
            await provider.aclose()
            self.worker = None
            self.app.refresh_bindings()

    def _cloud_approver(self, session: Any) -> Any:
        """The bridge's ``ask`` approval: the modal showing exactly the redacted text."""
        from screens.cloud_send import modal_approver
        from services.assistant.cloud import bridge_for
        from services.bridge import BridgeConfig

        try:
            config = bridge_for(session)
        except AriesError:
            config = BridgeConfig()  # the turn's cloud step reports the bad configuration itself
        return modal_approver(self.app, config)

    def cancel(self) -> bool:
        if self.worker is None:
            return False
        self.worker.cancel()
        return True

    # -- /model -------------------------------------------------------------------------------
    def model_command(self, args: list[str]) -> None:
        from app.commands import CommandError

        session = self.app.require_session()
        if not args or args == ["list"]:
            self.app.run_worker(self._list_models(), group="model", exit_on_error=False)
            return
        if args[0] == "use" and len(args) == 2:
            from services.models.config import resolve_model

            try:
                config = resolve_model(args[1], {k: v for k, v in os.environ.items() if k != "ARIES_MODEL"})
            except AriesError as exc:
                raise CommandError(exc.message) from exc
            session.workspace.update(model=args[1])
            note = ""
            if os.environ.get("ARIES_MODEL"):
                note = f" ARIES_MODEL={os.environ['ARIES_MODEL']} is set in the environment and wins while it is."
            self.app.say(f"Model for workspace {session.workspace.name}: {config.label}.{note}", "model")
            self.app.reload_panes(transcript=False)
            return
        raise CommandError("cannot read the model command.")

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
        self.app.say("\n".join(lines), "model")

    def probe_local_ollama(self) -> None:
        """Ask a local Ollama which models it has, in the background, after start-up (never delaying it)."""
        if os.environ.get("ARIES_MODEL"):
            return

        def probe() -> None:
            import asyncio

            from services.models.config import probe_ollama

            models = asyncio.run(probe_ollama(os.environ.get("OLLAMA_HOST")))
            if models:
                self.app.call_from_thread(
                    self.app.notify,
                    f"Ollama answers here with {len(models)} model(s): /model lists them, /model use picks one.",
                    title="model",
                    timeout=6,
                    markup=False,
                )

        self.app.run_worker(probe, thread=True, group="probe", exit_on_error=False)

    # -- rendering (on the App's thread, in the order the loop reported) -----------------------
    async def show(self, event: Any) -> None:
        from services.assistant import (
            Cancelled,
            Decided,
            Done,
            Failed,
            Retrieved,
            SchemaInvalid,
            TextDelta,
            ToolFinished,
            ToolProposed,
            UsageReport,
        )

        app = self.app
        if isinstance(event, Retrieved):
            self.turn_id = event.turn_id
            if event.index is not None:
                app.show_hits(
                    f"injected for: {event.query}  ·  index {event.index}  ·  turn {event.turn_id}", event.hits
                )
            app.status_start(f"turn-{event.turn_id}", f"{self.model_label} is answering", cancellable=True)
        elif isinstance(event, TextDelta):
            widget = await self._widget(event.turn_id)
            if widget is not None:
                await widget.write(event.text)
        elif isinstance(event, ToolProposed):
            app.status_start(
                f"call-{event.tool_call_id}", f"{event.tool_id} (asked by {self.model_label})", cancellable=True
            )
            if self.widget is not None:  # text after the tool call streams into a new block, below the call
                await self.widget.finish(self.widget.text, [], None, "asked for a tool")
                self.widget = None
        elif isinstance(event, Decided):
            pass
        elif isinstance(event, SchemaInvalid):
            if self.widget is not None:  # that attempt stays on screen, marked; a retry streams below it
                state = "not valid for the output schema" + (" · asking once more" if event.retrying else "")
                await self.widget.finish(self.widget.text, [], None, state)
                if event.retrying:
                    self.widget = None
        elif isinstance(event, ToolFinished):
            app.status_stop(f"call-{event.tool_call_id}")
        elif isinstance(event, UsageReport):
            self._usage = {
                "prompt_tokens": event.prompt_tokens,
                "completion_tokens": event.completion_tokens,
                "elapsed_ms": event.elapsed_ms,
                "steps": event.steps,
                "prompt_tokens_estimated": event.prompt_tokens_estimated,
            }
        elif isinstance(event, Done):
            widget = await self._widget(event.turn_id)
            if widget is not None:
                await widget.finish(event.text, event.citations, self._usage)
            self._end(event.turn_id)
        elif isinstance(event, Cancelled | Failed):
            if self.widget is not None:
                await self.widget.finish("", [], None, "cancelled" if isinstance(event, Cancelled) else "failed")
            self._close_modal_of(event.turn_id)
            self._end(event.turn_id)

    async def _widget(self, turn_id: str) -> StreamingAnswer | None:
        if self.widget is not None and self.widget.turn_id == turn_id:
            return self.widget
        pane = self.app.transcript_pane()
        if pane is None:
            return None
        from widgets.transcript.streaming import StreamingAnswer

        self.widget = StreamingAnswer(turn_id, self.model_label)
        await pane.mount(self.widget)
        pane.scroll_end(animate=False)
        return self.widget

    def streams(self, entry: dict[str, Any]) -> bool:
        """True for the recorded answer of a turn already shown as a stream (not shown twice)."""
        return (
            entry.get("role") == "assistant"
            and entry.get("provenance") != "cloud"  # the cloud's answer is never streamed
            and entry.get("turn_id") is not None
            and (entry.get("turn_id") == self.turn_id or entry.get("turn_id") in self._streamed)
        )

    def _end(self, turn_id: str) -> None:
        self._streamed.add(turn_id)
        self.app.status_stop(f"turn-{turn_id}")
        self.widget = None

    def _close_modal_of(self, turn_id: str) -> None:
        from screens.approval import ApprovalScreen

        screen = self.app.screen
        if isinstance(screen, ApprovalScreen) and screen.request.origin.get("turn_id") == turn_id:
            screen.dismiss(None)
            self.app.call_after_refresh(self.app.focus_prompt_if_queue_done)
