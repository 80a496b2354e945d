"""``/history search QUERY`` opens the hits of every conversation (conversation, date, turn, role, a
highlighted snippet); Enter opens the hit's conversation, ``f`` forks it after the hit's turn.
Hostile text in a hit is shown as text."""

from __future__ import annotations

from rich.text import Text

from app.aries_app import AriesApp
from screens.history_search import HistorySearchScreen
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import Messages, command, panes_show, until
from widgets.messages import ConversationStarted
from widgets.transcript.pane import TranscriptPane

SIZE = (120, 36)
HOSTILE = "\x1b]52;c;aGVsbG8=\x07 \u202egnirts [bold red]loud[/]"


def seeded() -> tuple[str, str]:
    """Workspace ``birds``: one conversation about a kestrel (turn 2), another about owls."""
    workspace = WorkspaceManager().create("birds")[0]
    kestrel = workspace.new_transcript()
    for n, (question, answer) in enumerate([("hello", "hi"), (f"the kestrel {HOSTILE} hovers", "It does.")], 1):
        turn = f"{kestrel.conversation_id}-t{n:04d}"
        kestrel.append("user", question, turn_id=turn)
        kestrel.append("assistant", answer, turn_id=turn, provider="offline")
    owls = workspace.new_transcript()
    owls.append("user", "owls hunt at night", turn_id=f"{owls.conversation_id}-t0001")
    workspace.close()
    return kestrel.conversation_id, owls.conversation_id


def rows(screen: HistorySearchScreen) -> list[str]:
    from textual.widgets import OptionList

    listing = screen.query_one(OptionList)
    prompts = [listing.get_option_at_index(n).prompt for n in range(listing.option_count)]
    return [p.plain if isinstance(p, Text) else str(p) for p in prompts]


async def test_search_lists_the_hit_and_enter_opens_its_conversation() -> None:
    kestrel, owls = seeded()
    app, messages = AriesApp("birds", conversation=owls), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        messages.listen(app)  # the conversation signal's news
        await command(pilot, "/history search kestrel role:user")
        await until(pilot, lambda: isinstance(app.screen, HistorySearchScreen), messages=messages)
        screen = app.screen
        assert isinstance(screen, HistorySearchScreen)
        assert [(h.conversation_id, h.turn, h.role) for h in screen.result.hits] == [(kestrel, 2, "user")]
        (row,) = rows(screen)
        assert "turn 2 · user" in row and kestrel in row
        assert "\x1b" not in row and "\u202e" not in row and "[bold red]loud[/]" in row  # shown as text
        mark = messages.mark()
        await pilot.press("enter")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        assert app.session is not None and app.session.conversation.conversation_id == kestrel
        pane = app.screen_stack[0].query_one(TranscriptPane)
        await until(pilot, lambda: pane.selected is not None, messages=messages, what="the hit selected")
        assert pane.selected is not None and "kestrel" in str(getattr(pane.selected, "entry", {}).get("content"))


async def test_f_forks_after_the_hit_turn() -> None:
    kestrel, owls = seeded()
    app, messages = AriesApp("birds", conversation=owls), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        messages.listen(app)  # the conversation signal's news
        await command(pilot, "/history search hello")
        await until(pilot, lambda: isinstance(app.screen, HistorySearchScreen), messages=messages)
        mark = messages.mark()
        await pilot.press("f")
        await messages.wait_for(pilot, ConversationStarted, since=mark)
        assert app.session is not None
        forked = app.session.conversation
        assert forked.conversation_id not in (kestrel, owls)
        turns = {e.get("turn_id") for e in forked.read().entries if e.get("role") == "user"}
        assert len(turns) == 1  # the hit was in turn 1: the fork holds turn 1 only
        shown = [str(e["content"]) for e in app.screen_stack[0].query_one(TranscriptPane).entries()]
        assert shown[:2] == ["hello", "hi"]


async def test_nothing_found_and_a_bad_query_are_one_line() -> None:
    seeded()
    app, messages = AriesApp("birds", conversation="new"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        messages.listen(app)  # the conversation signal's news
        mark = messages.mark()
        await command(pilot, "/history search albatross")
        await until(
            pilot,
            lambda: (
                any("Nothing found" in str(e.get("content")) for e in app.session.conversation.read().entries)
                if app.session
                else False
            ),
            messages=messages,
        )
        await command(pilot, "/history search kestrel since:soon")
        note = await messages.notified(pilot, "not a date", since=mark)
        assert "'soon'" in note
        assert not isinstance(app.screen, HistorySearchScreen)


def test_a_multi_line_snippet_is_one_line_with_its_highlight_in_place() -> None:
    """A hit's snippet spans lines of the message: it is shown on one line (no visible ``\\n``), the
    highlighted word where the index said, and an escape from the transcript still made visible."""
    from services.history_search.query import Hit

    text = "first line\nthe kestrel\r\nhunts\x1b[2J"
    start = text.index("kestrel")
    hit = Hit("c-1", "m-1", "2026-11-27T04:00:00", 3, "assistant", "message", "", 1.0, text, [(start, start + 7)])
    option = HistorySearchScreen._option(0, hit)
    prompt = option.prompt
    assert isinstance(prompt, Text)
    shown = prompt.plain.split("\n", 1)[1]
    assert "\\n" not in shown and "\\r" not in shown
    assert "first line the kestrel  hunts" in shown
    assert "\x1b" not in shown
    highlighted = [prompt.plain[span.start : span.end] for span in prompt.spans if "reverse" in str(span.style)]
    assert highlighted == ["kestrel"]


def long_talk() -> tuple[str, str]:
    """Workspace ``birds``: a conversation of 30 turns, the phalarope in turn 5's answer; another short one."""
    workspace = WorkspaceManager().create("birds")[0]
    talk = workspace.new_transcript()
    for n in range(1, 31):
        turn = f"{talk.conversation_id}-t{n:04d}"
        talk.append("user", f"question {n}: what flew past?\nsecond line\nthird line", turn_id=turn)
        answer = "a red phalarope, spinning" if n == 5 else f"a starling, number {n}\nmore\nmore"
        talk.append("assistant", answer, turn_id=turn, provider="offline")
    other = workspace.new_transcript()
    other.append("user", "barn owls and the owls of the barn", turn_id=f"{other.conversation_id}-t0001")
    workspace.close()
    return talk.conversation_id, other.conversation_id


async def test_enter_scrolls_the_transcript_to_the_hit_and_selects_it() -> None:
    talk, other = long_talk()
    app, messages = AriesApp("birds", conversation=other), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        messages.listen(app)
        await command(pilot, "/history search phalarope")
        await until(pilot, lambda: isinstance(app.screen, HistorySearchScreen), messages=messages)
        await pilot.press("enter")
        pane = app.screen_stack[0].query_one(TranscriptPane)
        await until(pilot, lambda: pane.selected is not None, messages=messages, what="the hit selected")
        block = pane.selected
        assert block is not None and "phalarope" in str(block.entry["content"])  # type: ignore[attr-defined]
        await pilot.pause()
        top = block.virtual_region.y - pane.scroll_y
        assert 0 <= top < pane.size.height, (top, pane.size.height)  # in view, at the top of the pane
        assert pane.scroll_y < pane.max_scroll_y  # not left at the end of the conversation
        assert block.has_class("-selected")


async def test_the_query_line_runs_again_with_filters_and_phrases() -> None:
    talk, other = long_talk()
    app, messages = AriesApp("birds", conversation=other), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        messages.listen(app)
        await command(pilot, "/history search starling")
        await until(pilot, lambda: isinstance(app.screen, HistorySearchScreen), messages=messages)
        screen = app.screen
        assert isinstance(screen, HistorySearchScreen) and len(screen.result.hits) == 29

        async def again(line: str) -> list[tuple[str, str]]:
            from textual.widgets import Input

            await pilot.press("slash")
            field = screen.query_one(Input)
            assert screen.focused is field
            field.value = line
            before = screen.result
            await pilot.press("enter")
            await until(pilot, lambda: screen.result is not before, messages=messages, what=line)
            return [(h.conversation_id, h.role) for h in screen.result.hits]

        assert await again('"owls of the barn"') == [(other, "user")]  # the phrase only
        assert await again('"of the barn owls"') == []
        assert await again("flew role:user") == [(talk, "user")] * 30
        assert await again("flew role:assistant") == []
        assert "0 hit(s)" in str(screen.query_one("#history-search-title").render())
        mark = messages.mark()
        await again("flew since:2999-01-01")
        assert await again("phalarope since:2000-01-01") == [(talk, "assistant")]
        await pilot.press("slash")
        screen.query_one("#history-search-query").value = "flew since:soon"  # type: ignore[attr-defined]
        await pilot.press("enter")
        note = await messages.notified(pilot, "not a date", since=mark)
        assert "soon" in note and screen.result.hits  # the hits shown stay


async def test_a_hit_in_the_open_conversation_scrolls_to_it() -> None:
    talk, other = long_talk()
    app, messages = AriesApp("birds", conversation=talk), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        messages.listen(app)
        mark = messages.mark()
        await command(pilot, "/history search phalarope")
        await until(pilot, lambda: isinstance(app.screen, HistorySearchScreen), messages=messages)
        await pilot.press("enter")
        pane = app.screen_stack[0].query_one(TranscriptPane)
        await until(pilot, lambda: pane.selected is not None, messages=messages, what="the hit selected")
        assert "phalarope" in str(pane.selected.entry["content"])  # type: ignore[union-attr]
        assert app.session is not None and app.session.conversation.conversation_id == talk
        assert not messages.notes(since=mark, severity="error")
