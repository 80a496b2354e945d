"""Focus stays at the prompt unless the operator moves it; Tab completes slash commands; 80×24 works."""

from __future__ import annotations

from pathlib import Path

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from screens.confirm import ConfirmScreen
from screens.help import HelpScreen
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import settle, until
from tests.tui.test_approvals import wait_for_pending
from widgets.approvals.pane import ApprovalsPane
from widgets.prompt.input import PromptInput

SIZE = (160, 48)
SMALL = (80, 24)


def make_workspace(name: str = "demo") -> None:
    workspace, _ = WorkspaceManager().create(name)
    (workspace.root / "notes.txt").write_text("first line\n")


def indexed_workspace(tmp_path: Path) -> None:
    from services.retrieval import RetrievalEngine

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nRivers flow to the sea and carry silt.\n")
    workspace, _ = WorkspaceManager().create("demo")
    engine = RetrievalEngine(workspace)
    try:
        engine.index_add(docs, "docs")
        engine.query("rivers silt", k=3)  # something for /rag last to show
    finally:
        engine.close()


def prompt_of(app: AriesApp) -> PromptInput:
    return app.screen.query_one(PromptInput)


# -- focus -----------------------------------------------------------------------------------------
async def test_rag_last_leaves_the_focus_at_the_prompt(tmp_path: Path) -> None:
    indexed_workspace(tmp_path)
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/rag last", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen.query_one("#context-table").display  # the results are shown …
        assert app.focused is prompt_of(app)  # … and typing goes on at the prompt
        await pilot.press(*"next", "enter")  # Enter sends the message, it does not open a chunk
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen is app.screen_stack[0] and prompt_of(app).value == ""


async def test_a_queued_call_does_not_take_the_focus() -> None:
    make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt hello", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press(*"still typing")
        assert app.focused is prompt_of(app)
        assert prompt_of(app).value == "still typing"  # nothing typed was lost
        assert not isinstance(app.screen, ApprovalScreen)


async def test_closing_modals_gives_the_focus_back() -> None:
    make_workspace()
    WorkspaceManager().create("other")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is prompt_of(app)  # opened from the prompt: back to it

        await pilot.press(*"/rag index drop nothing", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert app.focused is prompt_of(app)

        # the operator moved to the queue and opened a call; meanwhile the call went away (workspace
        # switched: it was denied). Closing the modal must not leave the focus on the hidden list.
        await pilot.press(*"/fs write notes.txt x", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        await app.open_workspace("other")
        await pilot.pause()
        await pilot.press("escape")
        await settle(pilot)
        assert app.session.approvals.pending() == []
        await until(pilot, lambda: app.focused is prompt_of(app), what="the focus back at the prompt")


async def test_after_deciding_one_of_two_calls_the_queue_keeps_the_focus() -> None:
    make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt one", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press(*"/fs write other.txt two", "enter")
        await wait_for_pending(app, pilot, 2)
        await pilot.press("f4", "enter", "a")  # the operator moved the focus: it stays for the next call
        await until(pilot, lambda: len(app.session.approvals.pending()) == 1, what="one call decided")
        pane = app.screen.query_one(ApprovalsPane)
        assert app.focused is not None and pane in app.focused.ancestors_with_self
        await pilot.press("enter", "a")
        await settle(pilot)
        await until(pilot, lambda: app.focused is prompt_of(app), what="the focus back at the prompt")  # queue done


# -- Tab -------------------------------------------------------------------------------------------
async def test_tab_completes_commands_and_sub_commands_and_cycles() -> None:
    app = AriesApp()
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        prompt = prompt_of(app)
        await pilot.press(*"/ra", "tab")
        assert prompt.value == "/rag " and app.focused is prompt
        await pilot.press(*"in", "tab")
        assert prompt.value == "/rag index "
        await pilot.press("tab")  # add, drop, list, use: no common prefix, so the first …
        assert prompt.value == "/rag index add "
        await pilot.pause()
        hint = str(app.screen.query_one("#completions").render())
        assert all(word in hint for word in ("add", "drop", "list", "use"))
        await pilot.press("tab")  # … and a second Tab cycles
        assert prompt.value == "/rag index drop "
        await pilot.press("backspace", *"x")  # typing ends the cycle
        await pilot.pause()
        assert not app.screen.query_one("#completions").display
        prompt.value = "/policy mode c"
        await pilot.press("tab")
        assert prompt.value == "/policy mode commander "
        prompt.value = "/w"
        await pilot.press("tab")  # web, workspace: the common prefix is "w" already, so cycle
        assert prompt.value in {"/web ", "/workspace "}
        prompt.value = "hello"
        await pilot.press("tab")  # plain text: Tab moves the focus as usual
        assert app.focused is not prompt


# -- 80×24 -----------------------------------------------------------------------------------------
async def test_at_80x24_one_pane_at_a_time_and_the_approval_keys_are_on_screen() -> None:
    make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SMALL) as pilot:
        await app.ready()
        await pilot.pause()
        transcript = app.screen.query_one("#transcript")
        assert transcript.region.width >= 76  # not 18 columns
        assert not app.screen.query_one("#side").display
        assert app.screen.query_one("#tabs").display
        await pilot.press("f3")
        await pilot.pause()
        context = app.screen.query_one("#context")
        assert context.region.width >= 76 and not transcript.display
        await pilot.press("f2")
        await pilot.pause()
        assert transcript.display
        await pilot.press("escape", *"/fs write notes.txt hello", "enter")
        await wait_for_pending(app, pilot)
        assert "Approvals 1" in str(app.screen.query_one("#tabs").render())
        await pilot.press("f4", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        screen = app.screen.region
        for selector in ("#approval", "#approval-keys", "#approval-title"):
            region = app.screen.query_one(selector).region
            assert screen.contains_region(region), (selector, region)
        await pilot.press("d")
        await pilot.pause()
        reason = app.screen.query_one("#approval-reason").region
        assert reason.height >= 1 and screen.contains_region(reason)
        await pilot.press(*"later", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.session.approvals.pending() == [] and app.focused is prompt_of(app)


# -- one key notation, the modal keys in F1, whole labels at 80×24 (issue 24) ----------------------
def test_one_key_notation() -> None:
    from widgets.keybar import key_label

    assert [key_label(k) for k in ("ctrl+o", "f1", "escape,q", "a", "ctrl+shift+tab", "pagedown", "up")] == [
        "Ctrl+O", "F1", "Esc / q", "a", "Ctrl+Shift+Tab", "PgDn", "↑"
    ]  # fmt: skip


async def test_help_lists_the_modal_keys_in_the_one_notation() -> None:
    make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        bar = " ".join(f"{key} {what}" for key, what in app.screen.query_one("#keys").describe())  # type: ignore[attr-defined]
        assert bar.startswith("Ctrl+Q Quit Ctrl+O Workspaces F1 Help F2 Transcript") and bar.endswith("Ctrl+P Palette")
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        from io import StringIO

        from rich.console import Console
        from textual.widgets import Static

        console = Console(width=160, record=True, file=StringIO())
        for static in app.screen.query(Static):
            console.print(static.content)
        shown = console.export_text()
        expected = ["Approval modal", "Approve once", "Approve for session", "Deny", "Later", "Chunk viewer"]
        expected += ["Esc / q", "Workspace switcher", "Ctrl+N", "Ctrl+O", "Ctrl+P", "F6"]
        for text in expected:
            assert text in shown, text
        for mixed in ("^o", "^p", "ctrl+", "f1 ", "escape"):
            assert mixed not in shown, mixed


async def test_header_and_keys_are_whole_at_80x24() -> None:
    make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=(80, 24)) as pilot:
        await app.ready()
        await settle(pilot)
        header = str(app.screen.query_one("HeaderTitle").render())
        keys = app.screen.query_one("#keys")
        bar = str(keys.render())
        assert "…" not in header and header.endswith("demo · default · offline · guide · default policy"), header
        assert "…" not in bar and bar.strip() == "Ctrl+Q Quit  Ctrl+O Workspaces  F1 Help  Ctrl+P Palette", bar
        assert len(bar.rstrip()) <= 80


async def test_a_waiting_call_fits_one_line_at_80x24() -> None:
    """The label gives way, "waiting for your approval — F4" and the cancel hint stay whole (issue 24)."""
    from widgets.messages import StatusWaiting
    from widgets.status import WAITING_NOTE, RunStatus

    make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=(80, 24)) as pilot:
        await app.ready()
        app.status_start("turn-1", "ollama:llama3.2:3b is answering", cancellable=True)
        app.status_start("call-1", "builtin:fs:write_text (asked by ollama:llama3.2:3b)", cancellable=True)
        app.publish(StatusWaiting(frozenset({"call-1"})))
        status = app.screen.query_one(RunStatus)
        await until(pilot, lambda: WAITING_NOTE in status.render_items().plain)
        lines = status.render_items().plain.splitlines()
        assert len(lines) == 2 and lines[0].endswith("Ctrl+X cancels") and lines[1].endswith(WAITING_NOTE)
        assert all(len(line) <= 80 - 2 for line in lines), lines


async def test_tab_completes_a_positional_by_its_kind_and_an_option_from_the_tool_model() -> None:
    """The grammar's completion kinds reach the prompt: ``/workspace open al`` Tab → the workspace
    ``alpha``; ``/fs ls --max-e`` Tab → the option made from the list_dir argument model's field."""
    for name in ("alpha", "beta"):
        WorkspaceManager().create(name)
    app = AriesApp("beta")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        prompt = prompt_of(app)
        prompt.value = "/workspace open al"
        await pilot.press("tab")
        assert prompt.value == "/workspace open alpha "
        prompt.value = "/fs ls --max-e"
        await pilot.press("tab")
        assert prompt.value == "/fs ls --max-entries "
