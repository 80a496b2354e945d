"""Relevance before the cut (issue 32, item 5): a full keyword match never loses to noise.

With the hash embedder, "what is kestrelwing" against ~150 notes that say "what" often and one
document that names kestrelwing: BM25 ranks that document first (a full keyword match), the
bag-of-words vector puts it past rank 100, and fusion puts it past the first ``k``.  The passages used to be cut
at ``k`` before the relevance filter, so the ``k`` ahead of it — none of them relevant — were all
the answer had, and the offline turn said "nothing in index docs matches".  The engine now ranks
the relevant passages first before it cuts (:mod:`services.retrieval.cut`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from services.assistant import TurnLoop
from services.models.answers import answer_from_index
from services.models.offline import OfflineProvider
from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.relevance import Relevance
from services.session.session import Session
from services.workspace.manager import Workspace

QUESTION = "what is kestrelwing"
WORDS = (
    "the team runs a weekly check on every service and writes down what changed "
    "so that anyone on call knows what to restart first"
).split()
TOPICS = ("backup", "deploy", "billing", "login", "cache", "printer", "vpn", "badge", "parking", "invoice")
PLAN = (
    "The migration plan covers storage, networking, staff rotas, budgets, vendor contracts and the "
    "timeline for each region, with owners named for every step and reviews every quarter."
)


def kestrelwing_corpus(root: Path, noise: int = 150) -> Path:
    """``noise`` notes made of common words (``what`` among them) and ``projects.txt``, the one
    document that names kestrelwing, inside a paragraph about something else."""
    rng = random.Random(32)
    root.mkdir(parents=True)
    for number in range(noise):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 90)))
        (root / f"faq{number:03d}.txt").write_text(f"Notes on the {rng.choice(TOPICS)} rota. {words}\n", "utf-8")
    text = f"Project notes. {PLAN} Kestrelwing is the internal name of the new telemetry pipeline. {PLAN}\n"
    (root / "projects.txt").write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def indexed(workspace: Workspace, tmp_path: Path) -> Workspace:
    with RetrievalEngine(workspace, RetrievalSettings(embedder="hash")) as engine:
        engine.index_add(kestrelwing_corpus(tmp_path / "docs"), name="docs")
    return workspace


def test_the_corpus_is_the_one_of_the_issue(indexed: Workspace) -> None:
    """The shape of the defect holds: BM25 rank 1, dense rank past 100, fused well past k = 8,
    and every passage fused ahead of it is irrelevant (so a cut before the filter loses it)."""
    with RetrievalEngine(indexed, RetrievalSettings(embedder="hash")) as engine:
        store = engine.indexes.store("docs")
        with store.reading():
            fused, _ = engine.hits(store, "docs", QUESTION, None, 200, 200, None)
    position = next(n for n, hit in enumerate(fused) if hit.source_path == "projects.txt")
    found = fused[position]
    assert found.bm25_rank == 1 and found.keyword_score == pytest.approx(1.0)
    assert found.dense_rank is not None and found.dense_rank > 100
    assert position >= 8
    assert not any(Relevance().admits(hit.to_dict()) for hit in fused[:position])


def test_a_full_keyword_match_is_among_the_k_hits(indexed: Workspace) -> None:
    """Failed before: the 8 hits were the 8 noise notes fused ahead of it."""
    with RetrievalEngine(indexed, RetrievalSettings(embedder="hash")) as engine:
        result = engine.query(QUESTION, k=8)
        assert len(result.hits) == 8
        assert result.hits[0].source_path == "projects.txt"  # the relevant passages come first
        assert [hit.rank for hit in result.hits] == list(range(1, 9))
        # the rest of the k are still the closest passages, in fused order (the Context pane shows them)
        rest = result.hits[1:]
        assert [hit.score for hit in rest] == sorted((hit.score for hit in rest), reverse=True)
        again = engine.query(QUESTION, k=8)
        assert [hit.handle for hit in again.hits] == [hit.handle for hit in result.hits]  # deterministic


def test_the_offline_answer_quotes_it(indexed: Workspace) -> None:
    """``answer_from_index`` (``rag ask``, ``aries ask`` offline): failed before with "no passage … is
    relevant enough" (8 retrieved, none relevant)."""
    with RetrievalEngine(indexed, RetrievalSettings(embedder="hash")) as engine:
        result, answer = answer_from_index(engine, QUESTION, k=8)
    assert result is not None
    assert len(answer.citations) == 1
    assert "Kestrelwing is the internal name" in answer.text


def test_the_offline_turn_answers_from_it(indexed: Workspace) -> None:
    """The path the TUI takes: a turn of the offline provider (retrieve, filter, answer).  Failed
    before with "nothing in index docs matches this question"."""
    session = Session(indexed, interactive=False)
    try:
        session.engine().index_use("docs")
        outcome = asyncio.run(TurnLoop(session, OfflineProvider(), k=8).run(QUESTION))
    finally:
        session.close()
    assert outcome.error is None
    assert "nothing in index" not in outcome.text
    assert "Kestrelwing is the internal name" in outcome.text
    assert len(outcome.citations) == 1 and outcome.citations[0].startswith("docs:")


def test_without_a_relevant_passage_the_order_is_the_fused_one(indexed: Workspace) -> None:
    """A question nothing answers: the k closest passages, in fused order, as before."""
    with RetrievalEngine(indexed, RetrievalSettings(embedder="hash")) as engine:
        result = engine.query("what is zebrafish", k=5)
        store = engine.indexes.store("docs")
        with store.reading():
            plain, _ = engine.hits(store, "docs", "what is zebrafish", None, 200, 5, None)
    if any(Relevance().admits(hit.to_dict()) for hit in plain):
        pytest.fail("the control question must have no relevant passage in the first k for this test to mean anything")
    assert [hit.handle for hit in result.hits] == [hit.handle for hit in plain]


@pytest.mark.parametrize("question", [QUESTION, "kestrelwing telemetry", "weekly service check", "what is zebrafish"])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_the_relevant_hits_are_the_first_k_relevant_in_fused_order(indexed: Workspace, question: str, k: int) -> None:
    """Among the relevant passages nothing is reordered: the ones returned are the first ``k``
    relevant of the whole fused list; the others fill the rest of ``k`` in fused order."""
    relevance = Relevance()
    with RetrievalEngine(indexed, RetrievalSettings(embedder="hash")) as engine:
        returned = engine.query(question, k=k, relevance=relevance).hits
        store = engine.indexes.store("docs")
        with store.reading():
            everything, _ = engine.hits(store, "docs", question, None, 200, 1000, None)
    relevant = [hit.handle for hit in everything if relevance.admits(hit.to_dict())]
    others = [hit.handle for hit in everything if not relevance.admits(hit.to_dict())]
    expected = (relevant[:k] + others)[:k]
    assert [hit.handle for hit in returned] == expected
    assert [hit.rank for hit in returned] == list(range(1, len(expected) + 1))


@pytest.mark.parametrize("question", [QUESTION, "kestrelwing telemetry pipeline", "weekly service check", "on call"])
def test_the_keyword_screen_never_says_no_to_a_relevant_passage(indexed: Workspace, question: str) -> None:
    """The screen's postings give the same keyword share as the passage's analysed text (terms held
    by more chunks than the limit are assumed held: an upper bound), so it never skips a passage
    the threshold would keep."""
    from services.retrieval.cut import keyword_screen, live_reader
    from services.retrieval.fusion import fuse
    from services.retrieval.store_lexical import term_holders

    relevance = Relevance()
    with RetrievalEngine(indexed, RetrievalSettings(embedder="hash")) as engine:
        store = engine.indexes.store("docs")
        with store.reading():
            weights = store.keyword_weights(question)
            hits = live_reader(store, "docs", weights)(fuse(store.bm25(question, 500), []))
            exact = term_holders(store.lexical, weights, 10_000)
            capped = term_holders(store.lexical, weights, 10)
            screen = keyword_screen(store, weights, relevance.min_keyword)
    assert hits and weights
    total = sum(weights.values())
    for hit in hits:
        held = sum(weight for term, weight in weights.items() if hit.chunk_id in (exact[term] or ()))
        assert round(held / total, 4) == hit.keyword_score
        if (hit.keyword_score or 0.0) >= relevance.min_keyword:
            assert screen(hit.chunk_id)
    assert any(found is None for found in capped.values()) == any(len(found or ()) > 10 for found in exact.values())
    if question == QUESTION:  # the noise BM25 found through "what" holds none of the keyword weight
        assert sum(not screen(hit.chunk_id) for hit in hits) == len(hits) - 1


def test_the_walk_reads_only_what_may_be_relevant(indexed: Workspace) -> None:
    """Past the first ``k`` others, the cut reads only candidates the screen lets through: for the
    kestrelwing question, the first windows and the one document (not the ~150 notes BM25 found
    through "what"), and the answer is the same as reading them all."""
    from services.retrieval.cut import cut, keyword_screen, live_reader
    from services.retrieval.fusion import Fused, fuse
    from services.retrieval.models import Hit

    relevance = Relevance()
    with RetrievalEngine(indexed, RetrievalSettings(embedder="hash")) as engine:
        store = engine.indexes.store("docs")
        with store.reading():
            weights = store.keyword_weights(QUESTION)
            fused = fuse(store.bm25(QUESTION, 200), store.dense(engine.embedder.embed_query(QUESTION), 200))
            reader = live_reader(store, "docs", weights)
            asked: list[int] = []

            def read(window: Sequence[Fused]) -> list[Hit]:
                asked.append(len(window))
                return reader(window)

            screened = cut(fused, 8, read, relevance, keyword_screen(store, weights, relevance.min_keyword))
            read_screened = sum(asked)
            asked.clear()
            unscreened = cut(fused, 8, read, relevance)
    assert [hit.handle for hit in screened] == [hit.handle for hit in unscreened]
    assert screened[0].source_path == "projects.txt"
    assert read_screened <= 2 * 8 + 1 < sum(asked)
