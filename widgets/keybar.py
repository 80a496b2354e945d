"""A one-widget footer: the screen's active key bindings rendered as a single line of text.

Textual's Footer builds one widget per key and recomposes on every focus change; with a
dozen keys that alone cost about a third of Aries's start-up.  This bar shows the same
bindings (those with ``show=True``, plus the command palette) and re-renders on the same
signal, as text.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widgets import Static

_NAMES = {
    "escape": "Esc", "enter": "Enter", "tab": "Tab", "space": "Space", "up": "↑", "down": "↓", "left": "←",
    "right": "→", "pageup": "PgUp", "pagedown": "PgDn", "home": "Home", "end": "End", "delete": "Del",
    "backspace": "Backspace", "insert": "Ins",
}  # fmt: skip
_MODIFIERS = {"ctrl": "Ctrl", "shift": "Shift", "alt": "Alt", "meta": "Meta", "super": "Super"}
SHOWN_ELSEWHERE = frozenset({"focus.transcript", "focus.context", "focus.approvals", "focus.artifacts"})
"""Binding ids the bar leaves out when it is too narrow for all: the pane strip shows F2–F5 there."""


def key_label(keys: str) -> str:
    """One notation for keys everywhere (help, key bar, tooltips, README): ``ctrl+o`` → ``Ctrl+O``,
    ``f1`` → ``F1``, ``escape,q`` → ``Esc / q``; a plain letter stays the letter typed."""

    def one(key: str) -> str:
        *modifiers, name = key.strip().split("+")
        if name in _NAMES:
            name = _NAMES[name]
        elif modifiers or (name[:1] == "f" and name[1:].isdigit()):
            name = name.upper()
        return "+".join([*(_MODIFIERS.get(m, m.title()) for m in modifiers), name])

    return " / ".join(one(key) for key in keys.split(",") if key.strip())


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar { dock: bottom; height: 1; background: $footer-background; color: $footer-foreground; }
    """

    _key_style = "bold"

    def on_mount(self) -> None:
        key_color = self.app.theme_variables.get("footer-key-foreground") or self.app.theme_variables.get("accent")
        if key_color:
            self._key_style = f"bold {key_color}"
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._render_keys()

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            self._render_keys()

    def describe(self, *, narrow: bool = False) -> list[tuple[str, str]]:
        """``(key, description)`` for every key the bar shows, in order (``narrow``: without the keys
        the pane strip shows)."""
        seen: set[str] = set()
        keys: list[tuple[str, str]] = []
        palette_key = self.app.COMMAND_PALETTE_BINDING
        palette: tuple[str, str] | None = None
        for key, (_node, binding, enabled, _tooltip) in self.screen.active_bindings.items():
            if key == palette_key and self.app.ENABLE_COMMAND_PALETTE:
                palette = (key_label(key), (binding.description or "palette").capitalize())
                continue
            if not binding.show or not enabled or binding.action in seen:
                continue
            if narrow and binding.id in SHOWN_ELSEWHERE:
                continue
            seen.add(binding.action)
            keys.append((key_label(key), binding.description))
        if palette is not None:
            keys.append(palette)
        return keys

    def on_resize(self, event: events.Resize) -> None:
        self._render_keys()

    def _render_keys(self) -> None:
        line = self._line(self.describe())
        if self.size.width and line.cell_len > self.size.width:  # 80 columns: whole labels, fewer keys
            line = self._line(self.describe(narrow=True))
        self.update(line)

    def _line(self, keys: list[tuple[str, str]]) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        for key, description in keys:
            line.append(f" {key} ", style=self._key_style)
            line.append(f"{description} ", style="")
        return line
