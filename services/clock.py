"""Time, in one place: timestamps (UTC, ISO 8601, millisecond precision, ``Z`` suffix) and the
monotonic clock that durations are measured with.

``ARIES_FROZEN_TIME=1`` stops both — every timestamp is ``FROZEN_AT`` and every monotonic reading
is 0 — so that a test (a snapshot of a live turn) can compare screens that show times. It is a test
setting; nothing in Aries depends on time moving for correctness.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

FROZEN_AT = "2026-01-01T09:00:00.000Z"


def frozen() -> bool:
    return os.environ.get("ARIES_FROZEN_TIME") == "1"


def utc_now() -> str:
    if frozen():
        return FROZEN_AT
    return format_ts(datetime.now(UTC))


def monotonic() -> float:
    """Seconds on a monotonic clock (``time.perf_counter``), for durations."""
    return 0.0 if frozen() else time.perf_counter()


def format_ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
