"""File loaders: bytes in, a :class:`Document` (text segments with page/section) out.

Every loader works on bytes that the caller has already read (so the content hash and the
parsed content are the same bytes), and raises an :class:`IngestError` subclass for a file
it cannot read.  PDF, EPUB and HTML are parsed in a subprocess with time and memory limits
(see :mod:`services.retrieval.sandbox`); Markdown and plain text are parsed in-process by the
line-based code in ``loaders_text``, which is linear in the input.

Offsets: a document's *extracted text* is its segments joined with ``"\\n\\n"`` (for Markdown
and plain text that is the decoded file with ``\\r\\n`` turned into ``\\n``); ``Segment.start``
and the chunk offsets index into it.

The format readers live in ``loaders_text`` (decoding, plain text, Markdown), ``loaders_html``,
``loaders_pdf`` and ``loaders_epub``; this module maps content types to them.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from services.retrieval.errors import FileTooLarge, UnsupportedType
from services.retrieval.loaders_epub import load_epub
from services.retrieval.loaders_html import html_sections, load_html, load_xhtml
from services.retrieval.loaders_pdf import load_pdf
from services.retrieval.loaders_text import (
    MAX_TITLE_CHARS,
    SEGMENT_SEPARATOR,
    check_text_size,
    decode_text,
    load_markdown,
    load_text,
)
from services.retrieval.models import Document
from services.retrieval.settings import LoaderLimits

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "CONTENT_TYPES",
    "MAX_TITLE_CHARS",
    "SANDBOXED_TYPES",
    "SEGMENT_SEPARATOR",
    "content_type_for",
    "decode_text",
    "html_sections",
    "load_bytes",
    "load_epub",
    "load_html",
    "load_markdown",
    "load_pdf",
    "load_text",
    "load_xhtml",
]

CONTENT_TYPES: dict[str, str] = {
    ".pdf": "application/pdf",
    ".epub": "application/epub+zip",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".mdown": "text/markdown",
    ".mkd": "text/markdown",
    ".txt": "text/plain",
    ".text": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
}
SANDBOXED_TYPES = frozenset({"application/pdf", "application/epub+zip", "text/html", "application/xhtml+xml"})


def content_type_for(name: str) -> str | None:
    return CONTENT_TYPES.get(PurePosixPath(name.lower()).suffix)


def load_bytes(content_type: str, data: bytes, limits: LoaderLimits | None = None) -> Document:
    """Parse ``data`` as ``content_type`` in this process (the sandbox calls this too)."""
    limits = limits or LoaderLimits()
    if len(data) > limits.max_file_bytes:
        raise FileTooLarge(f"{len(data)} bytes is over the {limits.max_file_bytes}-byte limit")
    loader = _LOADERS.get(content_type)
    if loader is None:
        raise UnsupportedType(f"no loader for {content_type}")
    document = loader(data, limits)
    if len(document.segments) > limits.max_chunks:
        raise FileTooLarge(f"the file has more than {limits.max_chunks} sections (limits.max_chunks)")
    check_text_size(sum(len(segment.text) for segment in document.segments), limits)
    return document


_LOADERS: dict[str, Callable[[bytes, LoaderLimits], Document]] = {
    "text/plain": load_text,
    "text/markdown": load_markdown,
    "text/html": load_html,
    "application/xhtml+xml": load_xhtml,
    "application/pdf": load_pdf,
    "application/epub+zip": load_epub,
}
