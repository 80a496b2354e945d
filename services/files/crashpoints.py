"""Crash points for the crash tests: a process stops (SIGKILL) or pauses at a named step when an
environment variable names that step, and does nothing otherwise.

    ARIES_CONTEXT_COMMIT_FAULT=journal        kill the process when it reaches step "journal"
    ARIES_CONTEXT_INGEST_FAULT=staged:sleep=5 pause five seconds there (to look at the state)

Inert unless the variable is set: the variable is read at each point, no state is kept.
"""

from __future__ import annotations

import os
import signal
import time


def crash_point(variable: str, step: str) -> None:
    """Stop (``name`` or ``name:kill``) or pause (``name:sleep=SECONDS``) when ``$variable`` names ``step``."""
    spec = os.environ.get(variable)
    if not spec:
        return
    name, _, action = spec.partition(":")
    if name != step:
        return
    if action.startswith("sleep="):
        time.sleep(float(action.removeprefix("sleep=")))
        return
    os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
    time.sleep(10)  # pragma: no cover - the signal is delivered before this returns
