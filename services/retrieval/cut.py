"""The cut at ``k``: which of the fused candidates a query returns, relevance first.

Fusion orders the candidates by rank alone (:mod:`services.retrieval.fusion`), and the relevance
threshold (:mod:`services.retrieval.relevance`) is what the answer and the turn loop keep of them.
Cutting at ``k`` *before* that filter lost relevant passages to noise: with the hash embedder the
one document holding a rare question word is BM25 rank 1 but past dense rank 100, so RRF puts
noise that both retrievers half-like ahead of it, the first ``k`` are all irrelevant, and the
answer says nothing matches (issue 32, item 5).

So :func:`cut` walks the fused list and returns the relevant candidates first — the first ``k``
of them in fused order — and fills what is left of ``k`` with the best of the others, in fused
order (the Context pane still shows the closest passages when none is relevant).  Among the
relevant passages nothing changes: the ones a caller keeps are the same prefix of the fused
order, only no longer cut short by noise ranked above them.  Without a threshold the cut is the
plain fused prefix.

The walk reads candidates from the manifest in windows of ``2k`` (the keyword share needs a
passage's text).  Once ``k`` others are in hand, only a candidate that may be relevant is read:
one whose dense similarity passes, or one BM25 found whose keyword share may pass — an upper bound
taken from Tantivy's postings of the question's terms (:func:`keyword_screen`), so the noise BM25
found through one common word is not read and analysed (reading all ~200 BM25 candidates cost
20–50 ms a query).  A candidate with neither (no BM25 rank: none of the question's terms within
BM25's candidates) is never relevant.  The walk stops at ``k`` relevant passages or at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from services.retrieval.fusion import Fused
from services.retrieval.models import Hit
from services.retrieval.relevance import Relevance, keyword_share

if TYPE_CHECKING:
    from services.retrieval.store import IndexStore

ReadHits = Callable[[Sequence[Fused]], list[Hit]]
"""The live hits of a window of fused candidates, in its order (a chunk gone since is left out)."""
Screen = Callable[[str], bool]
"""Whether the chunk of an id may hold enough of the question's keyword weight (never a false no)."""
SCREEN_POSTINGS = 2000
"""A term held by more chunks than this is not looked up by :func:`keyword_screen` (a common term:
at 100,000 chunks it weighs less than half of one held by ten, :func:`~services.retrieval.relevance.term_weight`)."""


def live_reader(store: IndexStore, index: str, weights: Mapping[str, float]) -> ReadHits:
    """The :data:`ReadHits` of ``store`` (index ``index``, call it under :meth:`IndexStore.reading`):
    each live chunk of a window as a :class:`Hit` (rank 0 until :func:`cut` ranks it) with its
    keyword share of the question's term ``weights`` (:meth:`IndexStore.keyword_weights`)."""

    def read(window: Sequence[Fused]) -> list[Hit]:
        live = store.manifest.get_chunks([item.chunk_id for item in window])
        hits: list[Hit] = []
        for item in window:
            stored = live.get(item.chunk_id)
            if stored is None:
                continue
            chunk = stored.chunk
            hits.append(
                Hit(
                    rank=0,
                    handle=f"{index}:{chunk.chunk_id}",
                    chunk_id=chunk.chunk_id,
                    index=index,
                    source_path=chunk.source_path,
                    page=chunk.page,
                    section=chunk.section,
                    score=item.score,
                    bm25_rank=item.bm25_rank,
                    bm25_score=item.bm25_score,
                    dense_rank=item.dense_rank,
                    dense_score=item.dense_score,
                    text=chunk.text,
                    keyword_score=round(keyword_share(weights, store.terms(f"{chunk.context}\n{chunk.text}")), 4),
                )
            )
        return hits

    return read


def keyword_screen(store: IndexStore, weights: Mapping[str, float], min_keyword: float) -> Screen:
    """Whether a chunk may hold ``min_keyword`` of the question's keyword ``weights`` — an upper
    bound read from Tantivy's postings (:func:`~services.retrieval.store_lexical.term_holders`),
    not from the chunk's text: a term held by more than :data:`SCREEN_POSTINGS` chunks is assumed
    held (looking it up would cost more than reading the text)."""
    from services.retrieval.store_lexical import term_holders

    total = sum(weights.values())
    holders = term_holders(store.lexical, weights, SCREEN_POSTINGS)

    def screen(chunk_id: str) -> bool:
        if total <= 0:  # no keyword in the question: every share is 0
            return min_keyword <= 0
        held = sum(w for term, w in weights.items() if (found := holders[term]) is None or chunk_id in found)
        return held / total >= min_keyword - 5e-5  # the share is compared after rounding (4 places)

    return screen


def may_be_relevant(item: Fused, relevance: Relevance, screen: Screen | None = None) -> bool:
    """Whether a candidate can pass ``relevance`` without reading its text: its dense similarity
    passes on its own, or BM25 found it (it holds a question term) and ``screen`` (if any) says
    its keyword share may be high enough."""
    if item.dense_score is not None and item.dense_score >= relevance.min_score:
        return True
    return item.bm25_rank is not None and (screen is None or screen(item.chunk_id))


def admits(hit: Hit, relevance: Relevance) -> bool:
    """:meth:`Relevance.admits` of a hit, without building its whole dict."""
    return relevance.admits(
        {"dense_score": hit.dense_score, "keyword_score": hit.keyword_score, "bm25_score": hit.bm25_score}
    )


def cut(
    fused: Sequence[Fused],
    k: int,
    read: ReadHits,
    relevance: Relevance | None = None,
    screen: Screen | None = None,
) -> list[Hit]:
    """The ``k`` hits of ``fused`` to return, ranked 1…k: with ``relevance``, the relevant ones
    first (see the module docstring; ``screen``: :func:`keyword_screen`); without it, the first
    ``k`` live ones."""
    kept: list[Hit] = []
    others: list[Hit] = []
    position = 0
    while position < len(fused) and len(kept) < k:
        if relevance is None and len(others) >= k:
            break
        window = fused[position : position + 2 * k]
        position += len(window)
        if relevance is not None and len(others) >= k:
            window = [item for item in window if may_be_relevant(item, relevance, screen)]
        for hit in read(window):
            if relevance is not None and admits(hit, relevance):
                kept.append(hit)
            else:
                others.append(hit)
    chosen = (kept + others)[:k]
    return [hit if hit.rank == rank else replace(hit, rank=rank) for rank, hit in enumerate(chosen, start=1)]
