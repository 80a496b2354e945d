"""Loaders: what they extract from real files, and a typed error for every file they cannot read."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.errors import AriesError, TooLarge
from services.retrieval.errors import (
    BadEncoding,
    BinaryContent,
    EmptyDocument,
    EncryptedDocument,
    FileTooLarge,
    IngestError,
    LoaderTimeout,
    MalformedDocument,
    NestingTooDeep,
    UnsafePath,
    UnsupportedType,
)
from services.retrieval.loaders import SEGMENT_SEPARATOR, content_type_for, decode_text, load_bytes
from services.retrieval.sandbox import LoaderSandbox
from services.retrieval.settings import LoaderLimits

from .builders import make_epub, make_pdf, make_raw_epub

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[LoaderSandbox]:
    with LoaderSandbox(LoaderLimits()) as box:
        yield box


def test_error_classes_are_typed_aries_errors() -> None:
    for cls in (
        BadEncoding,
        BinaryContent,
        EmptyDocument,
        EncryptedDocument,
        FileTooLarge,
        LoaderTimeout,
        MalformedDocument,
        NestingTooDeep,
        UnsafePath,
        UnsupportedType,
    ):
        assert issubclass(cls, IngestError) and issubclass(cls, AriesError)
        assert cls("x").code != IngestError.code
    assert issubclass(FileTooLarge, TooLarge)


def test_content_types() -> None:
    assert content_type_for("a/B.PDF") == "application/pdf"
    assert content_type_for("book.epub") == "application/epub+zip"
    assert content_type_for("x.markdown") == "text/markdown"
    assert content_type_for("x.htm") == "text/html"
    assert content_type_for("x.txt") == "text/plain"
    assert content_type_for("x.png") is None
    assert content_type_for("Makefile") is None


# -- text ------------------------------------------------------------------------------------


def test_text_decoding_normalises_newlines_and_bom() -> None:
    assert decode_text(b"\xef\xbb\xbfa\r\nb\rc") == "a\nb\nc"
    assert decode_text("h\u00e9llo".encode("utf-16")) == "h\u00e9llo"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", EmptyDocument),
        (b"  \n\t\n", EmptyDocument),
        (b"caf\xe9 au lait", BadEncoding),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", BinaryContent),
        (bytes(range(1, 9)) * 100, BinaryContent),
    ],
)
def test_text_failures(data: bytes, error: type[IngestError]) -> None:
    with pytest.raises(error):
        load_bytes("text/plain", data)


def test_bad_encoding_names_the_byte() -> None:
    with pytest.raises(BadEncoding, match="byte offset 3"):
        load_bytes("text/markdown", b"caf\xe9")


def test_size_limit() -> None:
    with pytest.raises(FileTooLarge):
        load_bytes("text/plain", b"x" * 101, LoaderLimits(max_file_bytes=100))


# -- Markdown --------------------------------------------------------------------------------


def test_markdown_sections_by_heading_path() -> None:
    text = (
        "---\ntitle: front\n---\nintro line\n\n# Guide\n\nbody\n\n## Install\n\n```\n# not a heading\n```\n\n"
        "Setext Title\n============\n\nunder setext\n\n### Deep\n\nx\n"
    )
    doc = load_bytes("text/markdown", text.encode())
    sections = [seg.section for seg in doc.segments]
    assert sections == [None, "Guide", "Guide > Install", "Setext Title", "Setext Title > Deep"]
    for seg in doc.segments:  # offsets index the decoded file itself
        assert text[seg.start : seg.start + len(seg.text)] == seg.text
    assert "# not a heading" in doc.segments[2].text


def test_markdown_pathological_quote_nesting() -> None:
    with pytest.raises(NestingTooDeep):
        load_bytes("text/markdown", (">" * 5000 + " deep\n").encode())
    doc = load_bytes("text/markdown", b"> > quoted twice\n")
    assert doc.segments[0].text.startswith("> >")


# -- HTML ------------------------------------------------------------------------------------


def test_html_text_sections_and_title(sandbox: LoaderSandbox) -> None:
    markup = (
        "<html><head><title>The  Page</title><style>p{color:red}</style></head><body>"
        "<h1>Cats</h1><p>Cats <b>purr</b> when&nbsp;content.</p><script>alert(1)</script>"
        "<h2>Kittens</h2><ul><li>sleep<li>play</ul></body></html>"
    )
    doc = sandbox.load("text/html", markup.encode())
    assert doc.title == "The Page"
    assert [seg.section for seg in doc.segments] == ["Cats", "Cats > Kittens"]
    assert doc.segments[0].text == "Cats\nCats purr when content."  # &nbsp; is white space
    assert "alert" not in "".join(seg.text for seg in doc.segments)
    assert doc.segments[1].text.split("\n") == ["Kittens", "sleep", "play"]
    # deterministic: the same bytes give the same document in-process and in the sandbox
    assert load_bytes("text/html", markup.encode()) == doc


def test_html_pathological_nesting(sandbox: LoaderSandbox) -> None:
    with pytest.raises(NestingTooDeep):
        sandbox.load("text/html", ("<div>" * 100_000 + "x").encode())
    # unclosed paragraphs are siblings, not nesting
    doc = sandbox.load("text/html", ("<p>para " * 5000).encode())
    assert doc.segments


def test_html_binary_behind_extension(sandbox: LoaderSandbox) -> None:
    with pytest.raises(BinaryContent):
        sandbox.load("text/html", b"<html>\x00\x01\x02</html>")


# -- PDF -------------------------------------------------------------------------------------


def test_pdf_pages_and_title(sandbox: LoaderSandbox) -> None:
    data = make_pdf(["First page about aspirin.", "", "Third page (with parens)."], title="Trial Report")
    doc = sandbox.load("application/pdf", data)
    assert doc.title == "Trial Report"
    assert [seg.page for seg in doc.segments] == [1, 3]  # the blank page has no segment
    assert doc.segments[1].text == "Third page (with parens)."
    assert doc.segments[1].start == len(doc.segments[0].text) + len(SEGMENT_SEPARATOR)


def test_pdf_encrypted_is_refused(sandbox: LoaderSandbox) -> None:
    with pytest.raises(EncryptedDocument, match="password"):
        sandbox.load("application/pdf", make_pdf(["secret"], password="hunter2"))


def test_pdf_with_empty_user_password_is_read(sandbox: LoaderSandbox) -> None:
    doc = sandbox.load("application/pdf", make_pdf(["open to all"], password=""))
    assert doc.segments[0].text == "open to all"


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.9])
def test_pdf_truncated(sandbox: LoaderSandbox, cut: float) -> None:
    data = make_pdf(["Some text on a page.", "More text."])
    with pytest.raises((MalformedDocument, EmptyDocument)):
        sandbox.load("application/pdf", data[: int(len(data) * cut)])


def test_pdf_not_a_pdf(sandbox: LoaderSandbox) -> None:
    with pytest.raises(MalformedDocument, match="not a PDF"):
        sandbox.load("application/pdf", b"hello, I am text")


def test_pdf_without_text(sandbox: LoaderSandbox) -> None:
    with pytest.raises(EmptyDocument):
        sandbox.load("application/pdf", make_pdf(["", ""]))


def test_pdf_decompression_bomb_hits_the_memory_limit() -> None:
    import zlib

    from pypdf import PdfWriter
    from pypdf.generic import DictionaryObject, NameObject, NumberObject, StreamObject

    raw = b"BT /F1 12 Tf 72 720 Td\n" + b"(" + b"A" * 50 + b") Tj\n" * 1 + (b"(" + b"A" * 50 + b") Tj\n") * 500_000
    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    stream = StreamObject()
    stream._data = zlib.compress(raw + b"ET\n", 9)
    stream[NameObject("/Filter")] = NameObject("/FlateDecode")
    stream[NameObject("/Length")] = NumberObject(len(stream._data))
    page[NameObject("/Contents")] = writer._add_object(stream)
    buffer = io.BytesIO()
    writer.write(buffer)
    assert len(buffer.getvalue()) < 200_000
    with LoaderSandbox(LoaderLimits(memory_bytes=48 * 1024 * 1024)) as box:
        with pytest.raises(FileTooLarge, match="memory"):
            box.load("application/pdf", buffer.getvalue())
        # the sandbox starts afresh and keeps working
        assert box.load("application/pdf", make_pdf(["fine"])).segments[0].text == "fine"
        assert box.starts == 2


def test_timeout_kills_the_loader_and_the_next_file_works() -> None:
    big = make_pdf([f"line {i} of a long document" for i in range(4000)])
    with LoaderSandbox(LoaderLimits(timeout_s=0.05)) as box:
        with pytest.raises(LoaderTimeout):
            box.load("application/pdf", big)
        doc = box.load("application/pdf", make_pdf(["quick"]), timeout_s=30)
        assert doc.segments[0].text == "quick"


# -- EPUB ------------------------------------------------------------------------------------


def test_epub_chapters(tmp_path: Path, sandbox: LoaderSandbox) -> None:
    path = make_epub(
        tmp_path / "b.epub",
        [("Chapter One", "<p>Alpha beta.</p><h2>Part A</h2><p>Gamma.</p>"), ("Chapter Two", "<p>Delta.</p>")],
        title="My Book",
    )
    doc = sandbox.load("application/epub+zip", path.read_bytes())
    assert doc.title == "My Book"
    assert [seg.section for seg in doc.segments] == ["Chapter One", "Chapter One > Part A", "Chapter Two"]
    assert doc.segments[0].text == "Chapter One\nAlpha beta."
    assert all("Table of contents" not in seg.text for seg in doc.segments)  # nav is not indexed


@pytest.mark.parametrize(
    "href", ["../../etc/passwd", "../../outside.xhtml", "/etc/passwd", "http://example.com/x.xhtml"]
)
def test_epub_manifest_pointing_outside_is_refused(tmp_path: Path, sandbox: LoaderSandbox, href: str) -> None:
    path = make_raw_epub(tmp_path / "evil.epub", href)
    with pytest.raises(UnsafePath):
        sandbox.load("application/epub+zip", path.read_bytes())


def test_epub_member_outside_the_archive_is_refused(tmp_path: Path, sandbox: LoaderSandbox) -> None:
    path = make_raw_epub(tmp_path / "slip.epub", "ch1.xhtml", member_name="../../ch1.xhtml")
    with pytest.raises(UnsafePath):
        sandbox.load("application/epub+zip", path.read_bytes())


def test_epub_raw_hand_made_is_read(tmp_path: Path, sandbox: LoaderSandbox) -> None:
    path = make_raw_epub(tmp_path / "ok.epub", "ch1.xhtml")
    doc = sandbox.load("application/epub+zip", path.read_bytes())
    assert doc.segments[0].text == "secret"


def test_epub_broken(tmp_path: Path, sandbox: LoaderSandbox) -> None:
    good = make_epub(tmp_path / "b.epub", [("One", "<p>x</p>")]).read_bytes()
    with pytest.raises(MalformedDocument):
        sandbox.load("application/epub+zip", good[: len(good) // 2])
    with pytest.raises(MalformedDocument):
        sandbox.load("application/epub+zip", b"PK\x03\x04 not really a zip")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
    with pytest.raises(MalformedDocument, match="container"):
        sandbox.load("application/epub+zip", buffer.getvalue())
    missing = make_raw_epub(tmp_path / "missing.epub", "../nothere.xhtml")  # inside the archive, but absent
    with pytest.raises(MalformedDocument, match="missing"):
        sandbox.load("application/epub+zip", missing.read_bytes())


def test_epub_zip_bomb_is_refused_before_unpacking(tmp_path: Path) -> None:
    path = tmp_path / "bomb.epub"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", "application/epub+zip")
        archive.writestr("OEBPS/huge.xhtml", b"\x00" * (8 * 1024 * 1024))
    assert path.stat().st_size < 100_000
    with pytest.raises(FileTooLarge):
        load_bytes("application/epub+zip", path.read_bytes(), LoaderLimits(max_zip_bytes=1024 * 1024))


def test_epub_deep_nesting(tmp_path: Path, sandbox: LoaderSandbox) -> None:
    content = "<html><body>" + "<div>" * 400 + "x" + "</div>" * 400 + "</body></html>"
    path = make_raw_epub(tmp_path / "deep.epub", "ch1.xhtml", content=content)
    with pytest.raises(NestingTooDeep):
        sandbox.load("application/epub+zip", path.read_bytes())
