"""The Approvals pane: tool calls waiting for the operator's decision."""

from __future__ import annotations

from typing import Any

from textual.containers import Vertical
from textual.widgets import Static


class ApprovalsPane(Vertical):
    """Shows an empty state until a call waits; the queue list is mounted on first use."""

    BORDER_TITLE = "Approvals"
    can_focus = True

    def compose(self) -> Any:
        yield Static("No tool calls are waiting for approval.", id="approvals-empty", classes="empty")

    def focus_main(self) -> None:
        lists = self.query("#approvals-list")
        (lists.first() if lists else self).focus()
