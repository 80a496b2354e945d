"""What a tool call is made of, apart from running it: the request, and the approver's side
(the request an approver sees, its decision, the ready-made approvers).

Split from ``gateway.py`` so that the approval queue, the turn loop and the pipeline share these
types without importing the gateway itself.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from services.policy import PolicyDecision, RiskTier


# -- approvals ----------------------------------------------------------------------------------
class ApprovalChoice(StrEnum):
    APPROVE_ONCE = "approve_once"
    APPROVE_SESSION = "approve_session"
    APPROVE_ALWAYS = "approve_always"  # a lasting grant in this workspace (services.grants)
    DENY = "deny"


@dataclass(frozen=True)
class ApprovalDecision:
    choice: ApprovalChoice
    reason: str | None = None
    # APPROVE_ALWAYS: the pattern chosen among the request's ``proposal.choices`` (a GrantPattern).
    pattern: Any = None

    @classmethod
    def once(cls) -> ApprovalDecision:
        return cls(ApprovalChoice.APPROVE_ONCE)

    @classmethod
    def session(cls) -> ApprovalDecision:
        return cls(ApprovalChoice.APPROVE_SESSION)

    @classmethod
    def always(cls, pattern: Any) -> ApprovalDecision:
        return cls(ApprovalChoice.APPROVE_ALWAYS, pattern=pattern)

    @classmethod
    def deny(cls, reason: str | None = None) -> ApprovalDecision:
        return cls(ApprovalChoice.DENY, reason)


@dataclass(frozen=True)
class ApprovalRequest:
    """What the approver (the TUI's modal, the CLI's ``--approve``) is asked about."""

    call_id: str
    tool_id: str
    tier: RiskTier
    args: dict[str, Any]
    decision: PolicyDecision  # action "confirm", with the rule that asks for approval
    preview: dict[str, Any] | None  # e.g. {"kind": "diff", "diff": ...} or {"kind": "command", ...}
    session_pattern: dict[str, Any]  # what "approve for session" would cover
    description: str
    source: str
    # Who asked, beyond ``source``: for a model's call {"turn_id", "model", "tool_call_id", "step"}, and
    # "from_text": true for a call read from the model's text.
    origin: dict[str, Any] = field(default_factory=dict)
    # What "always in this workspace" would store (services.grants.proposal.Proposal); None: not offered.
    proposal: Any = None


class Approver(Protocol):
    """Sync or async callable; the TUI awaits its modal, the CLI answers at once."""

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision | Awaitable[ApprovalDecision]: ...


def approve_all(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision.once()


def deny_all(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision.deny("approval required; no operator is available to approve")


@dataclass
class ToolCallRequest:
    tool_id: str
    args: Any
    source: str = "operator"  # operator | assistant | plan | cli
    run_id: str | None = None
    step_index: int | None = None
    call_id: str | None = None
    turn_id: str | None = None  # the conversation turn that asked (a model's turn, an operator command)
    tool_call_id: str | None = None  # the model's own id for this call, when a model asked
    turn_step: int | None = None  # position inside the turn
    model: str | None = None  # provider:model, when a model asked
    # Read from the model's text, not a native tool call (services.assistant.text_calls): never
    # approved by a session grant or by commander mode.
    from_text: bool = False
    # A workspace command's turn: (its name, the tools it may use). A call of another tool is denied
    # (rule ``command.NAME``) whatever the policy says: a command runs with the intersection of its
    # tools and the active profile's.
    only: tuple[str, frozenset[str]] | None = None
    # Where the output's data is stored instead of the conversation's tool-call entry (an attached
    # file's text is in the message that attached it: stored once); None: in the entry, as usual.
    data_stored_in: str | None = None

    def origin(self) -> dict[str, Any]:
        fields = {
            "turn_id": self.turn_id,
            "model": self.model,
            "tool_call_id": self.tool_call_id,
            "step": self.turn_step,
            "from_text": self.from_text or None,
        }
        return {key: value for key, value in fields.items() if value is not None}


def new_id(prefix: str) -> str:
    """A new id for a call, a run or a preview: ``<prefix>-<UTC date>-<time>-<8 hex digits>``."""
    return f"{prefix}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"


__all__ = [
    "ApprovalChoice",
    "ApprovalDecision",
    "ApprovalRequest",
    "Approver",
    "ToolCallRequest",
    "approve_all",
    "deny_all",
    "new_id",
]
