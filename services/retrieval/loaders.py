"""File loaders: bytes in, a :class:`Document` (text segments with page/section) out.

Every loader works on bytes that the caller has already read (so the content hash and the
parsed content are the same bytes), and raises an :class:`IngestError` subclass for a file
it cannot read.  PDF, EPUB and HTML are parsed in a subprocess with time and memory limits
(see :mod:`services.retrieval.sandbox`); Markdown and plain text are parsed in-process by the
line-based code below, which is linear in the input.

Offsets: a document's *extracted text* is its segments joined with ``"\\n\\n"`` (for Markdown
and plain text that is the decoded file with ``\\r\\n`` turned into ``\\n``); ``Segment.start``
and the chunk offsets index into it.
"""

from __future__ import annotations

import codecs
import posixpath
import re
from html.parser import HTMLParser
from io import BytesIO
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from services.retrieval.errors import (
    BadEncoding,
    BinaryContent,
    EmptyDocument,
    EncryptedDocument,
    FileTooLarge,
    MalformedDocument,
    NestingTooDeep,
    UnsafePath,
    UnsupportedType,
)
from services.retrieval.models import Document, Segment
from services.retrieval.settings import LoaderLimits

if TYPE_CHECKING:
    from collections.abc import Callable

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
SEGMENT_SEPARATOR = "\n\n"
MAX_TITLE_CHARS = 200


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
    return loader(data, limits)


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


def _join_segments(parts: list[tuple[str, int | None, str | None]]) -> tuple[Segment, ...]:
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


def _clean_title(value: Any) -> str | None:
    if value is None:
        return None
    text = " ".join(str(value).split())[:MAX_TITLE_CHARS]
    return text or None


# -- plain text ----------------------------------------------------------------------------


def load_text(data: bytes, limits: LoaderLimits) -> Document:
    text = decode_text(data)
    return Document(content_type="text/plain", segments=(Segment(text=text, start=0),))


# -- Markdown ------------------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_QUOTE_PREFIX = re.compile(r"^[ \t]*((?:>[ \t]?)+)")


def load_markdown(data: bytes, limits: LoaderLimits) -> Document:
    """Sections by heading (ATX ``#`` and setext underlines), fenced code kept as text.

    Each segment starts at its heading line; ``section`` is the heading path
    (``Guide > Install > Linux``).  Offsets index the decoded file itself.
    """
    text = decode_text(data)
    lines = text.split("\n")
    starts: list[int] = []
    pos = 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1

    headings: list[tuple[int, int, str]] = []  # (line number, level, title)
    first_body_line = 0
    if lines and lines[0].strip() == "---":  # YAML front matter is not a heading source
        for number in range(1, len(lines)):
            if lines[number].strip() in ("---", "..."):
                first_body_line = number + 1
                break
    fence: str | None = None
    for number in range(first_body_line, len(lines)):
        line = lines[number]
        quote = _QUOTE_PREFIX.match(line)
        if quote and quote.group(1).count(">") > limits.max_nesting:
            raise NestingTooDeep(f"line {number + 1}: block quotes nested deeper than {limits.max_nesting}")
        fence_match = _FENCE.match(line)
        if fence is not None:
            if fence_match and fence_match.group(1)[0] == fence[0] and len(fence_match.group(1)) >= len(fence):
                fence = None
            continue
        if fence_match:
            fence = fence_match.group(1)
            continue
        atx = _ATX.match(line)
        if atx:
            headings.append((number, len(atx.group(1)), (atx.group(2) or "").strip()))
            continue
        setext = _SETEXT.match(line)
        if setext and number > first_body_line and _is_setext_title(lines[number - 1]):
            if not (headings and headings[-1][0] == number - 1):
                level = 1 if setext.group(1)[0] == "=" else 2
                headings.append((number - 1, level, lines[number - 1].strip()))

    segments: list[Segment] = []
    stack: list[tuple[int, str]] = []
    boundaries: list[tuple[int, tuple[int, str] | None]] = [(0, None)]
    boundaries += [(line_no, (level, title)) for line_no, level, title in headings]
    for position, (line_no, heading) in enumerate(boundaries):
        if heading is not None:
            level, title = heading
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
        end_line = boundaries[position + 1][0] if position + 1 < len(boundaries) else len(lines)
        if end_line <= line_no and heading is None:
            continue
        start = starts[line_no]
        end = starts[end_line] if end_line < len(lines) else len(text)
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


# -- HTML / XHTML --------------------------------------------------------------------------

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
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}


class _HtmlText(HTMLParser):
    """Deterministic visible-text extraction with heading sections and a nesting bound."""

    def __init__(self, max_nesting: int) -> None:
        super().__init__(convert_charrefs=True)
        self.max_nesting = max_nesting
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
        elif tag in _BLOCK:
            self._newline()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "hr") and not self.skip:
            self._newline()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self.title_parts is not None:
            self.title = _clean_title("".join(self.title_parts))
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
            self._buf.append(data)
            if self.heading_level:
                self.heading_parts.append(data)

    def result(self) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        for buf, section in self.parts:
            lines = [line.strip() for line in "".join(buf).split("\n")]
            text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
            if text:
                out.append((text, section))
        return out


def html_sections(markup: str, max_nesting: int) -> tuple[list[tuple[str, str | None]], str | None]:
    """(text, heading path) pairs in document order, and the ``<title>``."""
    parser = _HtmlText(max_nesting)
    try:
        parser.feed(markup)
        parser.close()
    except RecursionError:
        raise NestingTooDeep("HTML nested too deeply to parse") from None
    return parser.result(), parser.title


def load_html(data: bytes, limits: LoaderLimits) -> Document:
    markup = decode_text(data)
    sections, title = html_sections(markup, limits.max_nesting)
    segments = _join_segments([(text, None, section) for text, section in sections])
    return Document(content_type="text/html", segments=segments, title=title)


def load_xhtml(data: bytes, limits: LoaderLimits) -> Document:
    doc = load_html(data, limits)
    return Document(content_type="application/xhtml+xml", segments=doc.segments, title=doc.title)


# -- PDF -----------------------------------------------------------------------------------


def load_pdf(data: bytes, limits: LoaderLimits) -> Document:
    """One segment per page with text (``page`` is 1-based); encrypted PDFs are refused."""
    import logging

    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PyPdfError

    logging.getLogger("pypdf").setLevel(logging.CRITICAL)
    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise MalformedDocument("not a PDF file (no %PDF header)")
    try:
        reader = PdfReader(BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                decrypted = reader.decrypt("")
            except DependencyError as exc:
                raise EncryptedDocument(
                    f"encrypted PDF; decrypting it needs a library that is missing: {exc}"
                ) from None
            if not decrypted:
                raise EncryptedDocument("the PDF is password-protected")
        pages: list[tuple[str, int | None, str | None]] = []
        for number, page in enumerate(reader.pages, start=1):
            text = (page.extract_text() or "").replace("\x00", "")
            text = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
            pages.append((text.strip("\n"), number, None))
        title = None
        try:
            title = _clean_title(reader.metadata.title if reader.metadata else None)
        except PyPdfError:
            title = None
    except (EncryptedDocument, EmptyDocument):
        raise
    except FileNotDecryptedError:
        raise EncryptedDocument("the PDF is password-protected") from None
    except RecursionError:
        raise NestingTooDeep("the PDF's object tree is nested too deeply") from None
    except MemoryError:
        raise FileTooLarge("reading the PDF went over the memory limit") from None
    except Exception as exc:
        raise MalformedDocument(f"cannot read the PDF: {type(exc).__name__}: {exc}"[:500]) from None
    segments = _join_segments(pages)
    return Document(content_type="application/pdf", segments=segments, title=title)


# -- EPUB ----------------------------------------------------------------------------------

_CONTAINER_NS = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF_NS = "{http://www.idpf.org/2007/opf}"


def _safe_member(name: str, what: str) -> str:
    """Normalise a path inside the EPUB; UnsafePath if it could leave the archive root."""
    if "\\" in name or "\x00" in name:
        raise UnsafePath(f"{what} {name!r} contains a backslash or NUL")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise UnsafePath(f"{what} {name!r} is an absolute path")
    normal = posixpath.normpath(name)
    if normal == ".." or normal.startswith("../"):
        raise UnsafePath(f"{what} {name!r} points outside the EPUB")
    return normal


def _check_epub_structure(data: bytes, limits: LoaderLimits) -> None:
    """Zip and manifest checks done before ebooklib sees the file."""
    import xml.etree.ElementTree as ET
    import zipfile

    try:
        archive = zipfile.ZipFile(BytesIO(data))
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise MalformedDocument(f"not a valid EPUB (zip) file: {exc}") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > limits.max_zip_members:
            raise FileTooLarge(f"the EPUB has {len(infos)} members; the limit is {limits.max_zip_members}")
        total = 0
        for info in infos:
            _safe_member(info.filename, "archive member")
            total += info.file_size
        if total > limits.max_zip_bytes:
            raise FileTooLarge(f"the EPUB unpacks to {total} bytes; the limit is {limits.max_zip_bytes}")
        try:
            container = archive.read("META-INF/container.xml")
        except KeyError:
            raise MalformedDocument("not an EPUB: META-INF/container.xml is missing") from None
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise MalformedDocument(f"broken EPUB archive: {exc}") from None
        try:
            root = ET.fromstring(container)
        except ET.ParseError as exc:
            raise MalformedDocument(f"broken META-INF/container.xml: {exc}") from None
        rootfile = root.find(f".//{_CONTAINER_NS}rootfile")
        full_path = rootfile.get("full-path") if rootfile is not None else None
        if not full_path:
            raise MalformedDocument("META-INF/container.xml names no package (OPF) file")
        opf_name = _safe_member(unquote(full_path), "package file")
        try:
            opf = ET.fromstring(archive.read(opf_name))
        except KeyError:
            raise MalformedDocument(f"the package file {opf_name!r} is missing") from None
        except ET.ParseError as exc:
            raise MalformedDocument(f"broken package file {opf_name!r}: {exc}") from None
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise MalformedDocument(f"broken EPUB archive: {exc}") from None
        opf_dir = posixpath.dirname(opf_name)
        names = set(archive.namelist())
        manifest = opf.find(f"{_OPF_NS}manifest")
        if manifest is None:
            raise MalformedDocument("the package file has no manifest")
        for item in manifest.findall(f"{_OPF_NS}item"):
            href = item.get("href") or ""
            if urlsplit(href).scheme:
                raise UnsafePath(f"manifest item {href!r} points outside the EPUB")
            target = _safe_member(posixpath.join(opf_dir, unquote(href.split("#", 1)[0])), "manifest item")
            if target not in names:
                raise MalformedDocument(f"manifest item {href!r} is missing from the archive")


def _flatten_toc(entries: Any, out: dict[str, str], depth: int = 0) -> None:
    if depth > 64:
        return
    for entry in entries if isinstance(entries, (list, tuple)) else [entries]:
        if isinstance(entry, tuple) and len(entry) == 2:
            section, children = entry
            href = getattr(section, "href", None)
            if href and getattr(section, "title", None):
                out.setdefault(str(href).split("#", 1)[0], _clean_title(section.title) or "")
            _flatten_toc(children, out, depth + 1)
        elif isinstance(entry, (list, tuple)):
            _flatten_toc(entry, out, depth + 1)
        else:
            href = getattr(entry, "href", None)
            title = getattr(entry, "title", None)
            if href and title:
                out.setdefault(str(href).split("#", 1)[0], _clean_title(title) or "")


def _decode_markup(content: bytes) -> str:
    if content.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return decode_text(content)
    declared = re.match(rb"^\s*<\?xml[^>]*encoding=[\"']([A-Za-z0-9._-]+)[\"']", content)
    encoding = declared.group(1).decode("ascii") if declared else "utf-8"
    try:
        return content.decode("utf-8-sig" if encoding.lower().replace("_", "-") == "utf-8" else encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise BadEncoding(f"chapter text is not valid {encoding}: {exc}") from None


def load_epub(data: bytes, limits: LoaderLimits) -> Document:
    """One or more segments per spine chapter; ``section`` is the TOC title / heading path."""
    import warnings

    _check_epub_structure(data, limits)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from ebooklib import epub

            book = epub.read_epub(BytesIO(data), options={"ignore_ncx": False})
    except (UnsafePath, MalformedDocument):
        raise
    except RecursionError:
        raise NestingTooDeep("the EPUB's XML is nested too deeply") from None
    except MemoryError:
        raise FileTooLarge("reading the EPUB went over the memory limit") from None
    except Exception as exc:
        raise MalformedDocument(f"cannot read the EPUB: {type(exc).__name__}: {exc}"[:500]) from None

    toc: dict[str, str] = {}
    _flatten_toc(book.toc, toc)
    title = None
    try:
        meta = book.get_metadata("DC", "title")
        title = _clean_title(meta[0][0]) if meta else None
    except Exception:
        title = None

    parts: list[tuple[str, int | None, str | None]] = []
    for idref, linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or not isinstance(item, epub.EpubHtml) or isinstance(item, epub.EpubNav):
            continue
        if str(linear).lower() == "no":
            continue
        markup = _decode_markup(item.content if isinstance(item.content, bytes) else item.get_content())
        sections, _ = html_sections(markup, limits.max_nesting)
        chapter = toc.get(item.get_name()) or None
        for text, heading_path in sections:
            if chapter and heading_path and not heading_path.startswith(chapter):
                section: str | None = f"{chapter} > {heading_path}"
            else:
                section = heading_path or chapter or item.get_name()
            parts.append((text, None, section))
    segments = _join_segments(parts)
    return Document(content_type="application/epub+zip", segments=segments, title=title)


_LOADERS: dict[str, Callable[[bytes, LoaderLimits], Document]] = {
    "text/plain": load_text,
    "text/markdown": load_markdown,
    "text/html": load_html,
    "application/xhtml+xml": load_xhtml,
    "application/pdf": load_pdf,
    "application/epub+zip": load_epub,
}
