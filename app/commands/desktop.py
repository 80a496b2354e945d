"""``/desktop REQUEST``: Desktop Ops in the TUI.

With a model configured the request is one turn of the assistant's loop (the ``AssistantController``,
with the tools the policy allows). Without one, ``services.desktop`` parses it into a plan of tool
steps; the plan goes into the transcript and runs step by step through the session's gateway: the
approval modal is the one question, for each step the policy asks about (a y/n on the plan before it
asked twice for the same step). A step denied stops the plan, and the summary says what did not run.
A request that cannot be planned is one clear error notification, never an empty plan.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from services.errors import AriesError
from widgets.messages import ArtifactsChanged

if TYPE_CHECKING:
    from app.commands.assistant import AssistantController
    from app.host import Host
    from services.desktop import DesktopPlan, DesktopRun

ARTIFACT_TOOLS = {"builtin:fs:write_text", "builtin:web:fetch", "builtin:web:search", "builtin:fs:add_artifact"}


class DesktopController:
    def __init__(self, host: Host, assistant: AssistantController) -> None:
        self.host = host
        self.assistant = assistant

    def request(self, text: str) -> None:
        """``/desktop REQUEST…``: the request as typed after the name (quotes kept: the parser reads them)."""
        from services.desktop import check_plan, desktop_route, parse_request

        session = self.host.require_session()
        if desktop_route(session, os.environ) == "model" and text:
            self.assistant.ask(text)
            return
        plan = parse_request(text)  # DesktopError: reported by the App as one line
        check_plan(session, plan)
        self.host.run_worker(self._run(plan), group="desktop", exit_on_error=False)

    async def _run(self, plan: DesktopPlan) -> DesktopRun | None:
        from services.desktop import run_desktop_plan

        session = self.host.require_session()
        key = f"desktop-{id(plan)}"
        self.host.status_start(key, f"desktop  {plan.request[:60]}")
        try:
            run = await run_desktop_plan(session, plan)
        except AriesError as exc:
            self.host.report_error(exc.message, "/desktop")
            return None
        finally:
            self.host.status_stop(key)
        if any(o.result.ok and o.step.tool_id in ARTIFACT_TOOLS for o in run.outcomes):
            self.host.publish(ArtifactsChanged(session))
        if not run.ok:
            self.host.notify(
                run.summary(), title="/desktop", severity="warning" if run.denied else "error", timeout=8, markup=False
            )
        return run
