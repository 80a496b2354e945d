"""Issue 34 item 4: the Artifacts pane's diff preview takes its colours from the theme in force and
follows a theme switch (the approval modal's: tests/tui/test_snapshots_t5.py), the +/- kept."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import settle
from tests.tui.test_snapshots_t4 import PATCH


def _colours(app: AriesApp) -> dict[str, str]:
    """Each diff line of the preview (``-old line``, ``+new line``) and its colour."""
    content = app.screen.query_one("#artifact-preview", Static).content
    assert isinstance(content, Text)
    found: dict[str, str] = {}
    for span in content.spans:
        line = content.plain[span.start : span.end]
        style = str(span.style)
        if line in ("-old line", "+new line"):
            found[line] = style
    return found


async def test_the_artifacts_diff_preview_follows_the_theme() -> None:
    workspace, _ = WorkspaceManager().create("demo")
    workspace.artifacts.add_bytes(PATCH.encode(), "notes.txt.diff", provenance={"kind": "test", "role": "diff"})
    workspace.close()
    app = AriesApp("demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await app.ready()
        await pilot.press("f5")
        await settle(pilot)
        app.theme = "textual-dark"
        await settle(pilot)
        dark = _colours(app)
        variables = app.theme_variables
        assert dark == {
            "-old line": variables["text-error"].split()[0],
            "+new line": variables["text-success"].split()[0],
        }
        app.theme = "textual-light"
        await settle(pilot)
        light = _colours(app)
        assert light["-old line"] == app.theme_variables["text-error"].split()[0] != dark["-old line"]
        assert light["+new line"] == app.theme_variables["text-success"].split()[0] != dark["+new line"]
