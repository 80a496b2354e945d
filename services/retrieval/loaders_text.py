"""Shared text handling of the loaders, and the plain-text and Markdown loaders.

Markdown and plain text are parsed in-process by the line-based code below, which is linear
in the input.  :func:`decode_text`, :func:`join_segments` and :func:`clean_title` are used by
the other format readers too (:mod:`services.retrieval.loaders_html`, ``loaders_pdf``,
``loaders_epub``).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from typing import Any

from services.retrieval.errors import BadEncoding, BinaryContent, EmptyDocument, FileTooLarge, NestingTooDeep
from services.retrieval.models import Document, Segment
from services.retrieval.settings import LoaderLimits

SEGMENT_SEPARATOR = "\n\n"
MAX_TITLE_CHARS = 200

# -- text decoding -----------------------------------------------------------------------

_CONTROL = set(range(0, 9)) | {11, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 28, 29, 30, 31, 127}


def decode_text(data: bytes) -> str:
    """UTF-8 (a BOM is dropped) or UTF-16 with a BOM; newlines normalised to ``\\n``.

    Raises BinaryContent for NUL bytes or a high share of control bytes, BadEncoding for
    anything that is not valid in the detected encoding, EmptyDocument for white space only.
    """
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise BadEncoding(f"not valid UTF-16 ({exc.reason} at byte {exc.start})") from None
        if "\x00" in text:
            raise BinaryContent("binary data (NUL characters) behind a text extension")
    else:
        head = data[:8192]
        if b"\x00" in data:
            raise BinaryContent("binary data (NUL bytes) behind a text extension")
        if head and sum(1 for byte in head if byte in _CONTROL) > len(head) // 10:
            raise BinaryContent("binary data (control bytes) behind a text extension")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise BadEncoding(
                f"not valid UTF-8 ({exc.reason} at byte offset {exc.start}); convert the file to UTF-8"
            ) from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise EmptyDocument("the file has no text")
    return text


def join_segments(parts: list[tuple[str, int | None, str | None]]) -> tuple[Segment, ...]:
    """Segments from (text, page, section) triples, offsets as if joined by SEGMENT_SEPARATOR."""
    segments: list[Segment] = []
    offset = 0
    for text, page, section in parts:
        if not text.strip():
            continue
        segments.append(Segment(text=text, start=offset, page=page, section=section))
        offset += len(text) + len(SEGMENT_SEPARATOR)
    if not segments:
        raise EmptyDocument("the file has no extractable text")
    return tuple(segments)


def clean_title(value: Any) -> str | None:
    if value is None:
        return None
    text = " ".join(str(value).split())[:MAX_TITLE_CHARS]
    return text or None


# -- plain text ----------------------------------------------------------------------------


def check_text_size(chars: int, limits: LoaderLimits) -> None:
    """FileTooLarge when a file's text is over ``limits.max_text_chars``."""
    if chars > limits.max_text_chars:
        raise FileTooLarge(f"the file has more than {limits.max_text_chars} characters of text (limits.max_text_chars)")


def decode_bounded(data: bytes, limits: LoaderLimits) -> str:
    """:func:`decode_text` with ``limits.max_text_chars`` checked, before decoding when the byte
    count alone proves it (a character is at most 4 bytes in UTF-8 and UTF-16)."""
    if len(data) > 4 * limits.max_text_chars:
        check_text_size(len(data), limits)
    text = decode_text(data)
    check_text_size(len(text), limits)
    return text


def load_text(data: bytes, limits: LoaderLimits) -> Document:
    text = decode_bounded(data, limits)
    return Document(content_type="text/plain", segments=(Segment(text=text, start=0),))


# -- Markdown ------------------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_QUOTE_PREFIX = re.compile(r"^[ \t]*((?:>[ \t]?)+)")
_FRONT_MATTER_END = re.compile(r"^[^\S\n]*(?:---|\.\.\.)[^\S\n]*$", re.MULTILINE)
_LINE_HEAD = 4096
"""Only this many leading characters of a line decide whether it is a heading, fence or quote;
a line longer than this is body text (so a 50 MB line is never copied or matched whole)."""


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """(start offset, head of the line) for each line, without splitting the whole text."""
    pos = 0
    length = len(text)
    while True:
        end = text.find("\n", pos)
        if end < 0:
            end = length
        yield pos, text[pos : min(end, pos + _LINE_HEAD + 1)]
        if end >= length:
            return
        pos = end + 1


def load_markdown(data: bytes, limits: LoaderLimits) -> Document:
    """Sections by heading (ATX ``#`` and setext underlines), fenced code kept as text.

    Each segment starts at its heading line; ``section`` is the heading path
    (``Guide > Install > Linux``).  Offsets index the decoded file itself.  One pass over the
    lines without holding them (memory is the text plus one entry per heading); more than
    ``limits.max_chunks`` headings is FileTooLarge.
    """
    text = decode_bounded(data, limits)
    first_line_end = text.find("\n")
    front_matter = (
        first_line_end > 0
        and text[:first_line_end].strip() == "---"
        and _FRONT_MATTER_END.search(text, first_line_end + 1) is not None
    )
    in_front_matter = False
    headings: list[tuple[int, int, str]] = []  # (start offset, level, title)
    fence: str | None = None
    previous: tuple[int, str] | None = None  # the line before, when it is a body line
    for number, (start, head) in enumerate(_lines(text)):
        line = head if len(head) <= _LINE_HEAD else ""
        if number == 0 and front_matter:  # YAML front matter is not a heading source
            in_front_matter = True
            continue
        if in_front_matter:
            if head.strip() in ("---", "..."):
                in_front_matter = False
            continue
        body_line = (start, line)
        quote = _QUOTE_PREFIX.match(head)
        if quote and quote.group(1).count(">") > limits.max_nesting:
            raise NestingTooDeep(f"line {number + 1}: block quotes nested deeper than {limits.max_nesting}")
        fence_match = _FENCE.match(line)
        if fence is not None:
            if fence_match and fence_match.group(1)[0] == fence[0] and len(fence_match.group(1)) >= len(fence):
                fence = None
            previous = None
            continue
        if fence_match:
            fence = fence_match.group(1)
            previous = None
            continue
        atx = _ATX.match(line)
        if atx:
            headings.append((start, len(atx.group(1)), (atx.group(2) or "").strip()))
        else:
            setext = _SETEXT.match(line)
            if setext and previous is not None and _is_setext_title(previous[1]):
                if not (headings and headings[-1][0] == previous[0]):
                    level = 1 if setext.group(1)[0] == "=" else 2
                    headings.append((previous[0], level, previous[1].strip()))
        if len(headings) > limits.max_chunks:
            raise FileTooLarge(f"the file has more than {limits.max_chunks} sections (limits.max_chunks)")
        previous = body_line

    segments: list[Segment] = []
    stack: list[tuple[int, str]] = []
    boundaries: list[tuple[int, tuple[int, str] | None]] = [(0, None)]
    boundaries += [(offset, (level, title)) for offset, level, title in headings]
    for position, (start, heading) in enumerate(boundaries):
        if heading is not None:
            level, title = heading
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
        end = boundaries[position + 1][0] if position + 1 < len(boundaries) else len(text)
        if end <= start and heading is None:
            continue
        body = text[start:end]
        if not body.strip():
            continue
        section = " > ".join(title for _, title in stack if title) or None
        segments.append(Segment(text=body, start=start, section=section))
    if not segments:
        raise EmptyDocument("the file has no text")
    return Document(content_type="text/markdown", segments=tuple(segments))


def _is_setext_title(line: str) -> bool:
    """A paragraph line that a following ``===``/``---`` turns into a heading."""
    stripped = line.strip()
    if not stripped or line.startswith("    ") or _ATX.match(line) or _FENCE.match(line) or _SETEXT.match(line):
        return False
    return not stripped.startswith(("-", "*", "+", ">", "|"))
