"""The HTML / XHTML loader: visible text split by headings (also used for EPUB chapters)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from services.retrieval.errors import FileTooLarge, NestingTooDeep
from services.retrieval.loaders_text import clean_title, decode_text, join_segments
from services.retrieval.models import Document
from services.retrieval.settings import LoaderLimits

_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
)
_SKIP = frozenset({"script", "style", "noscript", "template", "head", "svg", "math", "object", "iframe"})
_AUTOCLOSE = frozenset({"p", "li", "dt", "dd", "tr", "td", "th", "option", "thead", "tbody", "tfoot"})
_BLOCK = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "div", "dl", "dt", "figcaption",
        "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol",
        "p", "pre", "section", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
    }
)  # fmt: skip
_COMPACT = 4096
"""A text buffer's last this many pieces are joined into one (bounds the list of small strings)."""
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}


class _HtmlText(HTMLParser):
    """Deterministic visible-text extraction with heading sections and a nesting bound."""

    def __init__(self, max_nesting: int, max_chars: int | None = None, max_sections: int | None = None) -> None:
        super().__init__(convert_charrefs=True)
        self.max_nesting = max_nesting
        self.max_chars = max_chars
        self.max_sections = max_sections
        self.chars = 0
        self.stack: list[str] = []
        self.skip = 0
        self.pre = 0
        self.title_parts: list[str] | None = None
        self.title: str | None = None
        self.heading_level = 0
        self.heading_parts: list[str] = []
        self.sections: list[tuple[int, str]] = []
        self.parts: list[tuple[list[str], str | None]] = [([], None)]

    @property
    def _buf(self) -> list[str]:
        return self.parts[-1][0]

    def _newline(self) -> None:
        if self._buf and not self._buf[-1].endswith("\n"):
            self._buf.append("\n")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and self.title is None:
            self.title_parts = []
        if tag in _VOID:
            if tag in ("br", "hr") and not self.skip:
                self._newline()
            return
        if tag in _AUTOCLOSE and self.stack and self.stack[-1] == tag:
            self.handle_endtag(tag)
        self.stack.append(tag)
        if len(self.stack) > self.max_nesting:
            raise NestingTooDeep(f"HTML elements nested deeper than {self.max_nesting}")
        if tag in _SKIP:
            self.skip += 1
        if tag == "pre":
            self.pre += 1
        if self.skip:
            return
        if tag in _HEADINGS:
            self.heading_level = _HEADINGS[tag]
            self.heading_parts = []
            self.parts.append(([], None))
            if self.max_sections is not None and len(self.parts) > self.max_sections:
                raise FileTooLarge(f"the file has more than {self.max_sections} sections (limits.max_chunks)")
        elif tag in _BLOCK:
            self._newline()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "hr") and not self.skip:
            self._newline()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self.title_parts is not None:
            self.title = clean_title("".join(self.title_parts))
            self.title_parts = None
        if tag in _VOID or tag not in self.stack:
            return
        while self.stack:
            open_tag = self.stack.pop()
            if open_tag in _SKIP:
                self.skip -= 1
            if open_tag == "pre":
                self.pre -= 1
            if open_tag in _HEADINGS and self.heading_level:
                self._end_heading()
            if open_tag == tag:
                break
        if not self.skip and tag in _BLOCK:
            self._newline()

    def _end_heading(self) -> None:
        title = " ".join("".join(self.heading_parts).split())
        level = self.heading_level
        self.heading_level = 0
        if title:
            while self.sections and self.sections[-1][0] >= level:
                self.sections.pop()
            self.sections.append((level, title))
        section = " > ".join(t for _, t in self.sections) or None
        buf = self._buf
        self.parts[-1] = (buf, section)
        self._newline()

    def handle_data(self, data: str) -> None:
        if self.title_parts is not None:
            self.title_parts.append(data)
        if self.skip:
            return
        if not self.pre:
            data = re.sub(r"\s+", " ", data)
            if self._buf and self._buf[-1].endswith((" ", "\n")):
                data = data.lstrip(" ")
        if data:
            self.chars += len(data)
            if self.max_chars is not None and self.chars > self.max_chars:
                raise FileTooLarge(
                    f"the file has more than {self.max_chars} characters of text (limits.max_text_chars)"
                )
            buf = self._buf
            buf.append(data)
            if len(buf) > 2 * _COMPACT:
                buf[-_COMPACT:] = ["".join(buf[-_COMPACT:])]
            if self.heading_level:
                self.heading_parts.append(data)
                if len(self.heading_parts) > _COMPACT:
                    self.heading_parts[:] = ["".join(self.heading_parts)[:4096]]

    def result(self) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        for buf, section in self.parts:
            lines = [line.strip() for line in "".join(buf).split("\n")]
            text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
            if text:
                out.append((text, section))
        return out


def html_sections(
    markup: str, max_nesting: int, *, max_chars: int | None = None, max_sections: int | None = None
) -> tuple[list[tuple[str, str | None]], str | None]:
    """(text, heading path) pairs in document order, and the ``<title>``.

    FileTooLarge past ``max_chars`` characters of visible text or ``max_sections`` headings.
    """
    parser = _HtmlText(max_nesting, max_chars, max_sections)
    try:
        parser.feed(markup)
        parser.close()
    except RecursionError:
        raise NestingTooDeep("HTML nested too deeply to parse") from None
    return parser.result(), parser.title


def load_html(data: bytes, limits: LoaderLimits) -> Document:
    markup = decode_text(data)  # markup is not text: max_text_chars bounds the visible text below
    sections, title = html_sections(
        markup, limits.max_nesting, max_chars=limits.max_text_chars, max_sections=limits.max_chunks
    )
    segments = join_segments([(text, None, section) for text, section in sections])
    return Document(content_type="text/html", segments=segments, title=title)


def load_xhtml(data: bytes, limits: LoaderLimits) -> Document:
    doc = load_html(data, limits)
    return Document(content_type="application/xhtml+xml", segments=doc.segments, title=doc.title)
