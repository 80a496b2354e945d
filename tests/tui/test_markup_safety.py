"""Markup-looking and escape-laden text is shown literally in every pane and modal, and never crashes.

Text typed by the operator, found in a document or a file name, or returned by a tool goes through
every place the TUI shows text: the transcript (messages and tool blocks), the Context pane (caption
and rows), the chunk viewer, the Approvals pane and the approval modal, the Artifacts pane and its
preview, notifications, the workspace switcher and the confirmation modal. Before, ``[/x]`` raised a
``MarkupError`` that killed the App, and ``/rag last`` crashed the workspace after every restart.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

from rich.console import Console
from textual.content import Content
from textual.pilot import Pilot
from textual.widgets import DataTable, OptionList, Static

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from screens.chunk_viewer import ChunkViewer
from screens.confirm import ConfirmScreen
from screens.workspace_switcher import WorkspaceSwitcher
from services.text.textsafe import neutralize
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import Messages
from tests.tui.test_approvals import wait_for_pending
from widgets.prompt.input import PromptInput

SIZE = (160, 48)
MARKUP = "[/x] [link=http://evil.example]click[/link] [bold red]loud[/bold red] [@click=app.quit]q[/]"
HOSTILE = MARKUP + " \x1b]0;pwned\x07 \u202eevil"
SHOWN = neutralize(HOSTILE)  # what the operator must read, literally
RAW = ("\x1b", "\x07", "\u202e")  # must never reach the screen


def screen_text(app: AriesApp) -> str:
    """Everything the current screen shows as text: statics, table cells, list options, toasts."""
    console = Console(width=400, record=True, file=StringIO(), color_system=None)
    parts: list[str] = []

    def add(visual: object) -> None:
        if isinstance(visual, Content | str):
            parts.append(str(visual))  # a str here would have been parsed as markup: render() shows what is seen
        else:
            console.print(visual)

    for widget in app.screen.query(Static):
        content = widget.content
        add(widget.render() if isinstance(content, str) else content)
    for table in app.screen.query(DataTable):
        for row in range(table.row_count):
            parts.extend(str(cell) for cell in table.get_row_at(row))
    for options in app.screen.query(OptionList):
        for index in range(options.option_count):
            add(options.get_option_at_index(index).prompt)
    parts.append(console.export_text())
    return "\n".join(parts)


def assert_literal(text: str, expected: str = MARKUP) -> None:
    flat = " ".join(text.split())
    assert " ".join(expected.split()) in flat, f"{expected!r} not shown literally"
    for raw in RAW:
        assert raw not in text, f"raw {raw!r} reached the screen"


async def submit(pilot: Pilot[int], line: str) -> None:
    prompt = pilot.app.screen.query_one(PromptInput)
    prompt.focus()
    prompt.value = line
    await pilot.press("enter")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def test_a_hostile_message_and_document_in_transcript_context_viewer_and_after_restart(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    name = "evil [b] [link=x]name\x1b[31m.md"  # no "/" in a file name
    (docs / name).write_text(f"# Heading {MARKUP}\n\nRivers and {HOSTILE} flow to the sea.\n")
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await submit(pilot, f"/rag index add {docs} --name docs")
        await submit(pilot, f"rivers {HOSTILE}")  # a message: retrieved, injected, answered
        text = screen_text(app)
        assert_literal(text)  # the transcript entry and the context caption
        assert_literal(text, neutralize(name, single_line=True)[:18])  # the source cell of the row
        assert f"injected for: rivers {neutralize(HOSTILE, single_line=True)}" in " ".join(text.split())
        await pilot.press("f3", "enter")  # open the chunk
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ChunkViewer)
        assert_literal(screen_text(app))
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ChunkViewer)
    again = AriesApp("demo")  # the query was saved: /rag last after a restart shows it, literally
    async with again.run_test(size=SIZE) as pilot:
        await again.ready()
        await pilot.pause()
        await submit(pilot, "/rag last")
        assert_literal(screen_text(again))
        assert again.is_running


async def test_hostile_tool_arguments_in_the_approval_queue_modal_and_tool_block() -> None:
    workspace, _ = WorkspaceManager().create("demo")
    (workspace.root / "notes.txt").write_text(f"old {HOSTILE}\n")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await submit(pilot, "/fs read notes.txt")  # read-only: runs at once, the tool block shows the text
        assert_literal(screen_text(app))
        prompt = app.screen.query_one(PromptInput)
        prompt.value = f"/fs write notes.txt {MARKUP} \x1b]0;pwned\x07 \u202eevil"
        await pilot.press("enter")
        await wait_for_pending(app, pilot)
        assert_literal(screen_text(app), "[/x] [link=http://evil.example]click[/link]")  # the Approvals row
        await pilot.press("f4", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        modal = screen_text(app)
        assert_literal(modal)  # the diff and the arguments
        await pilot.press("d", *"no [/x]", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not isinstance(app.screen, ApprovalScreen)
        assert (workspace.root / "notes.txt").read_text() == f"old {HOSTILE}\n"
        assert "no [/x]" in screen_text(app)  # the denial, with the operator's reason, in the tool block


async def test_hostile_artifacts_notifications_switcher_and_confirm(tmp_path: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    workspace.artifacts.add_bytes(HOSTILE.encode(), "art [b] [link=y].txt", description=MARKUP, provenance={"k": "t"})
    app = AriesApp("demo")
    recorder = Messages()
    async with app.run_test(size=SIZE, message_hook=recorder) as pilot:
        await app.ready()
        await pilot.pause()
        text = screen_text(app)
        assert "art [b] [link=y].txt" in text
        assert_literal(text)  # the preview and the description
        await submit(pilot, "/rag show [/x]:abc")  # an error notification that quotes the handle
        await submit(pilot, f"/artifact add {tmp_path}/[/x]\x1b[2J.txt")
        await recorder.notified(pilot, "[/x]")
        messages = [n.message for n in recorder.notifications()]
        assert all("\x1b" not in m for m in messages)
        await pilot.pause()
        app.notify(HOSTILE, title=HOSTILE)  # a toast renders its text literally
        await pilot.pause()
        assert app.is_running
        await submit(pilot, f"/rag index drop '{MARKUP}'")  # the confirmation names it
        assert isinstance(app.screen, ConfirmScreen)
        assert "[/x]" in screen_text(app)
        await pilot.press("n")
        await pilot.pause()
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert isinstance(app.screen, WorkspaceSwitcher)
        await pilot.press(*"[/x][link=y]")
        await pilot.pause()
        assert "No workspace matches '[/x][link=y]'" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running
