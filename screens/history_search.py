"""``/history search QUERY``: the hits of a search over every conversation of the workspace — its
conversation, date, turn, role (and tool), and a snippet with the matched words highlighted. Enter
opens that conversation at that message (the transcript scrolls to it and selects it), ``f`` forks
it after the hit's turn; Esc closes.

The query line at the top holds the query as typed, filters included: ``role:user``, ``tool:fs``
(whole parts of a tool id), ``since:2026-11-01``, and ``"a phrase"`` in quotes. Filters are typed in
the line rather than chosen in option widgets: one line is what the slash command already takes, it
is read by the same parser (``services.history_search.query.split_filters``), it can be edited and
run again with Enter without leaving the keyboard's home row, and it is shown whole in the title of
what was found. ``/`` goes to the line, ↓ back to the hits.

Every piece of transcript text is shown neutralised, as plain text (never markup)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from services.errors import AriesError
from widgets.safe import clean, plain

if TYPE_CHECKING:
    from services.history_search.query import Hit, SearchResult

Chosen = tuple[str, str, int, str]
"""``("open" | "fork", conversation id, turn, message id)``."""
Searcher = Callable[[str], "SearchResult"]
"""A query line → its result (blocking: run in a thread)."""

KEYS = "Enter open at the hit · f fork after its turn · / query · Esc close"
PLACEHOLDER = 'words, "a phrase", -not · role:user|assistant|tool · tool:fs · since:2026-11-01'


class HistorySearchScreen(ModalScreen[Chosen | None]):
    """Dismisses with ``("open", id, turn, message id)``, ``("fork", …)`` or ``None``."""

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
        Binding(
            "slash",
            "edit_query",
            "Query",
            id="history_search.query",
            tooltip='Edit the query line (role:R tool:T since:DATE filters, "a phrase"); Enter searches again',
        ),
    ]

    def __init__(self, result: SearchResult, workspace: str, line: str = "", searcher: Searcher | None = None) -> None:
        super().__init__()
        self.result = result
        self.workspace = workspace
        self.line = line or result.query  # the query line as typed, filters included
        self.searcher = searcher  # None: the line cannot be run again (shown only)

    def compose(self) -> Any:
        with Vertical(id="history-search"):
            yield Input(self.line, placeholder=PLACEHOLDER, id="history-search-query", disabled=self.searcher is None)
            yield Static(plain(self._title(), single_line=True), id="history-search-title")
            yield OptionList(*self._options(), id="history-search-list")
            yield Static(KEYS, id="history-search-keys", markup=False)

    def _title(self) -> str:
        result = self.result
        partial = (
            f" · partial: {result.coverage.indexed} of {result.coverage.total} conversations indexed"
            if result.partial
            else ""
        )
        return f"{len(result.hits)} hit(s) for {self.line!r} · workspace {self.workspace}{partial}"

    def _options(self) -> list[Option]:
        if not self.result.hits:
            return [Option(Text("  nothing found: change the query (/) or Esc", style="italic"), disabled=True)]
        return [self._option(n, hit) for n, hit in enumerate(self.result.hits)]

    @staticmethod
    def _option(number: int, hit: Hit) -> Option:
        when = hit.timestamp[:16].replace("T", " ")
        what = hit.role if hit.kind == "message" else f"{hit.role} {hit.kind} {hit.tool}".rstrip()
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append(clean(f"{when}  turn {hit.turn} · {what}", single_line=True))
        if hit.rewound:  # put away by a rewind: readable, not in force (a fork or /rewind N brings it back)
            head.append(" · rewound away", style="italic")
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
        return Option(Text.assemble(head, "\n", snippet, no_wrap=True, overflow="ellipsis"), id=str(number))

    def on_mount(self) -> None:
        listing = self.query_one(OptionList)
        if self.result.hits:
            listing.highlighted = 0
        listing.focus()

    # -- searching again -----------------------------------------------------------------------
    def action_edit_query(self) -> None:
        self.query_one(Input).focus()

    def on_key(self, event: Any) -> None:
        if event.key == "down" and isinstance(self.focused, Input):
            self.query_one(OptionList).focus()
            event.stop()

    @on(Input.Submitted, "#history-search-query")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        line = event.value.strip()
        if line and self.searcher is not None:
            self.run_worker(self._search(line), group="history-search", exclusive=True, exit_on_error=False)

    async def _search(self, line: str) -> None:
        assert self.searcher is not None
        try:
            result = await asyncio.to_thread(self.searcher, line)
        except AriesError as exc:  # a bad filter or query: one line, the hits shown stay
            self.notify(exc.message, title="/history search", severity="error")
            return
        self.result, self.line = result, line
        self.query_one("#history-search-title", Static).update(plain(self._title(), single_line=True))
        listing = self.query_one(OptionList)
        listing.clear_options()
        listing.add_options(self._options())
        if result.hits:
            listing.highlighted = 0
        listing.focus()

    # -- choosing ------------------------------------------------------------------------------
    def _chosen(self, verb: str, index: int | None) -> None:
        if index is None or not self.result.hits:
            return
        hit = self.result.hits[index]
        self.dismiss((verb, hit.conversation_id, hit.turn, hit.message_id))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._chosen("open", int(str(event.option.id)))

    def action_fork(self) -> None:
        if not isinstance(self.focused, Input):
            self._chosen("fork", self.query_one(OptionList).highlighted)

    def action_cancel(self) -> None:
        self.dismiss(None)
