"""``/replay`` (a stored conversation, read-only) and ``/runs`` (plan runs and their timelines)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from app.host import run_task

if TYPE_CHECKING:
    from app.host import Host
    from services.session.session import Session


class HistoryController:
    def __init__(self, host: Host) -> None:
        self.host = host

    def replay(self) -> None:
        self.host.run_worker(self._replay(), group="history", exit_on_error=False)

    async def _replay(self) -> None:
        from services.workspace.transcripts import summarize

        session = self.host.require_session()
        paths = session.workspace.conversations()
        summaries = await asyncio.to_thread(lambda: [summarize(p) for p in paths])
        if not summaries:
            self.host.notify("No stored conversations in this workspace yet.", title="/replay", timeout=4)
            return
        from screens.replay import ReplayScreen

        self.host.push_screen(ReplayScreen(summaries, session.workspace.name))

    def runs(self) -> None:
        session = self.host.require_session()

        def load() -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
            from services.plans.runner import list_runs, stored_run

            rows = list_runs(session.workspace)
            return rows, {row["run_id"]: stored_run(session.workspace, row["run_id"])["steps"] for row in rows}

        def show(loaded: tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]) -> None:
            self._show_runs(session, *loaded)

        run_task(self.host, "/runs", load, show, group="history")

    def _show_runs(
        self, session: Session, rows: list[dict[str, Any]], timelines: dict[str, list[dict[str, Any]]]
    ) -> None:
        if not rows:
            self.host.notify(
                "No plan runs in this workspace yet; run one with: aries -w NAME run PLAN.yaml",
                title="/runs",
                timeout=5,
            )
            return
        from screens.runs import RunsScreen

        self.host.push_screen(RunsScreen(rows, timelines, session.workspace.name))
