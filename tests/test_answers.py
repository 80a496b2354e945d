from services.answers import NO_INDEX_REPLY, offline_answer

HITS = [
    {"rank": 1, "handle": "docs:aaa", "source_path": "a.md", "section": "Intro", "page": None, "text": "alpha " * 200},
    {"rank": 2, "handle": "docs:bbb", "source_path": "b.pdf", "section": None, "page": 3, "text": "beta text"},
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
