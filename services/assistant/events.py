"""What the turn loop tells its renderer, as it happens. Small frozen dataclasses.

These are for showing progress (a streamed token, a tool call waiting); the conversation writer
records the lasting facts (message, retrieval set, tool calls with their audit ids, the answer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.models.window_budget import ContextBreakdown


class Phase(StrEnum):
    """Where a turn is (``Cancelled.where``: what a cancel interrupted). A ``str``: ``"streaming"``."""

    RETRIEVAL = "retrieval"  # begin: the message recorded, retrieval, the window opened
    STREAMING = "streaming"  # a model step
    TOOL = "tool"  # the step's tool calls, through the gateway (and the approver)
    CLOUD = "cloud"  # after Done: the bridge's cloud step

    @property
    def doing(self) -> str:
        """The phase in the operator's words: "Turn cancelled by the operator while <doing>"."""
        return _DOING[self]


_DOING = {
    Phase.RETRIEVAL: "retrieving",
    Phase.STREAMING: "the model was answering",
    Phase.TOOL: "a tool call ran or waited for approval",
    Phase.CLOUD: "the cloud step ran (the local answer is recorded)",
}


@dataclass(frozen=True)
class Retrieved:
    turn_id: str
    query: str
    index: str | None
    hits: list[dict[str, Any]]
    dropped: list[str] = field(default_factory=list)  # handles left out for the context budget
    brought_back: list[dict[str, Any]] = field(default_factory=list)  # left-out earlier turns sent back


@dataclass(frozen=True)
class TextDelta:
    turn_id: str
    step: int
    text: str


@dataclass(frozen=True)
class ToolProposed:
    turn_id: str
    step: int
    tool_id: str
    args: Any
    tool_call_id: str


@dataclass(frozen=True)
class Decided:
    """The gateway's decision on a proposed call (after approval, when one was asked)."""

    turn_id: str
    step: int
    tool_id: str
    tool_call_id: str
    call_id: str | None
    action: str  # allow | confirm | deny
    rule: str | None
    approved_by: str | None


@dataclass(frozen=True)
class ToolFinished:
    turn_id: str
    step: int
    tool_id: str
    tool_call_id: str
    call_id: str | None  # the audit row
    ok: bool
    summary: str
    from_text: bool = False  # read from the model's text, not a native tool call


@dataclass(frozen=True)
class UsageReport:
    turn_id: str
    prompt_tokens: int
    completion_tokens: int
    elapsed_ms: float
    steps: int
    prompt_tokens_estimated: int = 0  # Aries' own count of the last request, for a server that gives none
    completion_tokens_estimated: int = 0  # the output counted by Aries where the server gave no count
    generating_ms: float = 0.0  # from the first streamed text to the end, over the turn's steps (tokens/s)


@dataclass(frozen=True)
class ContextMeasured:
    """A request was sent: how it shared the window (after every model call; the TUI's meter)."""

    turn_id: str
    step: int
    breakdown: ContextBreakdown


@dataclass(frozen=True)
class Failed:
    turn_id: str
    error_type: str
    message: str


@dataclass(frozen=True)
class Cancelled:
    turn_id: str
    where: Phase


@dataclass(frozen=True)
class SchemaInvalid:
    """The answer did not satisfy the profile's ``output_schema`` (``retrying``: the model gets one
    more try with the error; the text that streamed so far was that failed attempt)."""

    turn_id: str
    step: int
    error: str
    retrying: bool


@dataclass(frozen=True)
class Done:
    turn_id: str
    text: str
    citations: list[str]
    checks: dict[str, Any] | None = None  # the citation checks as recorded (services.assistant.citation_turn)


@dataclass(frozen=True)
class CloudResult:
    """The turn's cloud step (after ``Done``): ``status`` sent | declined | refused | error |
    not_configured (``off`` and ``confident`` are not reported); ``text`` is the cloud's answer."""

    turn_id: str
    mode: str
    status: str
    model: str | None = None
    text: str = ""
    reason: str | None = None


LoopEvent = (
    Retrieved
    | TextDelta
    | ToolProposed
    | Decided
    | ToolFinished
    | UsageReport
    | ContextMeasured
    | Failed
    | Cancelled
    | SchemaInvalid
    | Done
    | CloudResult
)
