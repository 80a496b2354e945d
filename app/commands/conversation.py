"""``/history`` (the workspace's conversations, Enter resumes one), ``/history search QUERY`` (every
conversation's hits: Enter opens one, ``f`` forks after its turn), ``/resume REF`` and ``/fork [N]``.

Resuming is the session's (``Session.open_conversation``): the model sees the earlier turns within
its context window and new turns append with the same id scheme; the App's active session follows
the conversation and the transcript shows it (``ConversationStarted`` with its entries). Forking
copies the first N turns of the open conversation into a new one (``services.conversation.history.fork``)
and continues there; the original is left as it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.host import when_idle

if TYPE_CHECKING:
    from app.host import AppHost


SEARCH_LIMIT = 100
WAIT_S = 1.0
"""How long a search waits for the writer lock: the background build lets it go after the transcript it
is on and a commit (tens of ms on an idle machine) when a search asks for it."""
BUDGET_S = 0.1
"""How long a search catches up itself: what was just written comes first, the background build
(``app.commands.history_index``) does the rest."""


class ConversationController:
    def __init__(self, host: AppHost, turn_running: Callable[[], bool]) -> None:
        self.host = host
        self.turn_running = turn_running

    def command(self, parsed: object) -> None:
        """``/history`` or ``/history search …`` (a :class:`widgets.commands.HistorySearch`)."""
        if hasattr(parsed, "query"):
            self.host.run_worker(self._search(parsed), group="conversation", exit_on_error=False)
        else:
            self.history()

    async def _search(self, parsed: Any) -> None:
        from services.errors import AriesError
        from services.history_search.query import SearchResult, search, split_filters
        from services.history_search.store import HistoryIndex

        session = self.host.require_session()
        index = HistoryIndex.for_workspace(session.workspace)

        def searcher(line: str) -> SearchResult:  # a query line, filters included (role:R tool:T since:D)
            text, filters = split_filters(line)
            # The background build (app.commands.history_index) lets the writer lock go between its
            # slices: the search takes it in the gap, catches up with what was just written, answers.
            result = search(index, text, filters, limit=SEARCH_LIMIT, budget_s=BUDGET_S, wait_s=WAIT_S)
            if result.rebuilt:  # found damaged and rebuilt from the transcripts: said once
                self.host.notify(result.notice(), title="/history search", severity="warning", timeout=8)
            return result

        try:
            result = await asyncio.to_thread(searcher, parsed.query)
        except AriesError as exc:
            self.host.report_error(exc.message, "/history search")
            return
        if not result.hits:
            said = f"Nothing found for {parsed.query!r} in this workspace's conversations"
            far = f" (partial: {result.coverage.indexed} of {result.coverage.total} indexed so far)."
            self.host.say(said + (far if result.partial else "."), "history search")
            return
        from screens.history_search import HistorySearchScreen

        screen = HistorySearchScreen(result, session.workspace.name, parsed.query, searcher)
        self.host.push_screen(screen, self._chosen_hit)

    def _chosen_hit(self, picked: tuple[str, str, int, str] | None) -> None:
        """Enter: the hit's conversation, scrolled to the hit; ``f``: a fork of it after the hit's turn."""
        from widgets.messages import EntryRevealed

        if picked is None:
            return
        verb, conversation_id, turn, message_id = picked
        try:
            if verb == "fork":
                self._fork(conversation_id, turn or None)
            else:
                self._resume(conversation_id)
                self.host.publish(EntryRevealed(conversation_id, message_id))
        except Exception as exc:  # an AriesError or a vanished file: one line
            self.host.report_error(getattr(exc, "message", str(exc)), f"/history search ({verb})")

    def history(self) -> None:
        """The list of conversations (a modal); Enter resumes, ``f`` forks."""
        self.host.run_worker(self._history(), group="conversation", exit_on_error=False)

    async def _history(self) -> None:
        from services.conversation.history import list_summaries

        session = self.host.require_session()
        summaries = await asyncio.to_thread(list_summaries, session.workspace)
        if not summaries:
            self.host.say("No stored conversation in this workspace yet: type a message to start one.", "history")
            return
        from screens.conversations import ConversationsScreen

        def chosen(result: tuple[str, str] | None) -> None:
            if result is None:
                return
            verb, conversation_id = result
            try:
                if verb == "fork":
                    self._fork(conversation_id, None)
                else:
                    self._resume(conversation_id)
            except Exception as exc:  # an AriesError or a vanished file: one line
                self.host.report_error(getattr(exc, "message", str(exc)), f"/{verb}")

        current = session.conversation.conversation_id
        self.host.push_screen(ConversationsScreen(summaries, session.workspace.name, current), chosen)

    def resume(self, reference: str) -> None:
        """``/resume ID`` (a unique start of one, or ``last``)."""
        self._resume(reference)

    def _resume(self, reference: str) -> None:
        when_idle(self.turn_running, "resume")
        self.host.start_conversation(reference)
        conversation = self.host.require_session().conversation
        turns = len({e.get("turn_id") for e in conversation.read().entries if e.get("role") == "user"})
        self.host.notify(
            f"Resumed {conversation.conversation_id} ({turns} turn(s)): new turns append to it.",
            title="/resume",
            timeout=4,
        )

    def copy(self) -> None:
        """``/copy``: the last answer of the conversation to the clipboard (OSC 52, through the terminal)."""
        session = self.host.require_session()
        answers = [e for e in session.conversation.read().entries if e.get("role") == "assistant"]
        if not answers or not str(answers[-1].get("content", "")).strip():
            self.host.notify("No answer to copy yet in this conversation.", title="/copy", severity="warning")
            return
        from widgets.clipboard import copy_text

        copy_text(self.host, str(answers[-1]["content"]), "/copy")

    def fork(self, turns: int | str | None) -> None:
        """``/fork [N|NAME]``: a new conversation holding the open one's turns up to turn N or checkpoint
        NAME (all by default)."""
        from services.conversation.timeline import turn_number

        session = self.host.require_session()
        if isinstance(turns, str):
            turns = turn_number(session.conversation.timeline().resolve(turns))
        self._fork(session.conversation.conversation_id, turns)

    def _fork(self, reference: str, through_turn: int | None) -> None:
        from services.conversation.history import fork

        when_idle(self.turn_running, "fork")
        session = self.host.require_session()
        target = fork(session.workspace, reference, through_turn)
        self.host.start_conversation(target.conversation_id)
        self.host.notify(
            f"Forked {reference} into {target.conversation_id}: new turns go to the fork; the original is unchanged.",
            title="/fork",
            timeout=4,
        )
