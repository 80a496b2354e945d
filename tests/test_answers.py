from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.errors import ConfigError
from services.models.answers import NO_INDEX_REPLY, answer_from_index, offline_answer
from services.retrieval.relevance import (
    DEFAULT_MIN_BM25,
    DEFAULT_MIN_KEYWORD,
    DEFAULT_MIN_SCORE,
    Relevance,
    relevance_for,
)

HITS = [
    {
        "rank": 1,
        "handle": "docs:aaa",
        "source_path": "a.md",
        "section": "Intro",
        "page": None,
        "text": "alpha " * 200,
        "bm25_score": 3.2,
        "dense_score": 0.1,
    },
    {
        "rank": 2,
        "handle": "docs:bbb",
        "source_path": "b.pdf",
        "section": None,
        "page": 3,
        "text": "beta text",
        "bm25_score": None,
        "dense_score": 0.52,
    },
    {"rank": 3, "handle": "docs:ccc", "source_path": "c.md", "text": "noise", "bm25_score": 0.2, "dense_score": 0.05},
]


def test_offline_answer_quotes_passages_under_their_handles() -> None:
    answer = offline_answer("what?", "docs", HITS)
    assert answer.provider == "offline" and answer.provenance == "local"
    assert answer.citations == ["docs:aaa", "docs:bbb"]
    assert "[1] docs:aaa  (a.md § Intro)" in answer.text and "[2] docs:bbb  (b.pdf, p. 3)" in answer.text
    assert answer.text.startswith("offline (no model)")
    assert max(len(line) for line in answer.text.splitlines()) < 520  # long passages are cut
    assert offline_answer("what?", "docs", HITS) == answer  # deterministic


def test_offline_answer_without_index_or_hits() -> None:
    assert offline_answer("q", None, []).text == NO_INDEX_REPLY
    assert "nothing in index docs matches" in offline_answer("q", "docs", []).text


def test_only_relevant_passages_are_quoted_and_none_is_said_plainly() -> None:
    answer = offline_answer("what?", "docs", HITS)
    assert answer.citations == ["docs:aaa", "docs:bbb"] and "docs:ccc" not in answer.text
    assert "the 2 relevant passages in index docs" in answer.text
    nothing = offline_answer("what?", "docs", HITS[2:])
    assert nothing.citations == []
    assert "no passage in index docs is relevant enough" in nothing.text and "1 retrieved" in nothing.text
    strict = Relevance(min_score=0.9, min_bm25=100)
    assert offline_answer("what?", "docs", HITS, relevance=strict).citations == []


def test_threshold_settings_env_then_workspace_then_default(aries_home: Path) -> None:
    from services.workspace.manager import WorkspaceManager

    workspace, _ = WorkspaceManager().create("demo")
    assert relevance_for(workspace, {}) == Relevance(DEFAULT_MIN_SCORE, DEFAULT_MIN_KEYWORD, DEFAULT_MIN_BM25)
    workspace.update(retrieval={"min_score": 0.5, "min_keyword": 0.7, "min_bm25": 2})
    assert relevance_for(workspace, {}) == Relevance(0.5, 0.7, 2.0)
    assert relevance_for(workspace, {"AXIOMME_MIN_SCORE": "0.25"}) == Relevance(0.25, 0.7, 2.0)
    with pytest.raises(ConfigError, match="AXIOMME_MIN_SCORE='high': must be a number"):
        relevance_for(workspace, {"AXIOMME_MIN_SCORE": "high"})
    with pytest.raises(ConfigError, match="AXIOMME_MIN_SCORE='7'"):
        relevance_for(None, {"AXIOMME_MIN_SCORE": "7"})


DOCS = {
    "cats.md": "# Cats\n\nCats are small domesticated carnivores. A cat sleeps for most of the day and hunts mice "
    "at night. Kittens are born blind and open their eyes after about a week. The domestic cat purrs.\n",
    "volcano.md": "# Volcanoes\n\nA volcano is a rupture in the crust of a planet where lava, ash and gases escape "
    "from a magma chamber. Stratovolcanoes such as Mount Fuji are built from layers of hardened lava.\n",
    "bread.md": "# Baking bread\n\nBread is made from flour, water, salt and yeast. The dough is kneaded to develop "
    "gluten, left to rise, shaped and baked in a hot oven. Sourdough uses a wild yeast starter.\n",
    "chess.md": "# Chess openings\n\nThe Sicilian Defence is a popular chess opening in which Black answers 1.e4 "
    "with 1...c5. The Queen's Gambit begins 1.d4 d5 2.c4. Openings aim to control the centre.\n",
}


@pytest.fixture
def indexed(tmp_path: Path, aries_home: Path) -> Iterator[object]:
    from services.retrieval import RetrievalEngine
    from services.retrieval.settings import RetrievalSettings
    from services.workspace.manager import WorkspaceManager

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    workspace, _ = WorkspaceManager().create("demo")
    engine = RetrievalEngine(workspace, RetrievalSettings.from_env({"AXIOMME_EMBEDDER": "hash"}))
    engine.index_add(str(docs), "docs")
    try:
        yield engine
    finally:
        engine.close()


def _threshold_of_last_row(engine: object) -> object:
    import json

    engine.audit.flush()  # type: ignore[attr-defined]  # committed off the query's path: now
    path = engine.workspace.root / "audit.db"  # type: ignore[attr-defined]
    with sqlite3.connect(path) as db:
        params = db.execute("SELECT params FROM retrievals ORDER BY id DESC LIMIT 1").fetchone()[0]
    return json.loads(params).get("threshold")


def test_a_relevant_query_lists_the_relevant_passages(indexed: object) -> None:
    result, answer = answer_from_index(indexed, "how do I bake sourdough bread", k=5)  # type: ignore[arg-type]
    assert result is not None and len(result.hits) == 4  # the Context pane still gets every hit
    assert [handle.split(":")[0] for handle in answer.citations] == ["docs"]
    assert len(answer.citations) == 1 and "bread.md" in answer.text and "volcano.md" not in answer.text
    threshold = _threshold_of_last_row(indexed)
    assert threshold == {
        "min_score": DEFAULT_MIN_SCORE,
        "min_keyword": DEFAULT_MIN_KEYWORD,
        "min_bm25": DEFAULT_MIN_BM25,
        "kept": answer.citations,
    }


def test_an_unrelated_query_lists_none_and_the_audit_row_has_the_threshold(indexed: object) -> None:
    for question in ("quantum chromodynamics gluon confinement", "tax return deadline for freelancers"):
        result, answer = answer_from_index(indexed, question, k=5)  # type: ignore[arg-type]
        assert result is not None and len(result.hits) == 4  # five passages used to be quoted regardless
        assert answer.citations == [], question
        assert "is relevant enough" in answer.text
        assert _threshold_of_last_row(indexed) == {
            "min_score": DEFAULT_MIN_SCORE,
            "min_keyword": DEFAULT_MIN_KEYWORD,
            "min_bm25": DEFAULT_MIN_BM25,
            "kept": [],
        }
    last = indexed.last()  # type: ignore[attr-defined]
    assert last.params["threshold"]["min_score"] == DEFAULT_MIN_SCORE
