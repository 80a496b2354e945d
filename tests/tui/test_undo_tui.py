"""``/undo`` in the TUI: the restore goes through the approval modal, and the write's snapshot and
the diffs are in the Artifacts pane (issue 15, item 3)."""

from __future__ import annotations

from textual.widgets import OptionList, Static

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from tests.tui.test_approvals import SIZE, make_workspace, tool_entries, wait_for_pending, wait_for_tools
from widgets.artifacts.pane import ArtifactsPane


def _preview(app: AriesApp) -> str:
    content = app.screen.query_one("#artifact-preview", Static).content
    return str(getattr(content, "plain", content))


async def test_undo_restores_the_write_and_shows_snapshot_and_diff() -> None:
    workspace = make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt new text", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter", "a")
        await wait_for_tools(app, pilot)
        assert (workspace.root / "notes.txt").read_text() == "new text\n"
        # The write's diff is highlighted in the pane at once.
        assert "+new text" in _preview(app) and "-old line" in _preview(app)

        await pilot.press(*"/undo", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        modal = app.screen.query_one("#approval-preview", Static).content
        shown = str(getattr(modal, "code", modal))  # the diff, as a rich Syntax
        assert "+old line" in shown and "-new text" in shown  # the modal shows what the undo will do
        await pilot.press("a")
        await wait_for_tools(app, pilot)
        assert (workspace.root / "notes.txt").read_text() == "first line\nold line\n"

        write, restore = tool_entries(app)
        assert restore["tool_name"] == "builtin:fs:restore" and restore["status"] == "success"
        assert restore["input"]["call_id"] == write["call_id"]
        pane = app.screen.query_one(ArtifactsPane)
        options = pane.query_one(OptionList)
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        links = {a["role"]: a for a in write["artifacts"]}
        assert links["snapshot"]["id"] in ids and links["diff"]["id"] in ids
        undo_diff = next(a for a in restore["artifacts"] if a["role"] == "diff")
        assert options.highlighted is not None and ids[options.highlighted] == undo_diff["id"]
        assert "-new text" in _preview(app) and "+old line" in _preview(app)
        # The write's snapshot is one keystroke away: highlighting it previews the old content.
        options.highlighted = ids.index(links["snapshot"]["id"])
        await pilot.pause()
        assert "first line\nold line" in _preview(app)


async def test_undo_after_a_later_edit_is_refused_with_the_diff() -> None:
    workspace = make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt new text", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter", "a")
        await wait_for_tools(app, pilot)
        (workspace.root / "notes.txt").write_text("edited by hand\n")
        await pilot.press(*"/undo", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter", "a")
        await wait_for_tools(app, pilot)
        assert (workspace.root / "notes.txt").read_text() == "edited by hand\n"
        notices = [e for e in app.session.conversation.read().entries if e["role"] == "notice"]
        assert any("Not undone" in n["content"] and "+edited by hand" in n["content"] for n in notices)
