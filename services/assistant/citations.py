"""Citations checked against what they cite: each cited sentence of an answer marked against its chunk.

No model call and no heavy import: the check reads the answer (Markdown), the chunks the model was
given in that turn (handle → text) and, where an embedder is in use, two optional callables — one
batched ``encode(sentences)`` and ``vectors_of(handles)`` (the chunks' stored vectors).

* **Sentences, with Markdown in mind.** Paragraphs are split into sentences; every list item is a
  sentence (or several); fenced and indented code blocks, tables, headings and HTML are not prose
  and are skipped. A citation written after the full stop (``… rises. [docs:…]``) belongs to the
  sentence before it.
* **Handles.** A handle is ``<index>:<16 hex digits>`` (:func:`services.retrieval.parse_handle`),
  bare, in brackets or as a link; a bracketed ``<index>:<hex>`` shorter than 16 digits that is the
  prefix of exactly one given handle is read as that handle (small models shorten them).
* **Verdicts.** A cited sentence is ``supported``, ``weak`` or ``unsupported`` against each cited
  chunk by the overlap of content words (stop words dropped, light stemming) with the chunk's best
  window of one or two sentences and, with vectors, the cosine of the sentence against the chunk's
  vector; the sentence takes the best verdict of its handles. A handle that was not given to the
  model in that turn is ``invented``. A sentence that cites nothing but states a number, a name or a
  date is ``uncited`` (when the turn had passages to cite); other sentences are ``plain``.

What it cannot see: overlap does not read negation or direction ("X raises Y" and "X does not raise
Y" overlap alike), so **supported means grounded in the chunk, not proven true**; a paraphrase
with other words scores low unless an embedder is in use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

Verdict = Literal["supported", "weak", "unsupported", "invented", "uncited", "plain"]
Encode = Callable[[list[str]], Sequence[Sequence[float]]]
VectorsOf = Callable[[list[str]], Mapping[str, Sequence[float]]]


@dataclass(frozen=True)
class Thresholds:
    """Where the verdicts change. ``overlap``: the share of the sentence's content weight found in the
    chunk's best window; ``cosine``: sentence vector against the chunk's stored vector. The cosine
    defaults are all-MiniLM-L6-v2's scale; a feature-hashing embedder (``hash``) carries little meaning
    and should not be passed as ``encode``. Measured on tests/fixtures/citation_pairs.jsonl by
    bench/citations.py."""

    supported_at: float = 0.5
    unsupported_below: float = 0.25
    cosine_supported_at: float = 0.6
    cosine_unsupported_below: float = 0.35


DEFAULT_THRESHOLDS = Thresholds()
VERDICT_HELP = (
    "supported: the sentence's words (or meaning, with an embedder) are found in the cited chunk — grounded "
    "in it, not proven true; overlap cannot see negation. weak: partly found. unsupported: not found. "
    "invented: the handle was not given to the model. uncited: a number, name or date with no citation."
)

_ORDER = {"supported": 0, "weak": 1, "unsupported": 2, "invented": 3}

# -- handles -----------------------------------------------------------------------------------

_INDEX = r"[^\W_][\w.\-]*"
_FULL_HANDLE = re.compile(rf"(?<![\w:/.\-])({_INDEX}):([0-9a-f]{{16}})(?![\w\-])")
_SHORT_HANDLE = re.compile(rf"\[\s*({_INDEX}):([0-9a-f]{{4,15}})\s*\]")


@dataclass(frozen=True)
class Citation:
    """One handle as written in the answer, at ``start:end``; ``handle`` is what it resolves to."""

    written: str
    handle: str
    start: int
    end: int
    given: bool


def find_citations(text: str, given: Sequence[str]) -> list[Citation]:
    """Every handle written in ``text``, in order; a handle not in ``given`` is not given (invented)."""
    known = set(given)
    found: list[Citation] = []
    taken: list[tuple[int, int]] = []
    for handle in sorted(known, key=len, reverse=True):  # exact handles first, any index name
        for start in _occurrences(text, handle):
            span = (start, start + len(handle))
            if not _overlaps(span, taken):
                taken.append(span)
                found.append(Citation(handle, handle, span[0], span[1], True))
    for match in _FULL_HANDLE.finditer(text):
        if not _overlaps(match.span(), taken):
            taken.append(match.span())
            found.append(Citation(match.group(0), match.group(0), match.start(), match.end(), False))
    for match in _SHORT_HANDLE.finditer(text):
        span = (match.start(1), match.end(2))
        if _overlaps(span, taken):
            continue
        index, digits = match.group(1), match.group(2)
        matches = [h for h in known if h.startswith(f"{index}:{digits}")]
        written = f"{index}:{digits}"
        taken.append(span)
        resolved = matches[0] if len(matches) == 1 else written
        found.append(Citation(written, resolved, span[0], span[1], len(matches) == 1))
    return sorted(found, key=lambda c: c.start)


def _occurrences(text: str, handle: str) -> list[int]:
    """Where ``handle`` stands alone in ``text``: not inside a longer name, handle or link target."""
    out, at = [], text.find(handle)
    while at >= 0:
        before = text[at - 1] if at else " "
        after = text[at + len(handle)] if at + len(handle) < len(text) else " "
        if not (before.isalnum() or before in "_:/.-") and not (after.isalnum() or after in "_-"):
            out.append(at)
        at = text.find(handle, at + 1)
    return out


def _overlaps(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in taken)


# -- Markdown → sentences ------------------------------------------------------------------------

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+")
_HEADING = re.compile(r"^\s{0,3}(#{1,6}\s|={3,}\s*$|-{3,}\s*$|\*{3,}\s*$|_{3,}\s*$)")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_HTML = re.compile(r"^\s{0,3}<[A-Za-z!/]")
_ABBREVIATIONS = frozenset(
    "e.g i.e al fig figs eq vs etc dr mr mrs ms prof no nos approx ca cf st vol pp resp ref refs".split()
)


@dataclass(frozen=True)
class Span:
    """A piece of prose at ``start:end`` of the answer."""

    start: int
    end: int


def prose_blocks(text: str) -> list[list[Span]]:
    """The answer's prose as blocks (a paragraph, a list item) of line spans; code, tables, headings
    and HTML blocks are left out."""
    lines = _lines(text)
    blocks: list[list[Span]] = []
    current: list[Span] = []
    fence: str | None = None
    in_list = False
    previous_blank = True
    for number, (start, end) in enumerate(lines):
        line = text[start:end]
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        opened = _FENCE.match(line)
        if opened:
            fence = opened.group(1)[0] * 3
            current = _flush(blocks, current)
            in_list = False
            continue
        if not line.strip():
            current = _flush(blocks, current)
            previous_blank = True
            continue
        if _is_table(text, lines, number) or _HEADING.match(line) or _HTML.match(line):
            current = _flush(blocks, current)
            previous_blank = in_list = False
            continue
        if previous_blank and not in_list and line.startswith(("    ", "\t")):
            continue  # an indented code block
        item = _LIST_ITEM.match(line)
        if item:
            current = _flush(blocks, current)
            in_list = True
            start += item.end()
        elif previous_blank and not line.startswith((" ", "\t")):
            in_list = False
        quote = _QUOTE.match(text[start:end]) if not item else None
        if quote:
            start += quote.end()
        current.append(Span(start, end))
        previous_blank = False
    _flush(blocks, current)
    return blocks


def _lines(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for line in text.splitlines(keepends=True):
        spans.append((start, start + len(line.rstrip("\r\n"))))
        start += len(line)
    return spans


def _flush(blocks: list[list[Span]], current: list[Span]) -> list[Span]:
    if current:
        blocks.append(current)
    return []


def _is_table(text: str, lines: list[tuple[int, int]], number: int) -> bool:
    line = text[slice(*lines[number])]
    if _TABLE_RULE.match(line) and "-" in line:
        return True
    if "|" not in line:
        return False
    near = [lines[i] for i in (number - 1, number + 1) if 0 <= i < len(lines)]
    return line.lstrip().startswith("|") or any(_TABLE_RULE.match(text[slice(*span)]) for span in near)


def split_sentences(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Sentence spans of ``text[start:end]``: a break after ``.``, ``!`` or ``?`` and white space before
    a capital, a digit, a bracket or a quote; not after a known abbreviation, an initial or a decimal."""
    end = len(text) if end is None else end
    spans: list[Span] = []
    begin = start
    for match in re.finditer(r"[.!?][\"')\]]*\s+(?=[\[(\"'A-Z0-9])", text[start:end]):
        cut = start + match.start()
        words = text[max(begin, cut - 24) : cut].split()
        tail = (words[-1] if words else "").lower().lstrip("([\"'").rstrip(".")
        if tail in _ABBREVIATIONS or (len(tail) == 1 and tail.isalpha()):
            continue
        spans.append(Span(begin, start + match.end()))
        begin = start + match.end()
    if text[begin:end].strip():
        spans.append(Span(begin, end))
    return [_trimmed(text, span) for span in spans if text[span.start : span.end].strip()]


def _trimmed(text: str, span: Span) -> Span:
    piece = text[span.start : span.end]
    return Span(span.start + len(piece) - len(piece.lstrip()), span.end - (len(piece) - len(piece.rstrip())))


# -- words ---------------------------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset(
    """a about above after again against all also although am among an and another any are as at be because been
    before being below between both but by can could did do does doing done down during each either else
    even ever every few for from further had has have having he her here hers him his how however i if in into
    is it its itself just may might more most much must my neither no nor not now of off often on once only
    or other our ours out over own per rather same she should since so some such than that the their theirs
    them then there these they this those though through thus to too under until up upon us very via was we
    were what when where whether which while who whom whose why will with within without would yet you your
    one two shown show shows showed found find finds associated associate compared using used use based
    increase increased increases decrease decreased decreases effect effects result results study studies""".split()
)
_SUFFIXES = ("ational", "ations", "ation", "ments", "ment", "ings", "ing", "ness", "ies", "ied", "es", "ed", "ly", "s")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light stem: lower case, one common suffix off, at most 7 letters kept."""
    word = word.lower()
    if word.isdigit() or len(word) <= 3:
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                continue
            word = word[: -len(suffix)] + ("y" if suffix in {"ies", "ied"} else "")
            break
    return word[:7]


@lru_cache(maxsize=65536)
def _content_stem(word: str) -> str | None:
    lowered = word.lower()
    if lowered in _STOP or (len(word) == 1 and not word.isdigit()):
        return None
    return stem(lowered)


def content_words(text: str) -> list[tuple[str, int, int]]:
    """``(stem, start, end)`` of each content word of ``text`` (stop words and lone letters left out)."""
    out = []
    for match in _WORD.finditer(text):
        found = _content_stem(match.group(0))
        if found is not None:
            out.append((found, match.start(), match.end()))
    return out


def content_stems(text: str, start: int = 0, end: int | None = None) -> frozenset[str]:
    """The set of content stems of ``text[start:end]`` (the fast path of :func:`content_words`)."""
    words = _WORD.findall(text, start, len(text) if end is None else end)
    return frozenset(found for found in map(_content_stem, words) if found is not None)


def _weight(token: str) -> float:
    return 1.5 if token.isdigit() else 1.0


# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HandleCheck:
    """One cited handle of a sentence: its verdict, the scores behind it and the supporting span
    (character offsets in the chunk's text; ``None`` when nothing in the chunk matches)."""

    handle: str
    verdict: Verdict
    overlap: float | None = None
    cosine: float | None = None
    span: tuple[int, int] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "handle": self.handle,
            "verdict": self.verdict,
            "overlap": self.overlap,
            "cosine": self.cosine,
            "span": list(self.span) if self.span else None,
        }


@dataclass(frozen=True)
class SentenceCheck:
    """One sentence of the answer (``start:end`` in the answer) and its verdict."""

    text: str
    start: int
    end: int
    verdict: Verdict
    checks: tuple[HandleCheck, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "verdict": self.verdict,
            "citations": [check.as_json() for check in self.checks],
        }


@dataclass(frozen=True)
class CitationReport:
    """Every sentence of an answer with its verdict; ``method`` is ``overlap`` or ``overlap+vectors``;
    ``invented``: every handle the answer cites that was not given to the model (a sentence citing a
    given handle too keeps that handle's verdict, so the sentence counts alone would hide it)."""

    sentences: tuple[SentenceCheck, ...]
    method: str
    counts: Mapping[str, int] = field(default_factory=dict)
    invented: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "counts": dict(self.counts),
            "invented": list(self.invented),
            "sentences": [sentence.as_json() for sentence in self.sentences],
            "help": VERDICT_HELP,
        }


# -- scoring -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Chunk:
    text: str
    windows: tuple[tuple[int, int, frozenset[str]], ...]  # (start, end, stems) of 1 or 2 adjacent sentences


@lru_cache(maxsize=256)
def _prepare(text: str) -> _Chunk:
    sentences = split_sentences(text)
    words = [(span, content_stems(text, span.start, span.end)) for span in sentences]
    windows = []
    for i, (span, stems) in enumerate(words):
        windows.append((span.start, span.end, stems))
        if i + 1 < len(words):
            windows.append((span.start, words[i + 1][0].end, stems | words[i + 1][1]))
    return _Chunk(text, tuple(windows))


def clear_caches(*, words: bool = False) -> None:
    """Forget the prepared chunks, and with ``words`` the word → stem memo too (a benchmark measures a
    cold check with it)."""
    _prepare.cache_clear()
    if words:
        _content_stem.cache_clear()
        stem.cache_clear()


def overlap_score(sentence: str, chunk: str) -> tuple[float, tuple[int, int] | None]:
    """The share of the sentence's content weight found in the chunk's best window (one sentence or
    two adjacent ones), and that window's offsets in the chunk."""
    stems = content_stems(sentence)
    if not stems:
        return 0.0, None
    total = sum(_weight(s) for s in stems)
    prepared = _prepare(chunk)
    best, where = 0.0, None
    for start, end, window in prepared.windows:
        score = sum(_weight(s) for s in stems & window) / total
        shorter = where is not None and end - start < where[1] - where[0]
        if score > best + 1e-9 or (score > 0 and abs(score - best) <= 1e-9 and shorter):
            best, where = score, (start, end)
    return round(best, 4), where


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def verdict_of(overlap: float, cosine: float | None = None, limits: Thresholds = DEFAULT_THRESHOLDS) -> Verdict:
    """The verdict from the overlap score and, when vectors were used, the cosine: supported when
    either says so, unsupported only when both do."""
    if overlap >= limits.supported_at or (cosine is not None and cosine >= limits.cosine_supported_at):
        return "supported"
    if overlap < limits.unsupported_below and (cosine is None or cosine < limits.cosine_unsupported_below):
        return "unsupported"
    return "weak"


# -- the check -----------------------------------------------------------------------------------

_NUMBER = re.compile(r"\d")
_MONTH = re.compile(
    r"\b(jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sept?(ember)?|oct(ober)?|"
    r"nov(ember)?|dec(ember)?)\b\.?\s+\d",
    re.IGNORECASE,
)
_NAME = re.compile(r"(?<![.!?:]\s)(?<!^)\b([A-Z][a-z]+|[A-Z]{2,}[a-z0-9]*)\b")


def states_a_fact(sentence: str) -> bool:
    """Whether the sentence states a number, a name (a capitalised word not opening it, an acronym)
    or a date."""
    body = sentence.strip().lstrip("*_`\"'()[]>-–—•")
    if _NUMBER.search(body) or _MONTH.search(body):
        return True
    return any(match.group(0) != "I" for match in _NAME.finditer(body))


def check_answer(
    answer: str,
    chunks: Mapping[str, str],
    *,
    encode: Encode | None = None,
    vectors_of: VectorsOf | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> CitationReport:
    """Check every sentence of ``answer`` against the chunks given to the model in that turn
    (``handle → text``). With ``encode`` and ``vectors_of`` both given, the cited sentences are encoded
    in one batch and compared with the chunks' stored vectors as well."""
    pieces = _sentences_with_citations(answer, list(chunks))
    cited = [(text, cites) for text, _, _, cites in pieces if any(c.given for c in cites)]
    cosines = _cosines(cited, encode, vectors_of)
    sentences = []
    for text, start, end, cites in pieces:
        checks = tuple(_check_one(text, cite, chunks, cosines, thresholds) for cite in _unique(cites))
        sentences.append(SentenceCheck(text, start, end, _sentence_verdict(text, checks, bool(chunks)), checks))
    counts: dict[str, int] = {}
    for sentence in sentences:
        counts[sentence.verdict] = counts.get(sentence.verdict, 0) + 1
    method = "overlap+vectors" if cosines else "overlap"
    invented = dict.fromkeys(c.handle for sentence in sentences for c in sentence.checks if c.verdict == "invented")
    return CitationReport(tuple(sentences), method, dict(sorted(counts.items())), tuple(invented))


def _unique(cites: list[Citation]) -> list[Citation]:
    seen: dict[str, Citation] = {}
    for cite in cites:
        seen.setdefault(cite.handle, cite)
    return list(seen.values())


def _sentences_with_citations(answer: str, given: list[str]) -> list[tuple[str, int, int, list[Citation]]]:
    """Each prose sentence, its offsets and its citations, the citation text taken out of the sentence;
    a sentence that is only citations gives them to the sentence before it."""
    citations = find_citations(answer, given)
    out: list[tuple[str, int, int, list[Citation]]] = []
    for block in prose_blocks(answer):
        first = True
        for span in split_sentences(answer, block[0].start, block[-1].end):
            mine = [c for c in citations if span.start <= c.start < span.end]
            leading = _leading(answer, span, mine)
            if leading and out and not first:  # "… rises. [docs:…] Then …": the citation closes the sentence before
                prev_text, prev_start, _, prev_cites = out[-1]
                out[-1] = (prev_text, prev_start, leading[-1].end, prev_cites + leading)
                mine = mine[len(leading) :]
                rest = leading[-1].end
                while rest < span.end and answer[rest] in " \t\n]),;":
                    rest += 1
                span = Span(rest, span.end)
            first = False
            pieces = [(max(span.start, line.start), min(span.end, line.end)) for line in block]
            text = _without(answer, [(a, b) for a, b in pieces if a < b], mine)
            if mine and out and not content_words(text) and not _NUMBER.search(text):
                prev_text, prev_start, _, prev_cites = out[-1]
                out[-1] = (prev_text, prev_start, span.end, prev_cites + mine)
                continue
            out.append((text, span.start, span.end, mine))
    return [piece for piece in out if piece[0] or piece[3]]


def _leading(answer: str, span: Span, cites: list[Citation]) -> list[Citation]:
    """The citations that open ``span`` (nothing but brackets, commas and spaces before them)."""
    out, cursor = [], span.start
    for cite in cites:
        if answer[cursor : cite.start].strip(" \t\n[](),;") or answer[cite.end : span.end].strip(" \t\n[](),;.") == "":
            break
        out.append(cite)
        cursor = cite.end
    return out


def _without(answer: str, pieces: list[tuple[int, int]], cites: list[Citation]) -> str:
    """The text of a sentence's pieces (its parts of the block's lines) with its citations taken out."""
    parts = []
    for start, end in pieces:
        cursor = start
        for cite in (c for c in cites if start <= c.start < end):
            parts.append(answer[cursor : cite.start])
            cursor = max(cursor, min(cite.end, end))
        parts.append(answer[cursor:end] + " ")
    text = "".join(parts)
    text = re.sub(r"\[\s*[,;\s]*\s*\]|\(\s*[,;\s]*\s*\)|\(<[^>]*>\)", "", text)
    return re.sub(r"\s+([.,;:!?])", r"\1", " ".join(text.split()))


def _cosines(
    cited: list[tuple[str, list[Citation]]], encode: Encode | None, vectors_of: VectorsOf | None
) -> dict[tuple[str, str], float]:
    if encode is None or vectors_of is None or not cited:
        return {}
    handles = sorted({c.handle for _, cites in cited for c in cites if c.given})
    stored = vectors_of(handles)
    texts = list(dict.fromkeys(text for text, _ in cited))
    encoded = dict(zip(texts, encode(texts), strict=True))
    return {
        (text, cite.handle): _cosine(encoded[text], stored[cite.handle])
        for text, cites in cited
        for cite in cites
        if cite.given and cite.handle in stored
    }


def _check_one(
    text: str,
    cite: Citation,
    chunks: Mapping[str, str],
    cosines: Mapping[tuple[str, str], float],
    thresholds: Thresholds,
) -> HandleCheck:
    if not cite.given or cite.handle not in chunks:
        return HandleCheck(cite.handle, "invented")
    score, span = overlap_score(text, chunks[cite.handle])
    cosine = cosines.get((text, cite.handle))
    rounded = None if cosine is None else round(cosine, 4)
    return HandleCheck(cite.handle, verdict_of(score, cosine, thresholds), score, rounded, span)


def _sentence_verdict(text: str, checks: tuple[HandleCheck, ...], had_passages: bool) -> Verdict:
    if checks:
        return min((check.verdict for check in checks), key=lambda v: _ORDER[v])
    if had_passages and states_a_fact(text):
        return "uncited"
    return "plain"
