"""Chunking: deterministic boundaries, ids and hashes; every chunk fits the model window."""

from __future__ import annotations

import hashlib
import random

import pytest

from services.retrieval.chunking import (
    MODEL_WINDOW,
    CharBoundCounter,
    ChunkConfig,
    WordPieceCounter,
    chunk_document,
    chunk_id_for,
    default_counter,
)
from services.retrieval.loaders import load_bytes
from services.retrieval.models import Document, Segment

pytestmark = pytest.mark.timeout(60)


def _doc(text: str, title: str | None = None, section: str | None = None) -> Document:
    return Document(content_type="text/plain", segments=(Segment(text, 0, None, section),), title=title)


def _prose(sentences: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    words = "the cell protein binds receptor signal pathway tumour growth patients trial dose risk".split()
    out = []
    for i in range(sentences):
        out.append(" ".join(rng.choice(words) for _ in range(rng.randint(6, 30))).capitalize() + ".")
        if i % 7 == 6:
            out.append("\n\n")
    return " ".join(out)


def test_the_wordpiece_counter_is_the_models_tokenizer() -> None:
    counter = default_counter()
    assert isinstance(counter, WordPieceCounter)
    assert counter.count("Hello, world!") == 4
    assert counter.offsets("Hello world") == [(0, 5), (6, 11)]


def test_same_input_same_chunks() -> None:
    text = _prose(120)
    first = chunk_document(_doc(text, "T"), "a/b.txt", embedding_model="m")
    second = chunk_document(_doc(text, "T"), "a/b.txt", embedding_model="m")
    assert first == second
    assert len(first) > 5


def test_offsets_hashes_ids_and_metadata() -> None:
    text = _prose(80)
    chunks = chunk_document(_doc(text, "Title", "Sec"), "dir/file.txt", embedding_model="model-x")
    previous_end = 0
    for ordinal, chunk in enumerate(chunks):
        assert text[chunk.start_offset : chunk.end_offset] == chunk.text
        assert chunk.start_offset >= previous_end  # no overlap by default, in order
        previous_end = chunk.end_offset
        assert chunk.hash == hashlib.sha256(chunk.text.encode()).hexdigest()
        assert chunk.chunk_id == chunk_id_for("dir/file.txt", chunk.start_offset, chunk.end_offset, chunk.hash)
        assert len(chunk.chunk_id) == 16
        assert chunk.ordinal == ordinal
        assert chunk.embedding_model == "model-x"
        assert chunk.section == "Sec"
        assert chunk.context == "Title > Sec"
        assert chunk.embed_text.startswith("Title > Sec\n")
    assert len({c.chunk_id for c in chunks}) == len(chunks)


def test_ids_depend_on_path_and_text() -> None:
    a = chunk_document(_doc("Alpha beta gamma."), "x.txt", embedding_model="m")[0]
    b = chunk_document(_doc("Alpha beta gamma."), "y.txt", embedding_model="m")[0]
    c = chunk_document(_doc("Alpha beta delta."), "x.txt", embedding_model="m")[0]
    assert len({a.chunk_id, b.chunk_id, c.chunk_id}) == 3
    assert a.hash == b.hash != c.hash


def test_chunks_end_at_sentences_and_do_not_leave_tiny_tails() -> None:
    counter = default_counter()
    chunks = chunk_document(_doc(_prose(60)), "f.txt", embedding_model="m", counter=counter)
    for chunk in chunks[:-1]:
        assert chunk.text.rstrip().endswith(".")
    sizes = [counter.count(c.text) for c in chunks]
    assert min(sizes) >= ChunkConfig().target_tokens // 4


def test_chunks_never_cross_segments() -> None:
    text = "First page words. " * 30 + "\n\n" + "Second page words. " * 30
    doc = load_bytes("text/markdown", b"# A\n\n" + text.encode() + b"\n\n# B\n\nshort\n")
    chunks = chunk_document(doc, "m.md", embedding_model="m")
    for chunk in chunks:
        segment = next(s for s in doc.segments if s.section == chunk.section)
        assert segment.start <= chunk.start_offset < chunk.end_offset <= segment.start + len(segment.text)


ADVERSARIAL = [
    "antidisestablishmentarianism " * 400,
    "5-hydroxytryptamine(2A)-receptor; " * 300,
    "中文字符没有空格" * 300,
    "https://example.com/a/b?c=d&e=f#g " * 200,
    "".join(random.Random(3).choice("abcxyz.,;!?()[]0123456789ÄÖÜéèê") for _ in range(20_000)),
    "x" * 5000,
    "a " * 3000,
    "\n".join("line " + str(i) for i in range(3000)),
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_every_chunk_fits_the_model_window(text: str) -> None:
    counter = default_counter()
    title = "A very long title " * 40
    chunks = chunk_document(_doc(text, title, "Section " * 10), "f.txt", embedding_model="m", counter=counter)
    assert chunks
    for chunk in chunks:
        assert counter.count(chunk.embed_text) + 2 <= MODEL_WINDOW
        assert text[chunk.start_offset : chunk.end_offset] == chunk.text
    covered = "".join(c.text for c in chunks)
    assert "".join(covered.split()) == "".join(text.split())  # nothing is lost


def test_the_fallback_bound_is_conservative() -> None:
    """Chunks cut by the one-token-per-character bound fit WordPiece too."""
    wordpiece = default_counter()
    fallback = CharBoundCounter()
    for text in ADVERSARIAL[:5] + [_prose(50)]:
        for chunk in chunk_document(_doc(text, "Title"), "f.txt", embedding_model="m", counter=fallback):
            assert wordpiece.count(chunk.embed_text) <= fallback.count(chunk.embed_text) <= MODEL_WINDOW - 2


def test_overlap_repeats_whole_sentences() -> None:
    config = ChunkConfig(target_tokens=60, overlap_tokens=20)
    chunks = chunk_document(_doc(_prose(40)), "f.txt", embedding_model="m", config=config)
    overlaps = [a.end_offset - b.start_offset for a, b in zip(chunks, chunks[1:], strict=False)]
    assert any(o > 0 for o in overlaps)
    for chunk in chunks[1:]:
        assert chunk.text[0].isupper()


def test_config_key_is_stable_and_sensitive() -> None:
    counter = default_counter()
    assert ChunkConfig().key(counter) == ChunkConfig().key(counter)
    assert ChunkConfig(target_tokens=100).key(counter) != ChunkConfig().key(counter)
    assert "wordpiece" in ChunkConfig().key(counter)


def test_long_texts_are_chunked_in_blocks() -> None:
    from services.retrieval.chunking import BLOCK_CHARS

    counter = default_counter()
    text = _prose(4000, seed=11)
    text += " " + "unbroken" * 20_000  # a run with no break at all
    assert len(text) > 3 * BLOCK_CHARS
    chunks = chunk_document(_doc(text), "long.txt", embedding_model="m", counter=counter)
    assert chunks == chunk_document(_doc(text), "long.txt", embedding_model="m", counter=counter)
    for chunk in chunks:
        assert text[chunk.start_offset : chunk.end_offset] == chunk.text
        assert counter.count(chunk.embed_text) <= MODEL_WINDOW - 2
    assert "".join("".join(c.text for c in chunks).split()) == "".join(text.split())
