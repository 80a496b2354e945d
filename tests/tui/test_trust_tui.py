"""An imported workspace in the TUI: the header says it is untrusted, /trust shows the review in a
modal, Esc keeps the defaults, t puts its settings in force (and the header says so)."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.trust import TrustScreen
from services.bundles.export import export_workspace
from services.bundles.importer import import_bundle
from services.workspace.manager import WorkspaceManager

SIZE = (160, 48)


async def submit(app: AriesApp, pilot: Pilot[int], line: str) -> None:
    prompt = app.screen.query_one("#prompt")
    prompt.value = line  # type: ignore[attr-defined]
    await pilot.press("enter")
    await pilot.pause()


def _import(tmp_path: Path) -> None:
    source = WorkspaceManager(tmp_path / "elsewhere" / "workspaces")
    workspace, _ = source.create("src")
    (workspace.root / "policy.yaml").write_text(
        "version: 1\nmode: strict\nfilesystem:\n  allowed_roots: ['/', '[bold]x[/bold]']\n", encoding="utf-8"
    )
    bundle = tmp_path / "src.tar.zst"
    export_workspace(workspace, bundle, aries_version="test")
    import_bundle(bundle, WorkspaceManager(), name="victim")


async def test_untrusted_header_review_modal_and_trust(tmp_path: Path) -> None:
    _import(tmp_path)
    app = AriesApp("victim")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.pause()
        assert app.session is not None
        assert "victim (untrusted: /trust)" in app.sub_title
        assert app.session.policy_path is None and app.session.mode == "guide"

        await submit(app, pilot, "/trust")
        assert isinstance(app.screen, TrustScreen)
        body = str(app.screen.query_one("#trust-lines").render())
        assert "allowed roots: /, [bold]x[/bold] (default: the workspace)" in body  # literally, never markup
        assert "approval mode: strict (default: guide), set by its policy.yaml" in body
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, TrustScreen)
        assert app.session.policy_path is None

        await submit(app, pilot, "/trust")
        await pilot.press("t")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.session.policy_path is not None and "/" in app.session.policy().allowed_roots
        assert app.session.mode == "strict"  # what the review listed is what trusting put in force
        assert "untrusted" not in app.sub_title
        notices = [e["content"] for e in app.session.conversation.read().entries if e["role"] == "notice"]
        assert any(n.startswith("Workspace victim trusted by") for n in notices)


async def test_an_own_workspace_has_nothing_to_review() -> None:
    WorkspaceManager().create("mine")
    app = AriesApp("mine")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await submit(app, pilot, "/trust")
        assert not isinstance(app.screen, TrustScreen)
        assert "untrusted" not in app.sub_title
