"""A transcript people can use: Ctrl+F finds in the conversation (a count, next/previous, the
matches marked, Esc back to the prompt), ``/copy`` puts the last answer on the clipboard (OSC 52)
and says so, with what to do where the terminal does not take it."""

from __future__ import annotations

from textual import events
from textual.widgets import Input

from app.aries_app import AriesApp
from screens.chunk_viewer import ChunkViewer
from services.workspace.manager import Workspace, WorkspaceManager
from tests.models.servers import Reply, ScriptedServer
from tests.tui.helpers import Messages, panes_show, until
from tests.tui.test_assistant_tui import server, workspace  # noqa: F401 - fixtures
from widgets.clipboard import copied_note
from widgets.transcript.find import FindBar
from widgets.transcript.pane import TranscriptEntry, TranscriptPane
from widgets.transcript.streaming import CitationLink

SIZE = (120, 36)


def seeded() -> None:
    created = WorkspaceManager().create("find")[0]
    transcript = created.new_transcript()
    for n, (question, answer) in enumerate(
        [("where is the Gateway?", "The gateway is in services/tools."), ("and the policy?", "Policy: a YAML file.")], 1
    ):
        turn = f"{transcript.conversation_id}-t{n:04d}"
        transcript.append("user", question, turn_id=turn)
        transcript.append("assistant", answer, turn_id=turn, provider="ollama", model="m")
    created.close()


async def test_ctrl_f_finds_steps_and_esc_returns_to_the_prompt() -> None:
    seeded()
    app, messages = AriesApp("find", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        await pilot.pause()
        await pilot.press("ctrl+f")
        bar = app.screen.query_one(FindBar)
        assert bar.is_open and app.screen.focused is not None and app.screen.focused.id == "find-input"
        await pilot.press(*"GATEWAY")
        await pilot.pause()
        pane = app.screen.query_one(TranscriptPane)
        marked = [w.entry["content"] for w in pane.query(".-find-match")]  # type: ignore[attr-defined]
        assert marked == ["where is the Gateway?", "The gateway is in services/tools."]
        current = [w.entry["content"] for w in pane.query(".-find-current")]  # type: ignore[attr-defined]
        assert current == ["The gateway is in services/tools."]  # the newest first
        assert str(bar.query_one("#find-count").render()) == "2/2"
        await pilot.press("enter")  # next wraps to the first
        assert [w.entry["content"] for w in pane.query(".-find-current")] == ["where is the Gateway?"]  # type: ignore[attr-defined]
        assert str(bar.query_one("#find-count").render()) == "1/2"
        await pilot.press("up")
        assert str(bar.query_one("#find-count").render()) == "2/2"
        await pilot.press(*"xyz")
        await pilot.pause()
        assert str(bar.query_one("#find-count").render()) == "no match" and not pane.query(".-find-match")
        await pilot.press("escape")
        await pilot.pause()
        assert not bar.is_open and app.screen.focused is not None and app.screen.focused.id == "prompt"
        assert not any(isinstance(w, TranscriptEntry) and "on yellow" in str(w.render()) for w in pane.children)


async def test_copy_puts_the_last_answer_on_the_clipboard_and_says_how() -> None:
    seeded()
    app, messages = AriesApp("find", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        mark = messages.mark()
        app.screen.query_one("#prompt").focus()
        await pilot.press(*"/copy", "enter")
        note = await messages.notified(pilot, "OSC 52", since=mark)
        assert app.clipboard == "Policy: a YAML file."
        assert "Copied 20 characters" in note


async def test_copy_with_no_answer_says_so() -> None:
    app, messages = AriesApp("empty"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        mark = messages.mark()
        app.screen.query_one("#prompt").focus()
        await pilot.press(*"/copy", "enter")
        await messages.notified(pilot, "No answer to copy yet", since=mark)
        assert app.clipboard == ""


def test_the_copy_note_names_tmux_set_clipboard_inside_tmux() -> None:
    assert "set-clipboard on" in copied_note(5, {"TMUX": "/tmp/tmux-0/default,1,0"})
    assert "does not support OSC 52" in copied_note(5, {})


async def test_enter_on_a_cited_handle_opens_its_chunk(
    server: ScriptedServer,  # noqa: F811 - the fixture of test_assistant_tui
    workspace: Workspace,  # noqa: F811
) -> None:
    """The handles an answer cites sit under it, focusable: Enter opens the chunk (a click did before)."""
    handle = str(workspace.setting("test_handle"))
    server.add(Reply(text=f"Writes wait for the operator ({handle}).", chunk_size=6))
    app, messages = AriesApp("demo"), Messages()
    async with app.run_test(size=(160, 48), message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        app.screen.query_one("#prompt").focus()
        await pilot.press(*"how are tool calls approved?", "enter")
        await until(pilot, lambda: bool(app.screen.query(CitationLink)), messages=messages)
        link = app.screen.query_one(CitationLink)
        assert link.handle == handle
        link.focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ChunkViewer), messages=messages)
        assert handle in str(app.screen.query_one("#chunk-title").render())


async def test_y_copies_the_selected_message_and_c_its_code() -> None:
    created = WorkspaceManager().create("sel")[0]
    transcript = created.new_transcript()
    turn = f"{transcript.conversation_id}-t0001"
    transcript.append("user", "how do I list files?", turn_id=turn)
    transcript.append("assistant", "Use this:\n\n```sh\nls -la\n```\n\nThen read.", turn_id=turn, provider="ollama")
    created.close()
    app, messages = AriesApp("sel", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        await pilot.pause()
        await pilot.press("f2", "up")  # the transcript; the newest message selected
        pane = app.screen.query_one(TranscriptPane)
        assert [w.entry["content"] for w in pane.query(".-selected")] == [  # type: ignore[attr-defined]
            "Use this:\n\n```sh\nls -la\n```\n\nThen read."
        ]
        await pilot.press("c")
        assert app.clipboard == "ls -la"
        await pilot.press("up", "y")
        assert app.clipboard == "how do I list files?"
        mark = messages.mark()
        await pilot.press("c")
        await messages.notified(pilot, "no code block", since=mark)
        assert app.clipboard == "how do I list files?"


async def test_keys_typed_right_after_ctrl_f_go_to_the_find_bar() -> None:
    """Under tmux, Ctrl+F and the query arrive in one burst: the query is the find bar's, not the prompt's."""
    seeded()
    app, messages = AriesApp("find", conversation="last"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await panes_show(pilot)
        await pilot.pause()
        app.screen.query_one("#prompt").focus()
        await pilot.pause()
        for key, character in [("ctrl+f", None), ("y", "y"), ("a", "a")]:
            app.post_message(events.Key(key, character))  # queued together, as a terminal delivers them

        def typed() -> list[str]:  # the bar is mounted by the first Ctrl+F
            return [bar.value for bar in app.screen.query("#find-input").results(Input)]

        await until(pilot, lambda: typed() == ["ya"], messages=messages)
        assert app.screen.query_one("#prompt", Input).value == ""
