"""The CI-sized run of ``bench/export.py`` (``--small``: a conversation of 20 turns through the real
writer): both formats export, twice the same bytes, and no secret-shaped token survives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_small_bench_passes() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "export.py"), "--small", "--json"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    report = json.loads(done.stdout)
    assert report["turns"] == 20
    for fmt in ("md", "html"):
        assert report[fmt]["identical"] and report[fmt]["bytes"] > report["transcript_bytes"] / 2
        assert report[fmt]["secrets_left"] == 0
        assert report[fmt]["warm_s"] < 60  # a bound for a shared CI machine, not the published number
