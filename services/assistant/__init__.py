"""The assistant: one headless turn loop that every surface drives.

``TurnLoop.run(text)``: the operator's message → retrieval (the injected set recorded) → the model,
streamed → zero or more tool calls, each through the session's one gateway (policy, then the
approver the caller gave: the TUI's modal, a headless allow-list, or deny) → results or structured
denials back to the model → … until the model answers or ``max_steps`` is reached. It emits typed
``LoopEvent``s for a renderer and records the turn in the conversation; the TUI, ``aries ask``, plan
runs and replay differ only in the approver and the renderer.
"""

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
from services.assistant.loop import TurnLoop, TurnOutcome

__all__ = [
    "Cancelled",
    "CloudResult",
    "ContextMeasured",
    "Decided",
    "Done",
    "Failed",
    "LoopEvent",
    "Phase",
    "Retrieved",
    "SchemaInvalid",
    "TextDelta",
    "ToolFinished",
    "ToolProposed",
    "TurnLoop",
    "TurnOutcome",
    "UsageReport",
]
