"""Ctrl+G: the draft in the operator's editor (``services.files.external_editor``), the App suspended
meanwhile (``App.suspend()``: the editor has the terminal, the screen comes back as it was)."""

from __future__ import annotations

from typing import Any

from services.files.external_editor import Edited, edit_text

CANNOT_SUSPEND = "This terminal cannot be handed to another program (Textual cannot suspend here)."


def edit_in_editor(app: Any, draft: str) -> Edited:
    """Run the editor on ``draft`` with the terminal handed over. A headless App (tests, a pipe) has no
    terminal to hand over: the editor runs as it is."""
    from textual.app import SuspendNotSupported

    try:
        with app.suspend():
            return edit_text(draft)
    except SuspendNotSupported:
        if app.is_headless:
            return edit_text(draft)
        return Edited(None, CANNOT_SUSPEND)
