"""``/workspace [list | new NAME | open NAME | switch]``, the switcher (Ctrl+O) and quitting. Export
and import are the bundle controller's (``app.commands.bundle``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from widgets.commands import Action, Named, WorkspaceImport

if TYPE_CHECKING:
    from app.commands.bundle import BundleController
    from app.host import AppHost


class WorkspaceController:
    def __init__(self, host: AppHost, bundles: BundleController, turn_running: Callable[[], bool]) -> None:
        self.host = host
        self.bundles = bundles
        self.turn_running = turn_running

    def command(self, parsed: Action | Named | WorkspaceImport) -> None:
        """The parsed ``/workspace`` line (nothing, or ``switch``: the switcher)."""
        if isinstance(parsed, WorkspaceImport):
            self.bundles.import_(parsed.bundle, parsed.name)
        elif isinstance(parsed, Named) and parsed.action == "export":
            self.bundles.export(parsed.name)
        elif isinstance(parsed, Named):
            work = self._open_and_say(parsed.name, parsed.action == "new")
            self.host.run_worker(work, group="workspace", exit_on_error=False)
        elif parsed.action == "switch":
            self.switcher()
        else:  # list
            names = self.host.manager.list()
            current = self.host.workspace_name
            listing = ", ".join(f"{n} (current)" if n == current else n for n in names)
            self.host.say(f"Workspaces: {listing or 'none yet; /workspace new NAME creates one'}", "workspace")

    def switcher(self) -> None:
        """The workspace switcher (fuzzy filter; Enter opens, Ctrl+N creates)."""
        from screens.workspace_switcher import WorkspaceSwitcher

        def done(result: tuple[str, str] | None) -> None:
            if result is not None:
                verb, name = result
                self.ask_before_leaving(
                    f"Switch to {name}",
                    lambda: self.host.run_worker(
                        self._open_and_say(name, verb == "new"), group="workspace", exit_on_error=False
                    ),
                )

        names = self.host.manager.list()
        marks = _needing_review(self.host, names)
        self.host.push_screen(WorkspaceSwitcher(names, self.host.workspace_name, marks), done)

    def interrupted(self) -> list[str]:
        """What closing the session now would cut short, in the operator's words ([] when nothing)."""
        session = self.host.session
        waiting = len(session.approvals) if session is not None else 0
        cut: list[str] = []
        if self.turn_running():
            cut.append("A turn is running: it is cancelled, recorded as cancelled by the operator.")
        if waiting:
            cut.append(
                f"{waiting} tool call(s) wait for your approval: each is denied, and the denial recorded in the "
                "audit store and the transcript."
            )
        return cut

    def ask_before_leaving(self, title: str, go: Callable[[], object]) -> None:
        """``go()`` at once when nothing runs or waits; otherwise after a yes (as Ctrl+Q asks)."""
        cut = self.interrupted()
        if not cut:
            go()
            return
        from screens.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                go()

        self.host.push_screen(ConfirmScreen(f"{title}?", "\n".join(cut)), answered)

    async def _open_and_say(self, name: str, create: bool) -> None:
        if await self.host.open_workspace(name, create=create):
            self.host.notify(f"Workspace {name} is active.", title="Workspace", timeout=3)

    # -- quitting --------------------------------------------------------------------------------
    async def quit(self) -> None:
        """Leave Aries; with calls waiting for approval, ask first (quitting denies them)."""
        session = self.host.session
        waiting = len(session.approvals) if session is not None else 0
        if not waiting:
            await self.host.quit_now()
            return
        from screens.confirm import ConfirmScreen

        if getattr(self.host.screen, "asks_to_quit", False):  # Ctrl+Q on the question itself: it is asked
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.host.run_worker(self.host.quit_now(), group="quit", exit_on_error=False)

        detail = (
            f"{waiting} tool call(s) wait for your approval. Quitting denies them; each denial is recorded "
            "in the audit store and the transcript."
        )
        question = ConfirmScreen(f"Quit with {waiting} call(s) waiting?", detail)
        question.asks_to_quit = True
        self.host.push_screen(question, answered)

    def quit_later(self) -> None:
        """``/quit``: as Ctrl+Q, from a worker (the command line runs synchronously)."""
        self.host.run_worker(self.host.action_quit(), group="quit", exit_on_error=False)


def _needing_review(host: AppHost, names: list[str]) -> dict[str, str]:
    """The switcher's trust marks: each workspace whose settings wait for a review (untrusted, changed)."""
    from services.trust.records import workspace_trust

    states = {name: workspace_trust(host.manager.path_for(name)) for name in names}
    return {name: state.label for name, state in states.items() if state.needs_review}
