"""Copying to the terminal's clipboard (OSC 52, ``App.copy_to_clipboard``) and saying what happened.

No terminal answers an OSC 52 request, so a copy is sent blind: the note says so, and inside tmux
(where it reaches the outer terminal only with ``set-clipboard on``) says what to set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any


def copied_note(chars: int, environ: Mapping[str, str] | None = None) -> str:
    """What to tell after a copy of ``chars`` characters."""
    env = os.environ if environ is None else environ
    note = f"Copied {chars} characters with OSC 52."
    if env.get("TMUX"):
        return f"{note} Inside tmux it reaches your clipboard only with `set -g set-clipboard on` in tmux.conf."
    return f"{note} If your terminal does not support OSC 52, nothing was copied: select the text with Shift+drag."


def copy_text(app: Any, text: str, title: str) -> None:
    """Put ``text`` on the clipboard and notify with the note."""
    app.copy_to_clipboard(text)
    app.notify(copied_note(len(text)), title=title, timeout=6)
