"""When the workbench is *settled*, then *idle*: the start-up work deferred after the workspace is done.

Some start-up work is deferred until after the workspace is shown, so that the first frame and the
workspace come first: the Context pane's last retrieved set (``context-last``), the check of a
profile that may set what is in force (``profile``) and, with no model configured, the probe of a
local Ollama (``probe``). Each runs as a worker of its group. The App is *settled* once the workspace
is open and no worker of those groups is pending or running (tests await ``AriesApp.settled``).

Other work waits for that moment and runs after it: the conversation search index's build
(``history-index``, a named workspace), the policy's MCP servers (``mcp``) and the vectors an
interrupted ``rag index add`` left pending (``rag-vectors``). The App is *idle* once, after settling,
no worker of any of these groups is pending or running: that is the workbench the user lives in,
whose resident memory ``bench/startup.py`` measures (``ARIES_STARTUP_MARK=FILE`` makes the App append
the line ``settled``, then the line ``idle``, to FILE at those moments; tests await ``AriesApp.idle``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.app import App
from textual.worker import WorkerState

DEFERRED_GROUPS = frozenset({"context-last", "profile", "probe"})
"""The worker groups of deferred start-up work (before *settled*)."""
LATER_GROUPS = frozenset({"history-index", "mcp", "rag-vectors"})
"""The worker groups of the start-up work that runs once settled (before *idle*)."""
_POLL_S = 0.05
_QUIET_POLLS = 3  # consecutive polls with nothing deferred running (a worker may be about to start)
_LIMIT_S = 60.0
_IDLE_LIMIT_S = 600.0  # a conversation index of many thousand transcripts takes minutes


def deferred_running(app: App[Any], groups: Iterable[str] = DEFERRED_GROUPS) -> bool:
    wanted = frozenset(groups)
    return any(
        worker.group in wanted and worker.state in (WorkerState.PENDING, WorkerState.RUNNING) for worker in app.workers
    )


async def _quiet(app: App[Any], groups: frozenset[str], limit_s: float) -> None:
    """Return once no worker of ``groups`` has been pending or running for a few polls (or after ``limit_s``)."""
    quiet, waited = 0, 0.0
    while quiet < _QUIET_POLLS and waited < limit_s:
        await asyncio.sleep(_POLL_S)
        waited += _POLL_S
        quiet = 0 if deferred_running(app, groups) else quiet + 1


def _mark(line: str) -> None:
    mark = os.environ.get("ARIES_STARTUP_MARK")
    if mark:
        try:
            with Path(mark).open("a", encoding="utf-8") as out:
                out.write(f"{line}\n")
        except OSError:
            pass  # a benchmark's side channel: never a reason to fail


async def settle(app: App[Any], settled: asyncio.Event, idle: asyncio.Event | None = None) -> None:
    """Set ``settled`` once no deferred start-up work is pending or running, then ``idle`` once the work
    that waited for that is done too (writing each mark)."""
    await _quiet(app, DEFERRED_GROUPS, _LIMIT_S)
    settled.set()
    _mark("settled")
    if idle is None:
        return
    await _quiet(app, DEFERRED_GROUPS | LATER_GROUPS, _IDLE_LIMIT_S)
    idle.set()
    _mark("idle")
