"""Themes: Textual's own, and one of Aries's for high contrast; the operator's choice kept in their
settings store (``services.settings.operator``, ``theme``) and applied before the first frame.

Colours that carry meaning (a call's risk, a diff's added and removed lines, a tool's outcome) come
from the theme's variables (``$text-success``, ``$text-error``…), never from fixed names, and each
goes with a word or a symbol (the tier's name, ``+``/``-``, ``✓``/``✗``): nothing relies on red
against green alone.

Start-up reads the one field with ``json`` (:func:`saved_theme`): the settings file's pydantic model
is not worth importing before the first frame; ``/theme`` writes the file through that model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual.theme import BUILTIN_THEMES, Theme

HIGH_CONTRAST = Theme(
    name="aries-high-contrast",
    primary="#FFD700",
    secondary="#00E5FF",
    accent="#FF66FF",
    warning="#FFD700",
    error="#FF6B6B",
    success="#5CFF5C",
    foreground="#FFFFFF",
    background="#000000",
    surface="#000000",
    panel="#1C1C1C",
    boost="#FFFFFF",
    dark=True,
    luminosity_spread=0.2,
    text_alpha=1.0,
    variables={
        "text-muted": "#E0E0E0",
        "primary-muted": "#BDBDBD",  # the panes' borders
        "secondary-muted": "#BDBDBD",
        "accent-muted": "#FF66FF",
        "border": "#FFFFFF",
        "border-blurred": "#BDBDBD",
        "block-cursor-background": "#FFD700",
        "block-cursor-foreground": "#000000",
        "input-selection-background": "#00E5FF 60%",
        "footer-key-foreground": "#FFD700",
    },
)
"""White on black, saturated accents, no dimmed text: for low vision and washed-out screens."""

SETTINGS_FILE = "settings.json"
"""``services.settings.operator.SETTINGS_FILE`` (a test holds them equal)."""

THEMES: dict[str, Theme] = {**BUILTIN_THEMES, HIGH_CONTRAST.name: HIGH_CONTRAST}


def theme_names() -> list[str]:
    """Every theme ``/theme`` offers, sorted."""
    return sorted(THEMES)


def describe(name: str) -> str:
    """``light``, ``dark`` or ``high contrast``: what to say of a theme in the list."""
    if name == HIGH_CONTRAST.name:
        return "high contrast"
    theme = THEMES.get(name)
    return "dark" if theme is None or theme.dark else "light"


def saved_theme(path: Path | None = None) -> str | None:
    """The theme the operator chose (``settings.json``'s ``theme``), read cheaply; None when there is no
    file, it does not read, or the name is not a theme (the file's errors are reported by ``/theme``)."""
    from services.settings.config import aries_home  # not services.settings.operator: it imports pydantic

    try:
        data = json.loads((path or aries_home() / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = data.get("theme") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name in THEMES else None


def start_theme(app: Any) -> None:
    """Register Aries's theme and put the operator's saved one in force (from ``App.__init__``: the
    first frame is drawn in it)."""
    app.register_theme(HIGH_CONTRAST)
    name = saved_theme()
    if name is not None:
        app.theme = name


__all__ = ["HIGH_CONTRAST", "THEMES", "describe", "saved_theme", "start_theme", "theme_names"]
