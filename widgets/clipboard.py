"""Copying to the terminal's clipboard (OSC 52, ``App.copy_to_clipboard``) and saying what happened.

Every copy path — a mouse selection (Ctrl+C), ``/copy``, ``y`` and ``c`` in the transcript — goes
through :func:`copy_text`: one sanitiser (``services.text.textsafe.strip_unsafe``) removes control,
escape and bidi characters, which a paste into a terminal would run, and the note says how many.
``AriesApp.copy_to_clipboard`` applies the same sanitiser to Textual's own copies (an input's or an
editor's selection), so nothing reaches the clipboard another way.

No terminal answers an OSC 52 request, so a copy is sent blind: the note says so, and inside tmux
(where it reaches the outer terminal only with ``set-clipboard on``) says what to set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from services.text.textsafe import strip_unsafe

SELECTION_MODIFIER = "Shift"
"""What most terminals (xterm, GNOME Terminal, Konsole, Windows Terminal, kitty, WezTerm, tmux with
mouse on) hold for their own selection while an application has the mouse; iTerm2 and Terminal.app: Option."""


def copied_note(chars: int, environ: Mapping[str, str] | None = None, removed: int = 0) -> str:
    """What to tell after a copy of ``chars`` characters (``removed``: unsafe characters left out)."""
    env = os.environ if environ is None else environ
    note = f"Copied {chars} characters with OSC 52."
    if removed:
        note += f" Removed {removed} control, escape or bidi character{'s' if removed != 1 else ''}."
    if env.get("TMUX"):
        return f"{note} Inside tmux it reaches your clipboard only with `set -g set-clipboard on` in tmux.conf."
    return (
        f"{note} If your terminal does not support OSC 52, nothing was copied: "
        f"select the text with {SELECTION_MODIFIER}+drag (Option+drag on macOS)."
    )


def copy_text(app: Any, text: str, title: str) -> str:
    """Put ``text`` on the clipboard, sanitised, and notify with the note; returns what was copied."""
    safe, removed = strip_unsafe(text)
    app.copy_to_clipboard(safe)
    app.notify(copied_note(len(safe), removed=removed), title=title, timeout=6)
    return safe
