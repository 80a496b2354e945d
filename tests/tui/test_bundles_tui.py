"""/workspace export and /workspace import in the TUI: a round trip, and a replace that asks first."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.confirm import ConfirmScreen
from services.workspace.manager import WorkspaceManager

SIZE = (160, 48)


async def submit(app: AriesApp, pilot: Pilot[int], line: str) -> None:
    prompt = app.screen.query_one("#prompt")
    prompt.value = line  # type: ignore[attr-defined]
    await pilot.press("enter")
    await pilot.pause()


def notices(app: AriesApp) -> list[str]:
    assert app.session is not None
    return [e["content"] for e in app.session.conversation.read().entries if e["role"] == "notice"]


async def test_export_then_import_under_a_new_name_and_a_replace_that_asks(tmp_path: Path) -> None:
    manager = WorkspaceManager()
    workspace, _ = manager.create("demo")
    (workspace.root / "notes.txt").write_text("hello\n")
    other, _ = manager.create("other")
    (other.root / "mine.txt").write_text("keep me\n")
    bundle = tmp_path / "demo.tar.zst"
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await submit(app, pilot, f"/workspace export {bundle}")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert bundle.is_file()
        assert any(n.startswith("Exported workspace demo") for n in notices(app))

        await submit(app, pilot, f"/workspace import {bundle} copy")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert (manager.path_for("copy") / "notes.txt").read_text() == "hello\n"
        assert any("Workspace copy created" in n for n in notices(app))

        # 'other' exists: the import asks, and 'n' keeps it as it was
        await submit(app, pilot, f"/workspace import {bundle} other")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert (manager.path_for("other") / "mine.txt").read_text() == "keep me\n"
        assert any("other was kept" in n for n in notices(app))

        # 'y' replaces it
        await submit(app, pilot, f"/workspace import {bundle} other")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not (manager.path_for("other") / "mine.txt").exists()
        assert (manager.path_for("other") / "notes.txt").read_text() == "hello\n"

        # the workspace open here is never replaced
        await submit(app, pilot, f"/workspace import {bundle}")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert (manager.path_for("demo") / "notes.txt").read_text() == "hello\n"
    assert sorted(manager.list()) == ["copy", "demo", "other"]
