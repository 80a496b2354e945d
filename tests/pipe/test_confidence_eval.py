"""``confidence.local`` against the shared SciFact set: higher, on average, for questions whose relevant
abstracts are in the index than for the same questions against an index without them.

Runs ``bench/ask_confidence.py`` (the real headless turn, offline provider, hash embedder) as a
subprocess on a small deterministic subset; the bench's defaults measure a larger one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.assistant.confidence import local_confidence

REPO = Path(__file__).resolve().parents[2]
SCIFACT = REPO.parent / "shared" / "eval" / "scifact"

pytestmark = pytest.mark.timeout(300)


def test_confidence_is_higher_with_the_relevant_documents(tmp_path: Path) -> None:
    if not (SCIFACT / "corpus.jsonl").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"the SciFact collection is not at {SCIFACT}")
        pytest.skip(f"the SciFact collection is not at {SCIFACT}")
    env = {**os.environ, "AXIOMME_EMBEDDER": "hash", "PYTHONPATH": str(REPO)}
    bench = str(REPO / "bench" / "ask_confidence.py")
    done = subprocess.run(
        [sys.executable, bench, "--queries", "25", "--distractors", "120", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    assert report["queries"] == 25 and report["distractors"] == 120
    assert report["mean_with"] > report["mean_without"], report
    assert report["share_higher_with"] > 0.5, report


def test_formula_inputs() -> None:
    """The documented formula on hand-made hits: threshold, squashing, the citation share."""
    hits = [
        {"handle": "i:a", "dense_score": 0.6, "bm25_score": 0.5},  # dense passes: 0.6
        {"handle": "i:b", "dense_score": 0.1, "bm25_score": 10.0},  # keyword passes: 10 / (10 + 10) = 0.5
        {"handle": "i:c", "dense_score": 0.2, "bm25_score": 0.9},  # neither passes: 0
    ]
    value, inputs = local_confidence(hits, ["i:a", "i:b", "i:c"], min_score=0.3, min_bm25=1.0)
    assert value == 0.6 and inputs["top_strength"] == 0.6 and inputs["cited_share"] == 1.0
    uncited, _ = local_confidence(hits, [], min_score=0.3, min_bm25=1.0)
    assert uncited == 0.3
    one_of_two, _ = local_confidence(hits[1:], ["i:b"], min_score=0.3, min_bm25=1.0)
    assert one_of_two == 0.375  # 0.5 * (0.5 + 0.5 * 1/2)
    assert local_confidence([], ["i:a"], min_score=0.3, min_bm25=1.0)[0] == 0.0
