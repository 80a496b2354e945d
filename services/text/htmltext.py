"""HTML to text: one deterministic walk over the markup, two views of what it finds.

The walk (``html.parser``, no network, no scripts) keeps the visible text: ``<script>``, ``<style>``,
``<head>``, ``<svg>`` and their like are dropped, block elements end a line, white space is collapsed
except inside ``<pre>``, character references are decoded, a ``<p>``, ``<li>`` or table cell left
open is closed by the next one, and the first ``<title>`` is kept apart.  It can be bounded: past
``max_nesting`` open elements it raises :class:`HtmlTooDeep`, past ``max_chars`` characters of text
or ``max_sections`` headings :class:`HtmlTooLarge`.

* :func:`html_sections` — what the retrieval loaders index (HTML, XHTML, EPUB chapters): the text
  split at each heading into ``(text, heading path)`` pairs, one line per block, every line
  stripped;
* :func:`html_to_text` — what ``builtin:web:extract`` returns for a fetched page: one text,
  paragraphs separated by a blank line, list items marked ``- ``, the layout of ``<pre>`` kept.

The same markup always gives the same text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
)
SKIP = frozenset({"script", "style", "noscript", "template", "head", "svg", "math", "object", "iframe", "canvas"})
"""Elements whose content is never text a reader sees."""
AUTOCLOSE = frozenset({"p", "li", "dt", "dd", "tr", "td", "th", "option", "thead", "tbody", "tfoot"})
"""Elements a second one of the same kind closes (``<li>one<li>two``)."""
BLOCK = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr",
        "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead",
        "tr", "ul",
    }
)  # fmt: skip
"""Elements that begin and end a line."""
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_COMPACT = 4096
"""A text buffer's last this many pieces are joined into one (bounds the list of small strings)."""
_PRE_NEWLINE = "\x00"
"""A line break inside ``<pre>`` while the text is assembled (its line keeps its indentation)."""


class HtmlTooDeep(ValueError):
    """More elements open at once than the walk allows."""


class HtmlTooLarge(ValueError):
    """More text, or more headings, than the walk allows."""


@dataclass(frozen=True)
class _Style:
    sections: bool  # a heading starts a new part, named by its heading path
    paragraphs: bool  # two block boundaries in a row leave a blank line
    bullets: bool  # "- " before each list item
    keep_pre: bool  # lines inside <pre> keep their indentation


_SECTIONS = _Style(sections=True, paragraphs=False, bullets=False, keep_pre=False)
_PAGE = _Style(sections=False, paragraphs=True, bullets=True, keep_pre=True)


class _Walk(HTMLParser):
    def __init__(
        self,
        style: _Style,
        max_nesting: int | None = None,
        max_chars: int | None = None,
        max_sections: int | None = None,
    ) -> None:
        super().__init__(convert_charrefs=True)
        self.style = style
        self.max_nesting = max_nesting
        self.max_chars = max_chars
        self.max_sections = max_sections
        self.chars = 0
        self.stack: list[str] = []
        self.skip = 0
        self.pre = 0
        self.breaks = 0  # block boundaries since the last text
        self.title_parts: list[str] | None = None
        self.title: str | None = None
        self.heading_level = 0
        self.heading_parts: list[str] = []
        self.sections: list[tuple[int, str]] = []
        self.parts: list[tuple[list[str], str | None]] = [([], None)]

    @property
    def _buf(self) -> list[str]:
        return self.parts[-1][0]

    def _boundary(self) -> None:
        self.breaks += 1

    def _append(self, text: str) -> None:
        buf = self._buf
        if self.breaks:
            if buf and not buf[-1].endswith("\n"):
                buf.append("\n\n" if self.style.paragraphs and self.breaks > 1 else "\n")
            self.breaks = 0
        buf.append(text)
        if len(buf) > 2 * _COMPACT:
            buf[-_COMPACT:] = ["".join(buf[-_COMPACT:])]

    # -- the walk --------------------------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and self.title is None:
            self.title_parts = []
        if tag in VOID:
            if tag in ("br", "hr") and not self.skip:
                self._boundary()
            return
        if tag in AUTOCLOSE and self.stack and self.stack[-1] == tag:
            self.handle_endtag(tag)
        self.stack.append(tag)
        if self.max_nesting is not None and len(self.stack) > self.max_nesting:
            raise HtmlTooDeep(f"HTML elements nested deeper than {self.max_nesting}")
        if tag in SKIP:
            self.skip += 1
        if tag == "pre":
            self.pre += 1
        if self.skip:
            return
        if tag in HEADINGS and self.style.sections:
            self._start_heading(tag)
        elif tag in BLOCK:
            self._boundary()
        if tag == "li" and self.style.bullets:
            self._append("- ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "hr") and not self.skip:
            self._boundary()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self.title_parts is not None:
            self.title = "".join(self.title_parts)
            self.title_parts = None
        if tag in VOID or tag not in self.stack:
            return
        while self.stack:
            open_tag = self.stack.pop()
            if open_tag in SKIP:
                self.skip -= 1
            if open_tag == "pre":
                self.pre -= 1
            if open_tag in HEADINGS and self.heading_level:
                self._end_heading()
            if open_tag == tag:
                break
        if not self.skip and tag in BLOCK:
            self._boundary()

    def handle_data(self, data: str) -> None:
        if self.title_parts is not None:
            self.title_parts.append(data)
        if self.skip:
            return
        if self.pre:
            if self.style.keep_pre:
                data = data.replace("\n", _PRE_NEWLINE)
        else:
            data = re.sub(r"\s+", " ", data)
            buf = self._buf
            if buf and (self.breaks or buf[-1].endswith((" ", "\n"))):
                data = data.lstrip(" ")  # a space at the start of a line, or after one
        if not data:
            return
        self.chars += len(data)
        if self.max_chars is not None and self.chars > self.max_chars:
            raise HtmlTooLarge(f"the file has more than {self.max_chars} characters of text (limits.max_text_chars)")
        self._append(data)
        if self.heading_level:
            self.heading_parts.append(data)
            if len(self.heading_parts) > _COMPACT:
                self.heading_parts[:] = ["".join(self.heading_parts)[:4096]]

    # -- headings --------------------------------------------------------------------------------
    def _start_heading(self, tag: str) -> None:
        self.heading_level = HEADINGS[tag]
        self.heading_parts = []
        self.parts.append(([], None))
        self.breaks = 0
        if self.max_sections is not None and len(self.parts) > self.max_sections:
            raise HtmlTooLarge(f"the file has more than {self.max_sections} sections (limits.max_chunks)")

    def _end_heading(self) -> None:
        title = " ".join("".join(self.heading_parts).split())
        level = self.heading_level
        self.heading_level = 0
        if title:
            while self.sections and self.sections[-1][0] >= level:
                self.sections.pop()
            self.sections.append((level, title))
        section = " > ".join(t for _, t in self.sections) or None
        self.parts[-1] = (self._buf, section)
        self._boundary()

    # -- results ---------------------------------------------------------------------------------
    def text_of(self, buf: list[str]) -> str:
        lines: list[str] = []
        for line in "".join(buf).split("\n"):
            if _PRE_NEWLINE in line:
                lines.extend(part.rstrip() for part in line.split(_PRE_NEWLINE))
            else:
                lines.append(line.strip())
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _walk(walk: _Walk, markup: str) -> _Walk:
    try:
        walk.feed(markup)
        walk.close()
    except RecursionError:
        raise HtmlTooDeep("HTML nested too deeply to parse") from None
    return walk


def html_sections(
    markup: str, max_nesting: int, *, max_chars: int | None = None, max_sections: int | None = None
) -> tuple[list[tuple[str, str | None]], str | None]:
    """(text, heading path) pairs in document order, and the ``<title>`` with its white space
    collapsed (None when there is none or it is empty).

    :class:`HtmlTooDeep` past ``max_nesting`` open elements; :class:`HtmlTooLarge` past
    ``max_chars`` characters of visible text or ``max_sections`` headings.
    """
    walk = _walk(_Walk(_SECTIONS, max_nesting, max_chars, max_sections), markup)
    out: list[tuple[str, str | None]] = []
    for buf, section in walk.parts:
        text = walk.text_of(buf)
        if text:
            out.append((text, section))
    return out, " ".join(walk.title.split()) or None if walk.title is not None else None


def html_to_text(markup: str) -> tuple[str, str]:
    """``(title, text)`` of a page: paragraphs separated by a blank line, list items marked ``- ``,
    ``<pre>`` kept as it is laid out ("" when there is no title)."""
    walk = _walk(_Walk(_PAGE), markup)
    title = " ".join((walk.title or "").split())
    return title, walk.text_of(walk._buf)


__all__ = ["HtmlTooDeep", "HtmlTooLarge", "html_sections", "html_to_text"]
