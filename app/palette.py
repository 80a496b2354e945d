"""Command-palette provider (Ctrl+P): namespaced workspace, help and slash commands.

The slash commands come from the same table as ``/help`` and Tab completion
(``widgets.commands.palette_entries``): ``command: /rag last`` runs it; ``command: /rag query …``
(one that still needs an argument) puts it in the prompt. Both post ``MainScreen.SlashCommand``
to the main screen, which submits the prompt as if typed, so the App dispatches it as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.markup import escape

from widgets.commands import palette_entries
from widgets.safe import clean

if TYPE_CHECKING:
    from app.commands import Commands
    from app.host import AppHost

    class PaletteHost(AppHost, Protocol):
        """The App as the palette sees it: its actions and its controllers."""

        commands: Commands


class AriesCommands(Provider):
    def _post_slash(self, line: str, run: bool) -> None:
        from screens.main import MainScreen

        screens = [screen for screen in self.app.screen_stack if isinstance(screen, MainScreen)]
        if screens:
            screens[0].post_message(MainScreen.SlashCommand(line, run))

    def _commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app: PaletteHost = self.app  # type: ignore[assignment]
        commands: list[tuple[str, Callable[[], Any], str]] = [
            ("workspace: switch…", app.action_switch_workspace, "Open the workspace switcher"),
            ("workspace: new…", partial(app.action_switch_workspace, True), "Create a workspace by name"),
            ("help: commands and keys", app.action_help, "Show every slash command and key"),
            ("context: browse", app.action_context_browse, "Open the context browser (axiom:// scopes, L0/L1, files)"),
            (
                "viewer: start/stop the web viewer",
                app.commands.serve.toggle,
                "Start/stop the web viewer of this workspace's documents (/serve); its URL goes to the transcript",
            ),
        ]
        for name in app.manager.list():
            if name != app.workspace_name:
                commands.append((f"workspace: open {name}", partial(app.open_workspace, name), f"Switch to {name}"))
        for name, description in self._profiles():
            commands.append(
                (f"profile: use {name}", partial(self._post_slash, f"/profile use {name}", True), description)
            )
        for line, summary, runnable in palette_entries(app.commands.registry.specs()):
            text = f"command: {line}" if runnable else f"command: {line} …"
            help_text = summary if runnable else f"{summary} (type the rest at the prompt)"
            commands.append((text, partial(self._post_slash, line, runnable), help_text))
        return commands

    def _profiles(self) -> list[tuple[str, str]]:
        """The profile picker: every usable profile (listed once per palette opening)."""
        cached: list[tuple[str, str]] | None = getattr(self, "_profile_rows", None)
        if cached is None:
            app: PaletteHost = self.app  # type: ignore[assignment]
            if app.session is None:
                return []
            cached = [(e.name, e.description) for e in app.commands.profiles.entries() if e.error is None]
            self._profile_rows = cached
        return cached

    async def discover(self) -> Hits:
        for text, callback, help_text in self._commands():
            shown = clean(text, single_line=True)
            yield DiscoveryHit(Content(shown), callback, text=shown, help=escape(clean(help_text, single_line=True)))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in self._commands():
            shown = clean(text, single_line=True)
            score = matcher.match(shown)
            if score > 0:
                help_shown = escape(clean(help_text, single_line=True))
                yield Hit(score, matcher.highlight(shown), callback, text=shown, help=help_shown)
