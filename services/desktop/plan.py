"""A Desktop Ops plan: the tool steps a plain request stands for, shown before they run.

A step's arguments are plain JSON values, except where a value comes from an earlier step's result
(the process a ``start`` step began, the first URL a web search found): there a ``StepRef`` stands,
resolved by the runner once that step has run. ``render`` is the one text of a plan that the CLI
prints and the TUI's confirmation screen shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from services.errors import AriesError


class DesktopError(AriesError):
    """A request Desktop Ops cannot turn into tool steps; the message says why and what would work."""

    code = "desktop_request"
    exit_code = 2


@dataclass(frozen=True)
class StepRef:
    """A value taken from the result of step ``step`` (1-based): ``data`` walked along ``path``."""

    step: int
    path: tuple[str | int, ...]

    def label(self) -> str:
        return f"<{'.'.join(map(str, self.path))} of step {self.step}>"

    def resolve(self, data: dict[str, Any] | None) -> Any:
        value: Any = data
        for key in self.path:
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):
                raise DesktopError(
                    f"step {self.step} returned no {'.'.join(map(str, self.path))}: nothing to go on with"
                ) from None
        return value


@dataclass(frozen=True)
class PlanStep:
    tool_id: str
    args: dict[str, Any]
    why: str  # one line for the operator: what this step does

    def shown_args(self) -> dict[str, Any]:
        return {k: (v.label() if isinstance(v, StepRef) else v) for k, v in self.args.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"tool_id": self.tool_id, "args": self.shown_args(), "why": self.why}


@dataclass(frozen=True)
class DesktopPlan:
    request: str
    intent: str  # create | write | read | list | search | run | start | poll | kill | web_search | fetch
    steps: tuple[PlanStep, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.steps:  # never an empty plan: a parser bug, not something to show
            raise DesktopError(f"no tool step for {self.request!r} ({self.intent})")

    def to_dict(self) -> dict[str, Any]:
        return {"request": self.request, "intent": self.intent, "steps": [s.to_dict() for s in self.steps]}

    def render(self) -> str:
        """The plan as plain text: one numbered line per step, its arguments as JSON below it."""
        from services.text.textsafe import neutralize

        lines = [f"Plan for: {self.request}"]
        for n, step in enumerate(self.steps, 1):
            args = json.dumps(step.shown_args(), ensure_ascii=False, sort_keys=True)
            if len(args) > 300:
                args = args[:300] + "…"
            lines.append(f"{n}. {step.tool_id}  {step.why}")
            lines.append(f"   {args}")
        return neutralize("\n".join(lines))
