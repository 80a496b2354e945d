"""The trust review: what an imported workspace's settings would put in force, and the choice to trust them.

Opened by ``/trust`` (and offered when an untrusted workspace opens). Dismisses with ``True`` to trust
(the App puts the settings in force and reads them again) or ``False`` to leave the workspace as it is.
The lines come from untrusted files: they are shown literally and neutralised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from widgets.safe import clean, plain

if TYPE_CHECKING:
    from services.trust.records import TrustState
    from services.trust.review import Review

GROUPS = (
    (0, "Starts programs or opens connections", "bold red"),
    (1, "Widens what tools may touch, how calls are approved, or what the model is told", "bold yellow"),
    (2, "Other", "bold"),
)


def review_text(review: Review) -> Text:
    """The review as plain, neutralised lines (riskiest group first; for a change, + and - lines)."""
    text = Text()
    if not review.first:
        text.append("Since you last trusted it:\n", "bold")
        for line in review.added:
            text.append(f"  + {clean(line, single_line=True)}\n", "yellow")
        for line in review.removed:
            text.append(f"  - {clean(line, single_line=True)}\n", "dim")
        if not review.added and not review.removed:
            text.append("  (nothing that changes what runs or what tools may touch)\n", "dim")
        return text
    if not review.lines:
        text.append("Its settings change nothing beyond Aries's defaults.\n")
        return text
    text.append("Trusting it puts these settings in force (now: Aries's defaults):\n")
    for risk, title, style in GROUPS:
        group = [line.text for line in review.lines if line.risk == risk]
        if group:
            text.append(f"{title}\n", style)
            for line in group:
                text.append(f"  • {clean(line, single_line=True)}\n")
    return text


class TrustScreen(ModalScreen[bool]):
    """You should see the workspace's name and state, the grouped lines, and the keys t / Esc."""

    CSS_PATH = "trust.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "answer(True)", "Trust", id="trust.yes", tooltip="Put these settings in force"),
        Binding("n,escape", "answer(False)", "Not now", id="trust.no", tooltip="Keep Aries's defaults in force"),
    ]

    def __init__(self, name: str, state: TrustState, review: Review) -> None:
        super().__init__()
        self.workspace_name = name
        self.state = state
        self.review = review

    def compose(self) -> Any:
        with Vertical(id="trust"):
            yield Static(
                plain(f"Workspace {self.workspace_name}: {self.state.label}", single_line=True), id="trust-title"
            )
            with VerticalScroll(id="trust-body"):
                yield Static(plain(self.state.reason), id="trust-reason")
                yield Static(review_text(self.review), id="trust-lines")
            yield Static("t trust  ·  n / Esc not now (Aries's defaults stay in force)", id="trust-keys", markup=False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
