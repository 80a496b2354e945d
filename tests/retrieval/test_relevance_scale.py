"""Relevance holds whatever the corpus size: one document, or a hundred thousand (issue 24, last defect).

With the hash embedder the keyword side decides (a bag-of-words hash is no measure of meaning).
An absolute BM25 score grows with the corpus (its IDF is ``ln(N / n)``-like), so a one-document
index answered "nothing matches" to an exact question.  The keyword relevance is now the share
of the question's keyword weight that a passage holds (:mod:`services.retrieval.relevance`).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from services.models.answers import answer_from_index
from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.relevance import Relevance, keyword_share, term_weight
from services.workspace.manager import Workspace

NOTE = "The lighthouse keeper logged every storm that passed the northern cape during the winter of 1893.\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws", "w")
    ws.ensure_layout()
    return ws


def _answer(engine: RetrievalEngine, question: str) -> list[str]:
    _, answer = answer_from_index(engine, question)
    return answer.citations


def test_a_one_document_index_answers_an_exact_question(workspace: Workspace, tmp_path: Path) -> None:
    """Failed before: BM25 0.69 for "lighthouse keeper" in a one-document index, under the fixed 1.0."""
    note = tmp_path / "note.txt"
    note.write_text(NOTE, encoding="utf-8")
    with RetrievalEngine(workspace, RetrievalSettings(embedder="hash")) as engine:
        engine.index_add(note, name="one")
        assert _answer(engine, "lighthouse keeper") != []
        assert _answer(engine, "what did the keeper log") != []
        assert _answer(engine, "Who logged every storm that passed the northern cape?") != []
        assert _answer(engine, "aspirin dosage for children") == []
        assert _answer(engine, "what is the weather in Paris") == []
        hit = engine.query("lighthouse keeper", k=1).hits[0]
        assert hit.keyword_score == pytest.approx(1.0)


def _filler(root: Path, count: int) -> None:
    rng = random.Random(5)
    common = [f"word{n}" for n in range(300)] + ["storm", "winter", "the", "of", "during", "what", "weather"]
    root.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        words = " ".join(rng.choice(common) for _ in range(rng.randint(40, 120)))
        (root / f"filler{number:05d}.txt").write_text(words + ".\n", encoding="utf-8")


def test_the_same_passage_scores_alike_in_a_large_corpus(workspace: Workspace, tmp_path: Path) -> None:
    """The exact question stays relevant among 3,000 documents, and a match on words that are in
    every other document ("storm", "winter") is not relevant there, though it was alone."""
    docs = tmp_path / "docs"
    _filler(docs, 3000)
    (docs / "note.txt").write_text(NOTE, encoding="utf-8")
    with RetrievalEngine(workspace, RetrievalSettings(embedder="hash")) as engine:
        engine.index_add(docs, name="many")
        exact = engine.query("lighthouse keeper", k=3).hits[0]
        assert exact.source_path == "note.txt" and exact.keyword_score == pytest.approx(1.0)
        assert _answer(engine, "lighthouse keeper") == [exact.handle]
        common = engine.query("storm winter lighthouse harbour", k=5).hits
        note = next(hit for hit in common if hit.source_path == "note.txt")
        others = [hit for hit in common if hit.source_path != "note.txt"]
        assert note.keyword_score is not None and note.keyword_score >= Relevance().min_keyword
        assert others and all((hit.keyword_score or 0.0) < Relevance().min_keyword for hit in others)


def test_term_weights_are_flat_in_a_tiny_corpus_and_idf_like_in_a_large_one() -> None:
    # one document: whether a term is in it says nothing about how distinctive it is
    assert term_weight(1, 1) / term_weight(1, 0) > 0.9
    # 100,000 documents: a term in half of them weighs little beside one in ten of them
    assert term_weight(100_000, 50_000) / term_weight(100_000, 10) < 0.2
    weights = {
        "aspirin": term_weight(100_000, 40),
        "stroke": term_weight(100_000, 300),
        "risk": term_weight(100_000, 20_000),
    }
    assert keyword_share(weights, {"risk", "lower"}) < 0.2  # only the common word matched
    assert keyword_share(weights, {"aspirin", "stroke"}) > 0.8
    assert keyword_share({}, {"x"}) == 0.0
