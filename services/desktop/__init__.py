"""Desktop Ops: common operator tasks from a plain request, through the builtin tools and the gateway.

``parse_request`` (the deterministic parser, used without a model) → ``DesktopPlan`` → shown →
``run_desktop_plan`` (each step a governed call). With a model configured the request is one turn of
the assistant's loop instead (``desktop_route``).
"""

from services.desktop.intents import EXAMPLES, UNDERSTOOD, parse_request
from services.desktop.plan import DesktopError, DesktopPlan, PlanStep, StepRef
from services.desktop.runner import DesktopRun, StepOutcome, check_plan, desktop_route, run_desktop_plan

__all__ = [
    "EXAMPLES",
    "UNDERSTOOD",
    "DesktopError",
    "DesktopPlan",
    "DesktopRun",
    "PlanStep",
    "StepOutcome",
    "StepRef",
    "check_plan",
    "desktop_route",
    "parse_request",
    "run_desktop_plan",
]
