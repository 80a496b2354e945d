"""The Approvals pane: tool calls waiting for the operator's decision."""

from __future__ import annotations

from typing import Any

from textual.containers import Vertical
from textual.widgets import OptionList, Static


class ApprovalsPane(Vertical):
    BORDER_TITLE = "Approvals"

    def compose(self) -> Any:
        yield Static("No tool calls are waiting for approval.", id="approvals-empty", classes="empty")
        queue = OptionList(id="approvals-list")
        queue.display = False
        yield queue

    def focus_main(self) -> None:
        self.query_one(OptionList).focus()
