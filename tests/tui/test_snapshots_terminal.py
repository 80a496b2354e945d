"""Snapshot tests of the themes (issue 34, item 4): the operator's saved theme is applied at start.

Baselines live in snapshots/test_snapshots_terminal/.
"""

from __future__ import annotations

from app.aries_app import AriesApp
from services.settings.operator import update_settings
from tests.tui.fixtures import workspace_with_transcript

SIZE = (160, 48)


def _saved(theme: str) -> None:
    update_settings(lambda settings: settings.model_copy(update={"theme": theme}))


def test_light_theme(snap_compare) -> None:
    """You should see the main screen with the fixture's transcript (you, assistant, the fs:list_dir tool
    block with ✓ ok and its table, the aries note) in textual-light: dark text on a light grey background,
    the panes' borders and titles in blue, every label readable."""
    workspace_with_transcript("demo")
    _saved("textual-light")
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE)


def test_high_contrast_theme(snap_compare) -> None:
    """You should see the same screen in aries-high-contrast: white text on black, yellow and cyan
    accents, no dimmed grey text."""
    workspace_with_transcript("demo")
    _saved("aries-high-contrast")
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE)
