"""``/history``: the workspace's conversations, newest first — when, how many turns, which model,
the first prompt. Enter resumes the highlighted one (the transcript shows it, new turns append to
it); ``f`` forks it (a copy to continue differently, the original left as it was); Esc closes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from widgets.safe import clean, plain

if TYPE_CHECKING:
    from services.conversation.history import ConversationSummary


class ConversationsScreen(ModalScreen[tuple[str, str] | None]):
    """Dismisses with ``("resume", id)``, ``("fork", id)`` or ``None``."""

    CSS_PATH = "conversations.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Close", id="history.close", tooltip="Close the list, change nothing"),
        Binding(
            "f",
            "fork",
            "Fork",
            id="history.fork",
            tooltip="Fork the highlighted conversation: a new one holding its turns (the original stays as it was)",
        ),
    ]

    def __init__(self, summaries: list[ConversationSummary], workspace: str, current: str) -> None:
        super().__init__()
        self.summaries = list(reversed(summaries))  # newest first
        self.workspace = workspace
        self.current = current

    def compose(self) -> Any:
        with Vertical(id="conversations"):
            title = f"Conversations · workspace {self.workspace} · {len(self.summaries)} stored"
            yield Static(plain(title, single_line=True), id="conversations-title")
            yield OptionList(*[self._option(s) for s in self.summaries], id="conversations-list")
            yield Static("↑ ↓ choose · Enter resume · f fork · Esc close", id="conversations-keys", markup=False)

    def _option(self, summary: ConversationSummary) -> Option:
        when = str(summary.updated_at or summary.started_at or "")[:16].replace("T", " ")
        model = summary.model or "no answer yet"
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append(clean(f"{when}  {summary.turns} turn(s) · {model}", single_line=True))
        head.append(clean(f"  {summary.conversation_id}", single_line=True), style="dim")
        if summary.conversation_id == self.current:
            head.append("  (open)", style="bold")
        first = Text(no_wrap=True, overflow="ellipsis")
        first.append("  ")
        first.append(clean(summary.first_prompt or "(no prompt)", single_line=True), style="italic")
        if summary.marks():
            first.append(clean(f"  · {summary.marks()}", single_line=True), style="dim")
        return Option(Text.assemble(head, "\n", first), id=summary.conversation_id)

    def on_mount(self) -> None:
        listing = self.query_one(OptionList)
        if self.summaries:
            listing.highlighted = 0
        listing.focus()

    def _highlighted(self) -> str | None:
        listing = self.query_one(OptionList)
        if listing.highlighted is None:
            return None
        return str(listing.get_option_at_index(listing.highlighted).id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(("resume", str(event.option.id)))

    def action_fork(self) -> None:
        chosen = self._highlighted()
        if chosen is not None:
            self.dismiss(("fork", chosen))

    def action_cancel(self) -> None:
        self.dismiss(None)
