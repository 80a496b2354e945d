"""When the workbench is *settled*: the first workspace is open and the deferred start-up work is done.

Some start-up work is deferred until after the workspace is shown, so that the first frame and the
workspace come first: the Context pane's last retrieved set (``context-last``), the check of a
profile that may set what is in force (``profile``) and, with no model configured, the probe of a
local Ollama (``probe``). Each runs as a worker of its group. The App is settled once the workspace
is open and no worker of those groups is pending or running: that is the idle workbench whose
resident memory ``bench/startup.py`` measures (``ARIES_STARTUP_MARK=FILE`` makes the App append the
line ``settled`` to FILE at that moment; tests await ``AriesApp.settled``).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from textual.app import App
from textual.worker import WorkerState

DEFERRED_GROUPS = frozenset({"context-last", "profile", "probe"})
"""The worker groups of deferred start-up work."""
_POLL_S = 0.05
_QUIET_POLLS = 3  # consecutive polls with nothing deferred running (a worker may be about to start)
_LIMIT_S = 60.0


def deferred_running(app: App[Any]) -> bool:
    return any(
        worker.group in DEFERRED_GROUPS and worker.state in (WorkerState.PENDING, WorkerState.RUNNING)
        for worker in app.workers
    )


async def settle(app: App[Any], settled: asyncio.Event) -> None:
    """Set ``settled`` (and write the mark) once no deferred start-up work is pending or running."""
    quiet, waited = 0, 0.0
    while quiet < _QUIET_POLLS and waited < _LIMIT_S:
        await asyncio.sleep(_POLL_S)
        waited += _POLL_S
        quiet = 0 if deferred_running(app) else quiet + 1
    settled.set()
    mark = os.environ.get("ARIES_STARTUP_MARK")
    if mark:
        try:
            with Path(mark).open("a", encoding="utf-8") as out:
                out.write("settled\n")
        except OSError:
            pass  # a benchmark's side channel: never a reason to fail
