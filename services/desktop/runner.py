"""Running a Desktop Ops plan: each step through the session's gateway, in order.

Every step is an ordinary governed call (``Session.call_tool``: schema, policy, approval, audit row,
transcript event); nothing here touches a file, a process or the network itself. The plan is
recorded first as a notice, so the transcript shows what was asked and what ran. A step whose call
fails (a denial included) stops the run: later steps may need its result.

``desktop_route`` says how a request is served: ``model`` (one turn of the assistant's ``TurnLoop``
with the tools the policy allows) when a model is configured, else ``parser`` (this package).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.desktop.plan import DesktopError, DesktopPlan, PlanStep, StepRef

if TYPE_CHECKING:
    from services.session.session import Session
    from services.tools.calls import Approver
    from services.tools.results import ToolResult


@dataclass
class StepOutcome:
    number: int
    step: PlanStep
    args: dict[str, Any]  # as sent, references resolved
    result: ToolResult


@dataclass
class DesktopRun:
    plan: DesktopPlan
    outcomes: list[StepOutcome] = field(default_factory=list)
    stopped: str | None = None  # why the run stopped before its last step (None: it ran them all)

    @property
    def ok(self) -> bool:
        return self.stopped is None and all(o.result.ok for o in self.outcomes)

    @property
    def denied(self) -> bool:
        return any(o.result.denied for o in self.outcomes)

    def summary(self) -> str:
        """One line per step run, and why the run stopped, as plain neutralised text."""
        from services.text.textsafe import neutralize

        lines = []
        for outcome in self.outcomes:
            result = outcome.result
            if result.ok:
                state = "ok"
            else:
                error = result.error
                state = f"{error.type}: {error.message}" if error is not None else "failed"
            lines.append(f"{outcome.number}. {outcome.step.tool_id}: {state}")
        if self.stopped is not None:
            lines.append(f"Stopped: {self.stopped}")
        else:
            failed = sum(1 for o in self.outcomes if not o.result.ok)
            tail = f", {failed} of them failed or denied" if failed else ""
            lines.append(f"Done: {len(self.outcomes)} step(s) ran{tail}.")
        return neutralize("\n".join(lines))

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_dict(),
            "ok": self.ok,
            "stopped": self.stopped,
            "steps": [{"step": o.number, "tool_id": o.step.tool_id, **o.result.to_dict()} for o in self.outcomes],
        }


def desktop_route(session: Session, env: Mapping[str, str]) -> str:
    """``model`` when a model is configured (``ARIES_MODEL``, the workspace or profile setting), else
    ``parser``. A setting that cannot be read raises its ``ConfigError``."""
    from services.models.config import resolve_model

    return "parser" if resolve_model(session.model_setting(), env).provider == "offline" else "model"


def check_plan(session: Session, plan: DesktopPlan) -> None:
    """Raise ``DesktopError`` naming the first step whose tool the policy in force does not enable —
    said before anything runs, instead of a plan that can only be denied."""
    from services.tools.builtin import default_registry
    from services.tools.records import describe_tools

    enabled = {t["id"]: t["enabled"] for t in describe_tools(default_registry(), session.policy())}
    for n, step in enumerate(plan.steps, 1):
        if step.tool_id not in enabled:
            raise DesktopError(f"step {n} needs {step.tool_id}, which is not registered")
        if not enabled[step.tool_id]:
            raise DesktopError(
                f"step {n} needs {step.tool_id}, which the policy in force ({session.policy_source}) does not "
                "enable: enable its tool class in policy.yaml"
            )


def _resolve(step: PlanStep, done: list[StepOutcome]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for key, value in step.args.items():
        if isinstance(value, StepRef):
            source = done[value.step - 1].result
            args[key] = value.resolve(source.data)
        else:
            args[key] = value
    return args


async def run_desktop_plan(
    session: Session, plan: DesktopPlan, *, approver: Approver | None = None, source: str | None = None
) -> DesktopRun:
    """Run ``plan``'s steps through ``session``'s gateway, in order, stopping at the first failure."""
    from services.conversation.events import Notice

    check_plan(session, plan)
    session.conversation.record(Notice(text=plan.render(), title="desktop"))
    run = DesktopRun(plan)
    for n, step in enumerate(plan.steps, 1):
        try:
            args = _resolve(step, run.outcomes)
        except DesktopError as exc:
            run.stopped = f"step {n}: {exc.message}"
            break
        result = await session.call_tool(step.tool_id, args, approver=approver, source=source)
        run.outcomes.append(StepOutcome(n, step, args, result))
        if not result.ok:
            if n < len(plan.steps):
                kind = result.error.type if result.error is not None else "error"
                left = f"step {n + 1}" if n + 1 == len(plan.steps) else f"steps {n + 1}–{len(plan.steps)}"
                run.stopped = f"step {n} ({step.tool_id}) ended in {kind}; {left} did not run"
            break
    session.conversation.record(Notice(text=run.summary(), title="desktop", level="info" if run.ok else "warning"))
    return run
