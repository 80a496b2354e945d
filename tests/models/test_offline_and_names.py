"""The offline provider and the tool-name map."""

from __future__ import annotations

import random
import string

import pytest

from services.models import ChatMessage, Done, ModelProvider, ModelRequest, TextDelta, ToolNameMap, Usage
from services.models.answers import NO_INDEX_REPLY, offline_answer
from services.models.offline import OfflineProvider
from services.models.toolnames import VALID_NAME
from tests.models.helpers import collect, text_of

HITS = [
    {
        "rank": 1,
        "handle": "docs:3f2a01",
        "text": "Tantivy is a full-text search engine.",
        "source_path": "a.md",
        "dense_score": 0.71,
        "bm25_score": 4.2,
    },
    {
        "rank": 2,
        "handle": "docs:77b0c2",
        "text": "Chroma stores vectors.",
        "source_path": "b.pdf",
        "page": 3,
        "dense_score": 0.52,
        "bm25_score": 2.5,
    },
]


async def test_offline_streams_the_extractive_answer_in_a_few_deltas() -> None:
    provider = OfflineProvider()
    assert isinstance(provider, ModelProvider)
    request = ModelRequest(
        messages=[ChatMessage("system", "s"), ChatMessage("user", "what is tantivy?")], retrieved=HITS, index="docs"
    )
    events = await collect(provider, request)
    expected = offline_answer("what is tantivy?", "docs", HITS)
    assert text_of(events) == expected.text
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 3  # the heading and one paragraph per passage
    assert events[-2:] == [Usage(0, 0, 0), Done("stop")]
    assert events == await collect(provider, request)  # deterministic
    assert provider.answer(request).citations == ["docs:3f2a01", "docs:77b0c2"]
    assert await provider.list_models() == ["offline"]
    await provider.aclose()


async def test_offline_without_an_index_says_so() -> None:
    events = await collect(OfflineProvider(), ModelRequest(messages=[ChatMessage("user", "hi")]))
    assert text_of(events) == NO_INDEX_REPLY


TOOL_IDS = [
    "builtin:fs:read_text",
    "builtin:fs:write_text",
    "builtin:shell:run",
    "builtin:web:fetch",
    "mcp:github:create_issue",
]


def test_names_round_trip_and_read_well() -> None:
    names = ToolNameMap(TOOL_IDS)
    assert names.provider_name("builtin:fs:read_text") == "builtin__fs__read_text"
    for tool_id in TOOL_IDS:
        assert names.tool_id(names.provider_name(tool_id)) == tool_id
    assert names.tool_id("builtin:fs:read_text") == "builtin:fs:read_text"  # the id itself is understood
    assert names.tool_id("builtin__fs__delete") is None
    assert names.tool_id("builtin:fs:delete") is None
    assert names.tool_id("") is None
    assert len(names) == 5 and "builtin:web:fetch" in names


def test_long_and_colliding_ids_get_a_hash_suffix() -> None:
    long_id = "mcp:" + "very_long_server_name:" * 5 + "tool"
    ids = ["a:b", "a__b", "a.b", "a_b", long_id, "ünïcode:tøøl", ""]
    names = ToolNameMap(ids)
    got = dict(names.items())
    assert len(set(got.values())) == len(ids)
    assert all(VALID_NAME.match(name) for name in got.values())
    assert got["a:b"] != "a__b" and got["a__b"].startswith("a__b_") and got["a:b"].startswith("a__b_")
    assert got["a.b"].startswith("a_b_") and got["a_b"].startswith("a_b_")
    assert len(got[long_id]) == 64 and got[long_id].startswith("mcp__very_long_server_name")
    assert got[""].startswith("tool_")
    for tool_id in ids:
        assert names.tool_id(got[tool_id]) == tool_id


def test_the_map_depends_only_on_the_set_of_ids() -> None:
    ids = TOOL_IDS + ["x:y", "x__y"]
    shuffled = list(ids)
    random.Random(3).shuffle(shuffled)
    assert dict(ToolNameMap(ids).items()) == dict(ToolNameMap(shuffled).items())
    assert ToolNameMap(ids).provider_name("builtin:fs:read_text") == "builtin__fs__read_text"


@pytest.mark.parametrize("seed", range(20))
def test_any_ids_give_valid_unique_reversible_names(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + ":_-./ é\u202e"
    ids = {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 90))) for _ in range(rng.randint(1, 60))}
    names = ToolNameMap(ids)
    got = dict(names.items())
    assert set(got) == ids
    assert len(set(got.values())) == len(ids)
    assert all(VALID_NAME.match(name) for name in got.values()), got
    assert all(names.tool_id(name) == tool_id for tool_id, name in got.items())
