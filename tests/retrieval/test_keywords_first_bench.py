"""The CI-sized run of ``bench/keywords_first.py`` (the judged SciFact documents, the hash embedder): the
folder is searchable by keyword before it is complete, a query in between answers from BM25 with no dense
part yet, and at the end every chunk has its vector. The full collection with the default encoder is the
published bench (docs/BENCHMARKS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCIFACT = REPO.parent / "shared" / "eval" / "scifact"


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(not SCIFACT.is_dir(), reason="the shared SciFact collection is not beside the checkout")
def test_the_small_keywords_first_bench(tmp_path: Path) -> None:
    out = tmp_path / "kf.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "keywords_first.py"), "--limit-docs", "120", "--embedder", "hash"]
        + ["--json", str(out)],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    now = json.loads(out.read_text())["now"]
    assert now["first_commit_s"] <= now["keywords_s"] <= now["complete_s"]
    probe = now["probe"]
    assert probe["mode"] == "hybrid" and probe["dense_share"] < 1.0 and probe["top_bm25_rank"] == 1
    assert now["dense_share_end"] == 1.0 and now["ndcg10"] > 0.5
