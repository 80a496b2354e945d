"""Defects found by trying the workbench (issue 34 item 7), each pinned by a pilot test that failed
before its fix."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console
from textual.content import Content
from textual.widgets import Input, OptionList, Static

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from screens.chunk_viewer import ChunkViewer
from services.workspace.manager import Workspace, WorkspaceManager
from tests.models.servers import Call, Reply, ScriptedServer
from tests.tui.helpers import Messages, panes_show, until
from tests.tui.test_assistant_tui import tool_name, workspace  # noqa: F401 - a fixture
from tests.tui.test_markup_safety import MARKUP, RAW, submit
from tests.tui.test_transcript_tools_tui import SIZE as FIND_SIZE
from tests.tui.test_transcript_tools_tui import seeded
from widgets.artifacts.pane import ArtifactsPane
from widgets.transcript.find import FindBar
from widgets.transcript.pane import TranscriptPane
from widgets.transcript.streaming import CitationLink

SIZE = (160, 48)


def transcript_text(app: AriesApp) -> str:
    """What the Transcript pane shows as text (not the toasts)."""
    console = Console(width=400, record=True, file=StringIO(), color_system=None)
    parts: list[str] = []
    for widget in app.screen_stack[0].query_one(TranscriptPane).query(Static):
        visual = widget.render() if isinstance(widget.content, str) else widget.content
        if isinstance(visual, Content | str):
            parts.append(str(visual))
        else:
            console.print(visual)
    parts.append(console.export_text())
    return " ".join("\n".join(parts).split())


async def test_slash_command_errors_stay_in_the_transcript() -> None:
    """``/bogus`` and ``/rag index add`` of a missing folder: the toast, and a notice in the transcript
    that stays (shown literally: the path is the operator's text)."""
    WorkspaceManager().create("demo")
    app, messages = AriesApp("demo"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await submit(pilot, "/bogus")
        await messages.notified(pilot, "Unknown command /bogus")
        missing = f"/nonexistent/{MARKUP}\x1b[31m"
        await submit(pilot, f"/rag index add {missing}")
        await messages.notified(pilot, "nonexistent")
        notices = [e for e in app.screen.query_one(TranscriptPane).entries() if e["role"] == "notice"]
        assert [n.get("level") for n in notices] == ["error", "error"]
        assert "Unknown command /bogus" in notices[0]["content"] and "nonexistent" in notices[1]["content"]
        shown = transcript_text(app)
        assert "Unknown command /bogus" in shown and " ".join(MARKUP.split()) in shown
        assert not any(raw in shown for raw in RAW)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    server = ScriptedServer("ollama").start()
    monkeypatch.setenv("ARIES_MODEL", "ollama:llama3.2:3b")
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    yield server
    server.stop()


def artifact_rows(app: AriesApp) -> list[str]:
    pane = app.screen_stack[0].query_one(ArtifactsPane)
    lists = list(pane.query(OptionList))
    if not lists or not pane.has_class("-has-items"):
        return []
    return [str(lists[0].get_option_at_index(i).prompt) for i in range(lists[0].option_count)]


async def test_the_artifacts_pane_follows_a_models_approved_writes(server: ScriptedServer) -> None:
    """A model writes notes.txt twice (each approved in the modal): the Artifacts pane lists what the
    registry holds as the calls end — not "No artifacts yet" — and the two diffs of the same file are
    told apart (issue 34 item 7)."""
    created, _ = WorkspaceManager().create("demo")
    (created.root / "notes.txt").write_text("the notes\n")
    write = tool_name("builtin:fs:write_text")
    server.add(
        Reply(tool_calls=[Call(write, {"path": "notes.txt", "text": "one\n"})]),
        Reply(tool_calls=[Call(write, {"path": "notes.txt", "text": "two\n"})]),
        Reply(text="Written twice."),
    )
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        assert artifact_rows(app) == []
        await pilot.press(*"write the notes", "enter")
        for _ in range(2):
            await until(pilot, lambda: app.session is not None and len(app.session.approvals) == 1)
            await pilot.press("f4", "enter")
            await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the modal")
            await pilot.press("a")
            await until(pilot, lambda: not isinstance(app.screen, ApprovalScreen), what="the modal to close")
        await until(pilot, lambda: not app.commands.assistant.running, what="the turn to end")
        await pilot.pause()
        registry = created.artifacts.list()
        assert len(registry) >= 2
        rows = artifact_rows(app)
        assert len(rows) == len(registry), rows
        assert not app.screen_stack[0].query_one("#artifacts-empty").display  # no "No artifacts yet"
        assert len(set(rows)) == len(rows), f"rows told apart: {rows}"


async def test_find_bar_n_and_shift_n_step_from_the_conversation() -> None:
    """Ctrl+F, a query, Tab: the focus goes to the conversation with the bar open; ``n`` / ``N`` go to
    the next / previous match (as in less or vim); at the prompt, ``n`` is just a letter."""
    seeded()
    app = AriesApp("find", conversation="last")
    async with app.run_test(size=FIND_SIZE) as pilot:
        await app.ready()
        await panes_show(pilot)
        await pilot.press("ctrl+f", *"GATEWAY")
        await pilot.pause()
        bar = app.screen.query_one(FindBar)
        pane = app.screen.query_one(TranscriptPane)

        def count() -> str:
            return str(bar.query_one("#find-count").render())

        assert count() == "2/2"
        await pilot.press("tab")
        await pilot.pause()
        assert bar.is_open and app.focused is pane
        await pilot.press("n")
        assert count() == "1/2"
        await pilot.press("n")
        assert count() == "2/2"
        await pilot.press("N")
        assert count() == "1/2"
        current = [w.entry["content"] for w in pane.query(".-find-current")]  # type: ignore[attr-defined]
        assert current == ["where is the Gateway?"]
        await pilot.press("escape")  # the prompt: n types
        await pilot.pause()
        await pilot.press("n")
        assert app.screen.query_one("#prompt", Input).value == "n"


async def test_ctrl_q_quits_from_the_chunk_viewer(
    server: ScriptedServer,
    workspace: Workspace,  # noqa: F811 - the fixture of test_assistant_tui
) -> None:
    """The chunk viewer open (Enter on a cited handle): Ctrl+Q leaves Aries, as everywhere."""
    handle = str(workspace.setting("test_handle"))
    server.add(Reply(text=f"Writes wait for the operator ({handle}).", chunk_size=6))
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await panes_show(pilot)
        app.screen.query_one("#prompt").focus()
        await pilot.press(*"how are tool calls approved?", "enter")
        await until(pilot, lambda: bool(app.screen.query(CitationLink)))
        app.screen.query_one(CitationLink).focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ChunkViewer), what="the chunk viewer")
        await pilot.press("ctrl+q")
        await until(pilot, lambda: app.session is None, what="the session to close")
    assert app.return_code == 0


async def test_tab_from_the_transcript_goes_to_the_latest_answers_citation(
    server: ScriptedServer,
    workspace: Workspace,  # noqa: F811 - the fixture of test_assistant_tui
) -> None:
    """Two answers citing a handle: F2 then Tab focuses the latest answer's handle, not the first
    answer's at the top of the conversation; Tab again moves on from there."""
    handle = str(workspace.setting("test_handle"))
    server.add(Reply(text=f"First: writes wait ({handle})."), Reply(text=f"Second: still wait ({handle})."))
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await panes_show(pilot)
        for question in ("how are tool calls approved?", "are tool calls approved?"):
            app.screen.query_one("#prompt").focus()
            await pilot.press(*question, "enter")
            await until(pilot, lambda: not app.commands.assistant.running, what="the answer")
        await until(pilot, lambda: len(app.screen.query(CitationLink)) == 2, what="two cited handles")
        await pilot.press("f2", "tab")
        await pilot.pause()
        links = list(app.screen.query(CitationLink))
        assert app.focused is links[-1], app.focused
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is not links[-1] and app.focused is not links[0]


async def test_f1_lists_the_keys_the_readme_promises_and_textuals_key_panel_uses_the_one_notation() -> None:
    """F1 lists the prompt's, the transcript's, the find bar's, /history's and the trust review's keys
    (generated from their bindings), type-ahead's Esc; the palette's "Keys" panel says Ctrl+O, not ^o."""
    from textual.binding import Binding
    from textual.widgets import KeyPanel

    from screens.help import HelpScreen

    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        console = Console(width=200, record=True, file=StringIO())
        for static in app.screen.query(Static):
            console.print(static.content)
        shown = console.export_text()
        expected = ["↑", "Previous prompt", "Ctrl+J", "Attach a file", "@path", "Copy code", "Citation"]
        expected += ["Open chunk", "Audit row", "Next match", "Previous match", "/history search hits", "Fork"]
        expected += ["Trust review", "Not now", "typed ahead"]
        for text in expected:
            assert text in shown, text
        await pilot.press("escape")
        assert app.get_key_display(Binding("ctrl+o", "x")) == "Ctrl+O"
        app.action_show_help_panel()
        await until(pilot, lambda: bool(app.screen.query(KeyPanel)), what="the key panel")
        await pilot.pause()
        panel = Console(width=200, record=True, file=StringIO())
        for static in app.screen.query_one(KeyPanel).query(Static):
            panel.print(static.render())
        text = panel.export_text()
        assert "Ctrl+O" in text and "^o" not in text


LONG_MODEL = "ollama:qwen2.5-coder-32b-instruct-q4_K_M-with-a-long-tag"


def test_fit_cuts_the_models_name_and_keeps_the_meter_and_mode() -> None:
    from widgets.header import fit

    line = f"ctx 1,420/2,048 high · workspace demo · profile default · model {LONG_MODEL} · approvals guide"
    line += " · default policy"
    fitted = fit(line, 66)
    assert len(fitted) <= 66 and not fitted.endswith("…"), fitted
    assert fitted.startswith("ctx 1,420/2,048 high · demo · default · ollama:qwen") and fitted.endswith("guide")
    assert "…" in fitted  # the model's name, cut in its middle
    assert fit("workspace demo · approvals guide", 62) == "workspace demo · approvals guide"


async def test_the_80_column_header_keeps_the_mode_with_a_long_model_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARIES_MODEL", LONG_MODEL)
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=(80, 24)) as pilot:
        await app.ready()
        await pilot.pause()
        header = str(app.screen.query_one("HeaderTitle").render()).rstrip()
        assert header.endswith("guide") and "ollama:qwen" in header, header


async def test_the_context_pane_grows_with_the_screen(tmp_path: Path) -> None:
    """At 160 columns the side column is the wider one; a long source path gives its folders way
    first (the file's name whole), and the table (to the dense score) fits the pane; at 300 columns
    nothing is cut."""
    from textual.widgets import DataTable

    from services.retrieval import RetrievalEngine
    from widgets.context.pane import ContextPane

    nested = tmp_path / "docs" / "operations" / "approvals-and-policies"
    nested.mkdir(parents=True)
    (nested / "gateway-approvals.md").write_text("# The approval gateway\n\nEvery tool call passes the gateway.\n")
    created, _ = WorkspaceManager().create("demo")
    with RetrievalEngine(created) as engine:
        engine.index_add(str(tmp_path / "docs"), "docs")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await submit(pilot, "/rag query approval gateway")
        pane = app.screen.query_one(ContextPane)
        table = pane.query_one("#context-table", DataTable)
        await until(pilot, lambda: table.row_count >= 1, what="the rows")
        shown = []
        for width in (160, 300):
            await pilot.resize_terminal(width, 48)
            await pilot.pause()
            await pilot.pause()
            shown.append(str(table.get_row_at(0)[2]))
            assert table.virtual_size.width <= table.scrollable_content_region.width, width  # the dense score
        assert shown[0].startswith("gateway-approvals.md · The a") and shown[0].endswith("…")  # the name whole
        assert pane.region.width > app.screen.query_one("#transcript").region.width  # at 300 columns
        assert shown[1] == "operations/approvals-and-policies/gateway-approvals.md · The approval gateway"


async def test_the_deny_reason_field_shows_its_own_keys() -> None:
    """d in the approval modal: the key line says what typing does now (a, s, d are letters of the
    reason), and Esc brings the modal's keys back."""
    from tests.tui.test_approvals import make_workspace, wait_for_pending

    make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt pending", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the modal")

        def keys() -> str:
            return str(app.screen.query_one("#approval-keys", Static).render())

        assert "a once" in keys()
        await pilot.press("d")
        await pilot.pause()
        assert "a once" not in keys() and "Enter denies" in keys()
        await pilot.press("escape")
        await pilot.pause()
        assert "a once" in keys()
