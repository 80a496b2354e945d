"""The index status vocabulary: one enum, its advice written once (``index list`` in the CLI and the
TUI, and the workspace doctor, say it through :meth:`IndexStatus.advice`)."""

from __future__ import annotations

import json

import pytest

from services.retrieval.models import IndexInfo, IndexStatus, repair_advice
from services.retrieval.store_vectors import DAMAGED, MISSING, OK, UNAVAILABLE


@pytest.mark.parametrize(
    ("health", "status"),
    [
        (OK, IndexStatus.OK),
        (MISSING, IndexStatus.VECTORS_MISSING),
        (DAMAGED, IndexStatus.VECTORS_DAMAGED),
        (UNAVAILABLE, IndexStatus.VECTORS_UNAVAILABLE),
    ],
)
def test_every_vector_health_has_its_status(health: str, status: IndexStatus) -> None:
    assert IndexStatus.of_vectors(health) is status


def test_the_advice_says_what_queries_do_and_the_way_out() -> None:
    assert IndexStatus.VECTORS_MISSING.advice("docs") == "keyword-only until repaired: aries rag index repair docs"
    assert IndexStatus.VECTORS_DAMAGED.advice("docs", command="/rag") == repair_advice("docs", command="/rag")
    assert repair_advice("docs", command="/rag") == "keyword-only until repaired: /rag index repair docs"
    unavailable = IndexStatus.VECTORS_UNAVAILABLE.advice("docs")
    assert unavailable is not None and "repair" not in unavailable  # a folder that cannot be written
    quiet = [IndexStatus.OK, IndexStatus.UNREADABLE, IndexStatus.UNCHECKED]
    assert [status.advice("docs") for status in quiet] == [None, None, None]
    assert {status for status in IndexStatus if status.keyword_only} == {
        IndexStatus.VECTORS_MISSING,
        IndexStatus.VECTORS_DAMAGED,
        IndexStatus.VECTORS_UNAVAILABLE,
    }


def test_the_status_reads_and_serialises_as_before() -> None:
    """The listings and the JSON keep the words they had (``vectors damaged``, not an enum's name)."""
    info = IndexInfo("docs", True, "sqlite", None, 0, 0, [], None, None, IndexStatus.VECTORS_DAMAGED, "why")
    assert f"{info.status:<16}|" == "vectors damaged |"
    assert json.loads(json.dumps(info.to_dict()))["status"] == "vectors damaged"
    assert info.status == "vectors damaged"
