"""The CI-sized run of ``bench/history_search.py`` (``--small``: 50 conversations × 20 entries through
the real writer): a warm search p95 ≤ 100 ms, a new turn findable ≤ 1 s, the rebuilt index's hits
equal to the warm ones. The full size (2,000 × 50) is the published bench."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_small_bench_passes() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "history_search.py"), "--small", "--jobs", "2", "--json"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=600,
    )
    report = json.loads(done.stdout)
    assert report["entries_indexed"] == 50 * 20
    assert report["rebuild_same_hits"] and report["rebuild_differs_in"] == 0
    assert report["findable_ms"]["max"] <= 1000
    assert report["search_ms"]["p95"] <= 100
    assert report["hits_mean"] > 0  # the queries find something: the comparison is not vacuous
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
