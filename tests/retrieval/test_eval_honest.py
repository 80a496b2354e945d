"""``aries eval rag`` tells the truth: judged documents missing from the corpus are counted (and fail
the run above a documented share), the run records its dataset (path, SHA-256, counts) and its
timings, and identical runs give byte-identical metrics (issue 22, item 5)."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from app.cli import main
from services.retrieval.eval_run import evaluate_run
from services.retrieval.evaluation import MISSING_JUDGED_MAX, dataset_fingerprint
from services.retrieval.settings import RetrievalSettings

pytestmark = pytest.mark.timeout(300)


def _write(root: Path, corpus: dict[str, str], queries: dict[str, str], qrels: list[tuple[str, str]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in corpus.items()), encoding="utf-8"
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()), encoding="utf-8"
    )
    lines = "".join(f"{q}\t{d}\t1\n" for q, d in qrels)
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + lines, encoding="utf-8")
    return root


def _held_out(root: Path) -> Path:
    """Two documents; the one query is judged relevant to both of them and to one the corpus lacks."""
    return _write(
        root,
        {"d1": "aspirin lowers the risk of stroke in adults", "d2": "statins lower cholesterol in the blood"},
        {"q1": "aspirin stroke risk"},
        [("q1", "d1"), ("q1", "gone")],
    )


def test_judged_documents_missing_from_the_corpus_count_and_fail_the_run(tmp_path: Path) -> None:
    """Failed before: recall@10 1.0 with ``ok: true`` (the judgment on ``gone`` was dropped silently)."""
    result = evaluate_run(_held_out(tmp_path / "beir"), settings=RetrievalSettings(embedder="hash", backend="memory"))
    assert result["methods"]["bm25"]["recall@10"] == 0.5  # one of the two relevant documents can be found
    assert result["missing_judged"] == {"count": 1, "judgments": 2, "share": 0.5, "examples": ["q1\tgone"]}
    assert result["ok"] is False and MISSING_JUDGED_MAX < 0.5
    assert any("missing from the corpus" in reason for reason in result["problems"])


def test_the_run_records_its_dataset_counts_and_timings(tmp_path: Path) -> None:
    dataset = _held_out(tmp_path / "beir")
    result = evaluate_run(dataset, settings=RetrievalSettings(embedder="hash", backend="memory"))
    digest = hashlib.sha256()
    for name in ("corpus.jsonl", "queries.jsonl", "qrels.tsv"):
        digest.update((dataset / name).read_bytes())
    assert result["dataset"]["path"] == str(dataset.resolve())
    assert result["dataset"]["sha256"] == digest.hexdigest() == dataset_fingerprint(dataset)["sha256"]
    assert result["dataset"]["files"]["qrels.tsv"] == hashlib.sha256((dataset / "qrels.tsv").read_bytes()).hexdigest()
    assert (result["documents"], result["queries"]) == (2, 1)
    assert set(result["timings"]) == {"load_s", "index_s", "queries_s", "total_s"}


def _larger(root: Path) -> Path:
    rng = random.Random(9)
    words = [f"w{n}" for n in range(800)]
    corpus = {f"d{n}": " ".join(rng.choice(words) for _ in range(60)) for n in range(1500)}
    queries = {f"q{n}": " ".join(corpus[f"d{n * 7}"].split()[:6]) for n in range(60)}
    qrels = [(f"q{n}", f"d{n * 7}") for n in range(60)]
    return _write(root, corpus, queries, qrels)


def test_identical_runs_give_byte_identical_metrics(tmp_path: Path) -> None:
    """Each run builds its index afresh (its own cache folder); the metrics come out byte for byte the same."""
    dataset = _larger(tmp_path / "beir")
    settings = RetrievalSettings(embedder="hash")
    first = evaluate_run(dataset, settings=settings, cache_dir=tmp_path / "cache-a")
    second = evaluate_run(dataset, settings=settings, cache_dir=tmp_path / "cache-b")
    assert json.dumps(first["methods"], sort_keys=True) == json.dumps(second["methods"], sort_keys=True)


def test_the_cli_says_why_the_run_is_not_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _held_out(tmp_path / "beir")
    run_file = tmp_path / "run.json"
    assert main(["eval", "rag", "--dataset", str(dataset), "--json", "--run-file", str(run_file)]) == 1
    out, err = capsys.readouterr()
    printed = json.loads(out)
    assert printed["ok"] is False and printed["missing_judged"]["count"] == 1
    assert json.loads(run_file.read_text())["dataset"]["sha256"] == printed["dataset"]["sha256"]
    assert err.startswith("aries: ") and "1 of 2 judged documents are missing from the corpus" in err
    assert len(err.strip().splitlines()) == 1
