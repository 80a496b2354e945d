"""A one-widget footer: the screen's active key bindings rendered as a single line of text.

Textual's Footer builds one widget per key and recomposes on every focus change; with a
dozen keys that alone cost about a third of Aries's start-up.  This bar shows the same
bindings (those with ``show=True``, plus the command palette) and re-renders on the same
signal, as text.
"""

from __future__ import annotations

from rich.text import Text
from textual.screen import Screen
from textual.widgets import Static


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

    def describe(self) -> list[tuple[str, str]]:
        """``(key display, description)`` for every key the bar shows, in order."""
        seen: set[str] = set()
        keys: list[tuple[str, str]] = []
        palette_key = self.app.COMMAND_PALETTE_BINDING
        palette: tuple[str, str] | None = None
        for key, (_node, binding, enabled, _tooltip) in self.screen.active_bindings.items():
            if key == palette_key and self.app.ENABLE_COMMAND_PALETTE:
                palette = (self.app.get_key_display(binding), binding.description or "palette")
                continue
            if not binding.show or not enabled or binding.action in seen:
                continue
            seen.add(binding.action)
            keys.append((self.app.get_key_display(binding), binding.description))
        if palette is not None:
            keys.append(palette)
        return keys

    def _render_keys(self) -> None:
        line = Text(no_wrap=True, overflow="ellipsis")
        for key, description in self.describe():
            line.append(f" {key} ", style=self._key_style)
            line.append(f"{description} ", style="")
        self.update(line)
