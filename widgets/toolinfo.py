"""Shared ways of naming a tool call on screen: its risk tier colour (from the theme) and its key argument.

Used by the Approvals pane, the approval modal and the transcript's tool blocks (widgets must not
import screens, so these live here and ``screens.approval`` re-exports them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from widgets.safe import clean

TIER_STYLES = {
    "READ_ONLY": "green",
    "WRITE_SAFE": "yellow",
    "WRITE_DESTRUCTIVE": "bold red",
    "EXEC_USERSPACE": "bold yellow",
    "EXEC_PRIVILEGED": "bold red",
    "NETWORK": "bold magenta",
}

TIER_COLOURS = {
    "READ_ONLY": "text-success",
    "WRITE_SAFE": "text-warning",
    "WRITE_DESTRUCTIVE": "bold text-error",
    "EXEC_USERSPACE": "bold text-warning",
    "EXEC_PRIVILEGED": "bold text-error",
    "NETWORK": "bold text-secondary",
}
"""Each tier's colour as a theme variable (``App.theme_variables``); the tier's name is always shown with
it, so that no meaning rests on the colour alone."""


MEANING_COLOURS = {
    "added": ("text-success", "green"),
    "removed": ("text-error", "red"),
    "hunk": ("text-accent", "cyan"),
    "ok": ("text-success", "green"),
    "failed": ("bold text-error", "bold red"),
    "stderr": ("text-error", "red"),
}
"""What a diff's and a tool outcome's colours mean: (the theme variable, the fixed style without a theme).
Each goes with a symbol or a word on screen (``+``/``-``, ``@@``, ``✓ ok``/``✗ …``, ``stderr:``)."""


def themed(spec: str, variables: Mapping[str, str] | None, fallback: str) -> str:
    """``spec`` (``"bold text-error"``: weights and a theme variable) as a Rich style in the theme in
    force (``variables``: ``App.theme_variables``); ``fallback`` without them."""
    if not variables:
        return fallback
    *weight, name = spec.split()
    colour = variables.get(name, "").split(" ")[0]  # a variable may carry an alpha ("#fff 80%")
    return " ".join([*weight, colour]) if colour.startswith("#") else fallback


def meaning_style(meaning: str, variables: Mapping[str, str] | None = None) -> str:
    """The Rich style of one of ``MEANING_COLOURS`` in the theme in force."""
    spec, fallback = MEANING_COLOURS[meaning]
    return themed(spec, variables, fallback)


def tier_style(tier: str, variables: Mapping[str, str] | None = None) -> str:
    """The Rich style of a risk tier in the theme in force (``variables``: ``App.theme_variables``);
    without them, the fixed ``TIER_STYLES``."""
    spec = TIER_COLOURS.get(tier)
    if spec is None:
        return TIER_STYLES.get(tier, "")
    return themed(spec, variables, TIER_STYLES.get(tier, ""))


_KEY_LISTS = ("command", "argv", "cmd", "paths")
_KEY_SCALARS = ("url", "path", "query", "process_id", "artifact_id", "handle")


def key_argument_of(args: Mapping[str, Any] | Any) -> str:
    """The one argument that says most about a call: a command line, a URL or a path (neutralised)."""
    import json  # on first use: not at start-up

    if not isinstance(args, Mapping):
        return clean(json.dumps(args, ensure_ascii=False, default=str)[:200], single_line=True)
    for key in _KEY_LISTS:
        if key in args:
            value = args[key]
            shown = " ".join(map(str, value)) if isinstance(value, list) else str(value)
            return clean(shown, single_line=True)
    for key in _KEY_SCALARS:
        if key in args:
            return clean(args[key], single_line=True)
    return clean(json.dumps(dict(args), ensure_ascii=False, default=str)[:200], single_line=True)


def key_argument(request: Any) -> str:
    """``key_argument_of`` for an ``ApprovalRequest`` (anything with ``.args``)."""
    return key_argument_of(getattr(request, "args", {}))


def short_tool(tool_id: Any) -> str:
    return clean(tool_id, single_line=True).removeprefix("builtin:")


__all__ = ["TIER_COLOURS", "TIER_STYLES", "key_argument", "key_argument_of", "short_tool"]
