"""The HTML / XHTML loader: visible text split by headings (also used for EPUB chapters), through
:mod:`services.text.htmltext`; its bounds become the loader's typed errors."""

from __future__ import annotations

from services.retrieval.errors import FileTooLarge, NestingTooDeep
from services.retrieval.loaders_text import clean_title, decode_text, join_segments
from services.retrieval.models import Document
from services.retrieval.settings import LoaderLimits
from services.text.htmltext import HtmlTooDeep, HtmlTooLarge
from services.text.htmltext import html_sections as _html_sections


def html_sections(
    markup: str, max_nesting: int, *, max_chars: int | None = None, max_sections: int | None = None
) -> tuple[list[tuple[str, str | None]], str | None]:
    """(text, heading path) pairs in document order, and the ``<title>``.

    NestingTooDeep past ``max_nesting`` open elements; FileTooLarge past ``max_chars`` characters of
    visible text or ``max_sections`` headings.
    """
    try:
        sections, title = _html_sections(markup, max_nesting, max_chars=max_chars, max_sections=max_sections)
    except HtmlTooDeep as exc:
        raise NestingTooDeep(str(exc)) from None
    except HtmlTooLarge as exc:
        raise FileTooLarge(str(exc)) from None
    return sections, clean_title(title)


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
