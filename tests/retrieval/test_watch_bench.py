"""The CI-sized run of ``bench/watch.py`` (``--small``: 500 files, 5 changes of each kind, the 1,000-save
storm, the SIGKILL mid-batch): each kind searchable p95 ≤ 5 s, the storm ≤ 10 batches, the index check
passes after the kill and after the next watch's catch-up. The 10,000-file run is the published bench."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_small_watch_bench_passes() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "watch.py"), "--small", "--json"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=900,
    )
    assert done.returncode in (0, 1), done.stderr.decode(errors="replace")[-2000:]
    report = json.loads(done.stdout)
    for kind in ("add", "edit", "delete", "rename"):
        for measure in ("shared_latency_ms", "written_ms", "latency_ms"):  # at 500 files: from anywhere
            assert report[measure][kind]["p95"] <= 5000, (measure, report[measure])
    assert 1 <= report["storm"]["batches"] <= 10, report["storm"]
    kill = report["kill"]
    assert kill["killed_in_batch"] and kill["check_after_kill"] and kill["check_after_catch_up"], kill
    assert kill["burst_files_indexed"] == 300, kill
    assert report["ok"] and done.returncode == 0
