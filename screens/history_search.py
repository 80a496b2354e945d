"""``/history search QUERY``: the hits of a search over every conversation of the workspace — its
conversation, date, turn, role (and tool), and a snippet with the matched words highlighted. Enter
opens that conversation (resumes it, the turn named), ``f`` forks it after that turn; Esc closes.
Every piece of transcript text is shown neutralised, as plain text (never markup)."""

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
    from services.history_search.query import Hit, SearchResult

Chosen = tuple[str, str, int]
"""``("open" | "fork", conversation id, turn)``."""


class HistorySearchScreen(ModalScreen[Chosen | None]):
    """Dismisses with ``("open", id, turn)``, ``("fork", id, turn)`` or ``None``."""

    CSS_PATH = "history_search.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Close", id="history_search.close", tooltip="Close the hits, change nothing"),
        Binding(
            "f",
            "fork",
            "Fork",
            id="history_search.fork",
            tooltip="Fork the hit's conversation after its turn: a new conversation to continue from there",
        ),
    ]

    def __init__(self, result: SearchResult, workspace: str) -> None:
        super().__init__()
        self.result = result
        self.workspace = workspace

    def compose(self) -> Any:
        result = self.result
        with Vertical(id="history-search"):
            partial = (
                f" · partial: {result.coverage.indexed} of {result.coverage.total} conversations indexed"
                if result.partial
                else ""
            )
            title = f"Search {result.query!r} · workspace {self.workspace} · {len(result.hits)} hit(s){partial}"
            yield Static(plain(title, single_line=True), id="history-search-title")
            options = [self._option(n, hit) for n, hit in enumerate(result.hits)]
            yield OptionList(*options, id="history-search-list")
            yield Static("↑ ↓ choose · Enter open · f fork after the turn · Esc close", id="history-search-keys")

    @staticmethod
    def _option(number: int, hit: Hit) -> Option:
        when = hit.timestamp[:16].replace("T", " ")
        what = hit.role if hit.kind == "message" else f"{hit.role} {hit.kind} {hit.tool}".rstrip()
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append(clean(f"{when}  turn {hit.turn} · {what}", single_line=True))
        head.append(clean(f"  {hit.conversation_id}", single_line=True), style="dim")
        snippet = Text(no_wrap=True, overflow="ellipsis")
        snippet.append("  ")
        text = hit.snippet.replace("\r\n", " \n").replace("\n", " ").replace("\t", " ")  # one line, same offsets
        cursor = 0
        for start, end in hit.highlights:
            snippet.append(clean(text[cursor:start], single_line=True))
            snippet.append(clean(text[start:end], single_line=True), style="bold reverse")
            cursor = end
        snippet.append(clean(text[cursor:], single_line=True))
        return Option(Text.assemble(head, "\n", snippet), id=str(number))

    def on_mount(self) -> None:
        listing = self.query_one(OptionList)
        if self.result.hits:
            listing.highlighted = 0
        listing.focus()

    def _chosen(self, verb: str, index: int | None) -> None:
        if index is None or not self.result.hits:
            return
        hit = self.result.hits[index]
        self.dismiss((verb, hit.conversation_id, hit.turn))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._chosen("open", int(str(event.option.id)))

    def action_fork(self) -> None:
        self._chosen("fork", self.query_one(OptionList).highlighted)

    def action_cancel(self) -> None:
        self.dismiss(None)
