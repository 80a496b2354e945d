"""Small test documents made on the fly (no binary fixtures in the repository)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path


def make_pdf(pages: list[str], *, password: str | None = None, title: str | None = None) -> bytes:
    """A real PDF with one Helvetica text page per entry (lines split on newlines)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    font_ref = writer._add_object(font)
    for text in pages:
        page = writer.add_blank_page(612, 792)
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        for line in text.split("\n"):
            escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(f"({escaped}) Tj T*")
        ops.append("ET")
        stream = DecodedStreamObject()
        stream.set_data("\n".join(ops).encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font_ref})}
        )
    if title:
        writer.add_metadata({"/Title": title})
    if password:
        writer.encrypt(password, algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def make_epub(path: Path, chapters: list[tuple[str, str]], *, title: str = "Test Book") -> Path:
    """An EPUB 3 written by ebooklib: one chapter per (title, body HTML)."""
    import warnings

    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("aries-test")
    book.set_title(title)
    book.set_language("en")
    items = []
    for number, (chapter_title, body) in enumerate(chapters, start=1):
        item = epub.EpubHtml(title=chapter_title, file_name=f"ch{number}.xhtml", lang="en")
        item.content = f"<h1>{chapter_title}</h1>{body}"
        book.add_item(item)
        items.append(item)
    book.toc = tuple(items)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        epub.write_epub(str(path), book)
    return path


CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
    "</rootfiles></container>"
)


def make_raw_epub(
    path: Path,
    manifest_href: str,
    *,
    member_name: str = "OEBPS/ch1.xhtml",
    content: str = "<html><body><p>secret</p></body></html>",
) -> Path:
    """A hand-made EPUB whose manifest item points at ``manifest_href``."""
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier>'
        "<dc:title>Evil</dc:title><dc:language>en</dc:language></metadata>"
        f'<manifest><item id="c1" href="{manifest_href}" media-type="application/xhtml+xml"/></manifest>'
        '<spine><itemref idref="c1"/></spine></package>'
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
        archive.writestr("META-INF/container.xml", CONTAINER)
        archive.writestr("OEBPS/content.opf", opf)
        archive.writestr(member_name, content)
    return path
