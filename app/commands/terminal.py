"""``/theme`` and ``/notify``: how the terminal looks and how Aries calls the operator, kept in the
operator's settings store (``services.settings.operator``), for every workspace. The file is written in
a thread (it waits for its lock); a file that does not read is one error line and is left as it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from app.host import AppHost, run_task
from services.errors import AriesError

if TYPE_CHECKING:
    from services.settings.operator import OperatorSettings


class TerminalController:
    def __init__(self, host: AppHost) -> None:
        self.host = host

    def theme(self, name: str | None) -> None:
        """No name: the themes, the one in force marked. A name: use it now and keep it."""
        from widgets.themes import THEMES, describe, theme_names

        if name is None:
            rows = [f"{'●' if n == self.host.theme else ' '} {n}  ({describe(n)})" for n in theme_names()]
            self.host.say("\n".join(["Themes (/theme NAME uses one; ● in force):", *rows]), title="theme")
            return
        if name not in THEMES:
            raise AriesError(f"no theme {name!r} (/theme lists them)")
        self.host.theme = name

        def keep(settings: OperatorSettings) -> OperatorSettings:
            return settings.model_copy(update={"theme": name})

        self._write(keep, f"Theme {name} ({describe(name)}), kept for every workspace.", "theme")

    def notify(self, what: str | None, state: str | None) -> None:
        """No argument: what is set. ``bell|desktop on|off``: set it and keep it."""
        if what is None:
            settings = self.host.attention.current()
            lines = [
                f"bell: {'on' if settings.bell else 'off'}",
                f"desktop notification: {'on' if settings.desktop else 'off'} (OSC 9/777; inside tmux it needs "
                "`set -g allow-passthrough on`)",
                f"when: a call waits for approval, or a turn ends after more than {settings.long_turn_seconds:g} s",
            ]
            self.host.say("\n".join(lines), title="notify")
            return
        if what not in ("bell", "desktop") or state not in ("on", "off"):
            raise AriesError("usage: /notify [bell|desktop on|off]")
        value = state == "on"

        def keep(settings: OperatorSettings) -> OperatorSettings:
            changed = settings.notifications.model_copy(update={what: value})
            return settings.model_copy(update={"notifications": changed})

        self._write(keep, f"{'Bell' if what == 'bell' else 'Desktop notification'} {state}.", "notify")

    def _write(self, change: Callable[[OperatorSettings], OperatorSettings], done: str, title: str) -> None:
        from services.settings.operator import update_settings

        def then(settings: OperatorSettings) -> None:
            self.host.attention.settings = settings.notifications
            self.host.notify(done, title=title, timeout=4)

        run_task(self.host, f"/{title}", lambda: update_settings(change), then, group="operator-settings")
