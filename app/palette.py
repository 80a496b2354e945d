"""Command-palette provider (Ctrl+P): namespaced workspace and help commands."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from app.aries_app import AriesApp


class WorkspaceCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app: AriesApp = self.app  # type: ignore[assignment]
        commands: list[tuple[str, Callable[[], Any], str]] = [
            ("workspace: switch…", app.action_switch_workspace, "Open the workspace switcher"),
            ("workspace: new…", partial(app.action_switch_workspace, True), "Create a workspace by name"),
            ("help: commands and keys", app.action_help, "Show every slash command and key"),
        ]
        for name in app.manager.list():
            if name != app.workspace_name:
                commands.append((f"workspace: open {name}", partial(app.open_workspace, name), f"Switch to {name}"))
        return commands

    async def discover(self) -> Hits:
        for text, callback, help_text in self._commands():
            yield DiscoveryHit(text, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, help=help_text)
