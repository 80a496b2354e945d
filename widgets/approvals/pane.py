"""The Approvals pane: tool calls waiting for the operator's decision. Enter opens one.

It follows the active session's signals (``widgets.signals``), subscribed when mounted, and shows the
session's queue again when the session is shown, when what is in force changes (a mode or policy
change can deny waiting calls) and when the queue changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from widgets.messages import ApprovalsChanged, SessionChanged
from widgets.safe import clip
from widgets.signals import SessionSignals, follow_sessions
from widgets.toolinfo import key_argument, tier_style

if TYPE_CHECKING:
    from services.tools.calls import ApprovalRequest


def queue_label(request: ApprovalRequest, variables: Mapping[str, str] | None = None) -> Text:
    """Three plain lines (never markup): tool and tier (coloured from the theme's ``variables``), key
    argument, why it waits."""
    tier = str(request.tier)
    return Text.assemble(
        (clip(request.tool_id.removeprefix("builtin:"), 60), "bold"),
        "  ",
        (clip(tier, 24), tier_style(tier, variables)),
        "\n  ",
        (clip(key_argument(request), 70), ""),
        "\n  ",
        (clip(request.decision.reason, 70), "dim"),
    )


class ApprovalsPane(Vertical):
    """Shows an empty state until a call waits; the queue list is mounted on first use."""

    BORDER_TITLE = "Approvals"
    can_focus = True
    DEFAULT_CSS = """
    ApprovalsPane.-has-items #approvals-empty { display: none; }
    """

    @dataclass
    class Open(Message):
        """The operator pressed Enter on a pending call."""

        call_id: str

    @dataclass
    class Changed(Message):
        """The queue was replaced; ``count`` calls wait now."""

        count: int

    def compose(self) -> Any:
        yield Static("No tool calls are waiting for approval.", id="approvals-empty", classes="empty", markup=False)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "open",
            "Open",
            show=False,
            id="approvals.open",
            tooltip="Open the highlighted call in the approval modal",
        ),
    ]

    def focus_main(self) -> None:
        def focus() -> None:
            lists = self.query("#approvals-list")
            (lists.first() if lists else self).focus()

        self.call_after_refresh(focus)

    def action_open(self) -> None:
        lists = self.query("#approvals-list")
        if not lists:
            return
        queue = lists.first(OptionList)
        if queue.highlighted is not None:
            option = queue.get_option_at_index(queue.highlighted)
            if option.id:
                self.post_message(self.Open(option.id))

    def _list(self) -> OptionList:
        lists = self.query("#approvals-list")
        if lists:
            return lists.first(OptionList)
        queue = OptionList(id="approvals-list")
        self.mount(queue)
        return queue

    @property
    def count(self) -> int:
        """How many calls wait."""
        return self._count

    _count = 0

    def show(self, requests: list[ApprovalRequest]) -> None:
        """Replace the queue with ``requests`` (oldest first), keeping the highlight where possible.

        Never moves the focus: a newly queued call must not take the operator away from the prompt.
        """
        self._count = len(requests)
        self.post_message(self.Changed(len(requests)))
        if not requests and not self.query("#approvals-list"):
            return
        queue = self._list()
        highlighted = queue.highlighted
        queue.clear_options()
        for request in requests:
            queue.add_option(Option(queue_label(request, self.app.theme_variables), id=request.call_id))
        self.set_class(bool(requests), "-has-items")
        queue.display = bool(requests)
        self.border_subtitle = f"{len(requests)} waiting" if requests else ""
        if requests:
            queue.highlighted = min(highlighted or 0, len(requests) - 1)

    def on_mount(self) -> None:
        follow_sessions(self, self._session_opened)

    def _session_opened(self, signals: SessionSignals) -> None:
        signals.changed.subscribe(self, self._queue_changed)
        signals.approvals.subscribe(self, self._queue_changed)
        self.show(signals.session.approvals.pending())

    def _queue_changed(self, message: SessionChanged | ApprovalsChanged) -> None:
        self.show(message.session.approvals.pending())

    @on(OptionList.OptionSelected, "#approvals-list")
    def _open(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(self.Open(event.option.id))
