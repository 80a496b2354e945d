"""The EPUB loader: zip and manifest checks first, then ebooklib (imported inside the function)."""

from __future__ import annotations

import codecs
import posixpath
import re
import zipfile
from io import BytesIO
from typing import Any
from urllib.parse import unquote, urlsplit

from services.retrieval.errors import (
    BadEncoding,
    FileTooLarge,
    MalformedDocument,
    NestingTooDeep,
    UnsafePath,
)
from services.retrieval.loaders_html import html_sections
from services.retrieval.loaders_text import clean_title, decode_text, join_segments
from services.retrieval.models import Document
from services.retrieval.settings import LoaderLimits

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
            if total > limits.zip_budget:
                raise FileTooLarge(
                    f"the EPUB unpacks to more than {limits.zip_budget} bytes (limits.max_zip_bytes, at most "
                    "a third of limits.memory_bytes)"
                )
        _check_unpacked_size(archive, infos, limits.zip_budget)
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


def _check_unpacked_size(archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo], budget: int) -> None:
    """Inflate every member in 1 MiB pieces before ebooklib reads any: memory-bounded integrity.

    The sizes in a zip's directory are claims.  :mod:`zipfile` never returns more than the
    claimed size, but ``ZipFile.read`` (what ebooklib calls) inflates a member's compressed data
    whole before it truncates and fails the CRC check: a member that says 1 KiB can take
    gigabytes on the way.  Read here in pieces, the lie is a CRC error (MalformedDocument) at
    1 MiB of memory; an honest archive over ``budget`` is FileTooLarge.  Nothing is kept.
    """
    total = 0
    for info in infos:
        if info.is_dir():
            continue
        try:
            with archive.open(info) as member:
                while piece := member.read(1 << 20):
                    total += len(piece)
                    if total > budget:
                        raise FileTooLarge(
                            f"the EPUB unpacks to more than {budget} bytes (limits.max_zip_bytes, at most "
                            "a third of limits.memory_bytes)"
                        )
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
            raise MalformedDocument(f"broken EPUB archive member {info.filename!r}: {exc}"[:500]) from None


def _flatten_toc(entries: Any, out: dict[str, str], depth: int = 0) -> None:
    if depth > 64:
        return
    for entry in entries if isinstance(entries, (list, tuple)) else [entries]:
        if isinstance(entry, tuple) and len(entry) == 2:
            section, children = entry
            href = getattr(section, "href", None)
            if href and getattr(section, "title", None):
                out.setdefault(str(href).split("#", 1)[0], clean_title(section.title) or "")
            _flatten_toc(children, out, depth + 1)
        elif isinstance(entry, (list, tuple)):
            _flatten_toc(entry, out, depth + 1)
        else:
            href = getattr(entry, "href", None)
            title = getattr(entry, "title", None)
            if href and title:
                out.setdefault(str(href).split("#", 1)[0], clean_title(title) or "")


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
        title = clean_title(meta[0][0]) if meta else None
    except Exception:
        title = None

    parts: list[tuple[str, int | None, str | None]] = []
    chars = 0
    for idref, linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or not isinstance(item, epub.EpubHtml) or isinstance(item, epub.EpubNav):
            continue
        if str(linear).lower() == "no":
            continue
        markup = _decode_markup(item.content if isinstance(item.content, bytes) else item.get_content())
        sections, _ = html_sections(
            markup,
            limits.max_nesting,
            max_chars=limits.max_text_chars - chars,
            max_sections=limits.max_chunks - len(parts),
        )
        del markup
        chars += sum(len(text) for text, _ in sections)
        chapter = toc.get(item.get_name()) or None
        for text, heading_path in sections:
            if chapter and heading_path and not heading_path.startswith(chapter):
                section: str | None = f"{chapter} > {heading_path}"
            else:
                section = heading_path or chapter or item.get_name()
            parts.append((text, None, section))
    segments = join_segments(parts)
    return Document(content_type="application/epub+zip", segments=segments, title=title)
