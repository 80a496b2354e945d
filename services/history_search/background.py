"""Building the conversation search index of an open workspace in the background, a slice at a time.

The TUI runs :func:`build` in a worker once the workspace is ready (never on the start-up path). It
catches the index up in slices of at most ``slice_s`` seconds, letting the writer lock go between
slices; a search in this process or in another (``aries history search``) that finds the lock taken
says so (``HistoryIndex.wanted``), the slice ends after its current transcript, and the search takes
the lock in the gap: it indexes what was just written first (``HistoryIndex._work`` orders appended
bytes first) and answers — marked partial, saying how far the build is — instead of waiting for the
whole build. While another process holds the writer lock the build waits for it, and it stops when
the index covers every transcript or ``cancel`` is set (the workspace closes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from services.history_search.store import Coverage, HistoryIndex

SLICE_S = 2.0
"""The longest one slice holds the writer lock; a search that waits for it (``HistoryIndex.wanted``)
ends the slice after its current transcript, so it waits for one transcript and a commit, not this."""
PAUSE_S = 0.05
"""Between two slices, with the writer lock free."""
YIELD_S = 0.5
"""After a slice a search asked to end: the lock is left free this long for it (it polls every 20 ms)."""
BUSY_WAIT_S = (0.25, 2.0)
"""The first and the longest wait while another process holds the writer lock."""


def build(
    index: HistoryIndex,
    cancel: threading.Event,
    *,
    slice_s: float = SLICE_S,
    report: Callable[[Coverage], None] | None = None,
) -> Coverage:
    """Catch ``index`` up with every transcript, slice by slice, until it covers them all or
    ``cancel`` is set; ``report`` hears the coverage after each slice that moved it on (or found
    the index damaged and started it again: ``Coverage.rebuilt``), the last one included."""
    busy, before = BUSY_WAIT_S[0], -1
    while True:
        coverage = index.catch_up(budget_s=slice_s, cancel=cancel)
        if report is not None and (coverage.indexed != before or coverage.rebuilt):
            report(coverage)
        if not coverage.partial or cancel.is_set():
            return coverage
        if coverage.indexed > before:  # moving on (here or in another process)
            wait, busy = PAUSE_S, BUSY_WAIT_S[0]
        else:  # another process holds the writer lock and is not done: ask again later
            wait, busy = busy, min(busy * 2, BUSY_WAIT_S[1])
        before = coverage.indexed
        if index.wanted(YIELD_S):
            wait = max(wait, YIELD_S)
        if cancel.wait(wait):
            return coverage


__all__ = ["build"]
