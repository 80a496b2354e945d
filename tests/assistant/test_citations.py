"""The citation checker: Markdown-aware sentences, handles (given, shortened, invented), uncited
facts, verdicts with their supporting span, the vectors path, JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from services.assistant.citations import (
    Thresholds,
    check_answer,
    find_citations,
    overlap_score,
    prose_blocks,
    split_sentences,
    states_a_fact,
)
from services.retrieval.embedders import HashEmbedder

H1 = "docs:0123456789abcdef"
H2 = "notes:fedcba9876543210"
CHUNK1 = (
    "The trial enrolled 400 adults. Daily aspirin lowered the risk of a first stroke by a third in adults "
    "over sixty. Bleeding was more common."
)
CHUNK2 = "Zinc lozenges shorten the common cold in children by about a day."
CHUNKS = {H1: CHUNK1, H2: CHUNK2}


def texts(answer: str) -> list[str]:
    return [sentence.text for sentence in check_answer(answer, CHUNKS).sentences]


def test_paragraph_sentences_and_abbreviations() -> None:
    spans = split_sentences("Dr. Smith et al. reported 3.5 mg, e.g. in Fig. 2. It rose. Then it fell!")
    text = "Dr. Smith et al. reported 3.5 mg, e.g. in Fig. 2. It rose. Then it fell!"
    assert [text[s.start : s.end] for s in spans] == [
        "Dr. Smith et al. reported 3.5 mg, e.g. in Fig. 2.",
        "It rose.",
        "Then it fell!",
    ]


def test_code_blocks_tables_headings_are_not_prose_and_list_items_are_sentences() -> None:
    answer = (
        "# Findings\n\n"
        "Aspirin helps. It is cheap.\n\n"
        "- first item without a stop\n"
        "- second item\n  continues here\n"
        "1. numbered item\n\n"
        "```python\nprint('Not prose. At all.')\n```\n\n"
        "    indented code line\n\n"
        "| drug | effect |\n|---|---|\n| aspirin | stroke |\n\n"
        "> quoted sentence.\n"
        "~~~\nfenced too\n~~~\n"
        "Last one."
    )
    assert texts(answer) == [
        "Aspirin helps.",
        "It is cheap.",
        "first item without a stop",
        "second item continues here",
        "numbered item",
        "quoted sentence.",
        "Last one.",
    ]


def test_offsets_point_into_the_answer() -> None:
    answer = "Intro.\n\n- Aspirin lowers stroke risk [docs:0123456789abcdef]\n"
    sentence = check_answer(answer, CHUNKS).sentences[1]
    assert answer[sentence.start : sentence.end] == f"Aspirin lowers stroke risk [{H1}]"
    blocks = prose_blocks(answer)
    assert [answer[b[0].start : b[-1].end] for b in blocks] == ["Intro.", f"Aspirin lowers stroke risk [{H1}]"]


def test_handles_given_shortened_invented_and_linked() -> None:
    answer = (
        f"A [{H1}]. B ({H2}). C [docs:0123456789]. D [docs:aaaa111122223333]. "
        f"E [{H1}](<aries-chunk:{H1}>). F [docs:9999]."
    )
    found = find_citations(answer, [H1, H2])
    assert [(c.handle, c.given) for c in found] == [
        (H1, True),
        (H2, True),
        (H1, True),  # a unique prefix of a given handle, in brackets
        ("docs:aaaa111122223333", False),
        (H1, True),  # the link target is not a second citation
        ("docs:9999", False),
    ]
    assert found[2].written == "docs:0123456789"


def test_a_citation_after_the_full_stop_belongs_to_the_sentence_before() -> None:
    report = check_answer(f"Daily aspirin lowered the risk of a first stroke. [{H1}] Then more.", CHUNKS)
    assert [(s.text, s.verdict) for s in report.sentences] == [
        ("Daily aspirin lowered the risk of a first stroke.", "supported"),
        ("Then more.", "plain"),
    ]


def test_verdicts_and_the_supporting_span() -> None:
    report = check_answer(
        f"Aspirin daily lowers the risk of a first stroke in adults over sixty [{H1}]. "
        f"Aspirin shortens colds [{H1}]. "
        f"Zinc lozenges shorten colds in children [{H2}].",
        CHUNKS,
    )
    first, second, third = report.sentences
    assert first.verdict == "supported"
    start, end = first.checks[0].span or (0, 0)
    assert CHUNK1[start:end] == "Daily aspirin lowered the risk of a first stroke by a third in adults over sixty."
    assert second.verdict in {"weak", "unsupported"}
    assert third.verdict == "supported"
    score, span = overlap_score("Magnetic fields bend light", CHUNK2)
    assert (score, span) == (0.0, None)
    assert report.counts == {"supported": 2, second.verdict: 1}


def test_a_sentence_takes_the_best_verdict_of_its_handles() -> None:
    report = check_answer(f"Zinc lozenges shorten colds in children [{H1}, {H2}].", CHUNKS)
    (sentence,) = report.sentences
    assert [c.verdict for c in sentence.checks] == ["unsupported", "supported"]
    assert sentence.verdict == "supported"
    mixed = check_answer(f"Zinc lozenges shorten colds in children [{H2}; docs:1111222233334444].", CHUNKS)
    assert mixed.sentences[0].verdict == "supported"
    assert mixed.invented == ("docs:1111222233334444",)  # still reported for the answer


def test_uncited_facts_and_plain_sentences() -> None:
    assert states_a_fact("The dose was 75 mg.")
    assert states_a_fact("It was approved by the FDA.")
    assert states_a_fact("Trials in Boston agree.")
    assert states_a_fact("It was published on March 3.")
    assert not states_a_fact("Aspirin is widely used.")
    assert not states_a_fact("I think so.")
    report = check_answer("Aspirin is widely used. The dose was 75 mg. Trials in Boston agree.", CHUNKS)
    assert [s.verdict for s in report.sentences] == ["plain", "uncited", "uncited"]
    # with no passages given in the turn there was nothing to cite
    assert [s.verdict for s in check_answer("The dose was 75 mg.", {}).sentences] == ["plain"]


def test_a_handle_not_given_is_invented_even_if_the_index_exists() -> None:
    report = check_answer("The trial enrolled 400 adults [docs:1111222233334444].", CHUNKS)
    (sentence,) = report.sentences
    assert sentence.verdict == "invented"
    assert sentence.checks[0].verdict == "invented" and sentence.checks[0].overlap is None


def test_vectors_one_batched_encode_and_one_lookup() -> None:
    embedder = HashEmbedder()
    calls: list[list[str]] = []
    lookups: list[list[str]] = []

    def encode(batch: list[str]) -> Sequence[Sequence[float]]:
        calls.append(batch)
        return embedder.embed(batch)

    def vectors_of(handles: list[str]) -> dict[str, list[float]]:
        lookups.append(handles)
        return {h: embedder.embed([CHUNKS[h]])[0] for h in handles}

    answer = f"Aspirin lowers stroke risk [{H1}]. Zinc helps colds [{H2}]. No citation here."
    report = check_answer(answer, CHUNKS, encode=encode, vectors_of=vectors_of)
    assert calls == [["Aspirin lowers stroke risk.", "Zinc helps colds."]]
    assert lookups == [[H1, H2]]
    assert report.method == "overlap+vectors"
    assert all(s.checks[0].cosine is not None for s in report.sentences[:2])
    # the cosine can lift a verdict: any cosine counts as supported when the bar is 0
    lifted = check_answer(
        f"Bananas are yellow [{H1}].",
        CHUNKS,
        encode=encode,
        vectors_of=vectors_of,
        thresholds=Thresholds(cosine_supported_at=-1.0),
    )
    assert lifted.sentences[0].verdict == "supported"
    assert check_answer(f"Bananas are yellow [{H1}].", CHUNKS).sentences[0].verdict == "unsupported"


def test_as_json_is_plain_data_and_deterministic() -> None:
    answer = f"Aspirin lowers stroke risk [{H1}]. The dose was 75 mg. See [docs:1111222233334444]."
    first = json.dumps(check_answer(answer, CHUNKS).as_json(), sort_keys=True)
    second = json.dumps(check_answer(answer, dict(reversed(list(CHUNKS.items())))).as_json(), sort_keys=True)
    assert first == second
    data = json.loads(first)
    assert [s["verdict"] for s in data["sentences"]] == ["supported", "uncited", "invented"]
    assert "not proven true" in data["help"] and "negation" in data["help"]


def test_a_code_block_cites_nothing_and_huge_answers_stay_bounded() -> None:
    answer = f"```\nAspirin lowers stroke risk [{H1}].\n```\n" + "Word " * 20000 + f"[{H2}]"
    report = check_answer(answer, CHUNKS)
    assert [s.verdict for s in report.sentences] == ["unsupported"]
    assert report.sentences[0].checks[0].handle == H2


def test_the_checker_imports_no_heavy_module() -> None:
    """A fresh interpreter: the checker loads no model, index, HTTP or UI library."""
    import subprocess
    import sys

    heavy = ["numpy", "torch", "onnxruntime", "tantivy", "chromadb", "aiohttp", "textual", "pydantic"]
    code = f"import sys, services.assistant.citations\nprint([m for m in {heavy!r} if m in sys.modules])"
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, cwd=repo
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
