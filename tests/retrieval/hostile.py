"""Hostile documents made at test time (nothing binary is committed).

Each builder writes one file into a folder and returns its path; :func:`make_suite` writes
them all, beside one ordinary Markdown file that must still be indexed.
"""

from __future__ import annotations

import io
import random
import zipfile
import zlib
from pathlib import Path

MIB = 1024 * 1024
WORDS = ("aspirin", "stroke", "cholesterol", "patients", "trial", "kinase", "protein", "cells", "dose", "risk")


def one_line_markdown(path: Path, size: int = 50 * MIB) -> Path:
    """``size`` bytes of words on a single line: no heading, no paragraph, no line break."""
    rng = random.Random(7)
    line = " ".join(rng.choice(WORDS) for _ in range(200_000)).encode()
    with path.open("wb") as out:
        written = 0
        while written < size:
            piece = line[: size - written]
            out.write(piece)
            written += len(piece)
    return path


def nested_markdown(path: Path, depth: int = 1_000) -> Path:
    """Block quotes nested ``depth`` deep, then lists nested ``depth`` deep."""
    quotes = "> " * depth + "quoted text\n"
    lists = "".join("  " * level + f"- item {level}\n" for level in range(depth))
    path.write_text("# Deep\n\n" + quotes + "\n" + lists, encoding="utf-8")
    return path


def nested_list_markdown(path: Path, depth: int = 1_000) -> Path:
    """Only lists, nested ``depth`` deep (legal Markdown: it is indexed)."""
    path.write_text(
        "# Lists\n\n" + "".join("  " * level + f"- item {level} about aspirin\n" for level in range(depth)),
        encoding="utf-8",
    )
    return path


def nested_html(path: Path, depth: int = 200_000) -> Path:
    path.write_text("<html><body>" + "<div>" * depth + "deep" + "</div>" * depth + "</body></html>", encoding="utf-8")
    return path


def huge_html_table(path: Path, rows: int = 100_000, columns: int = 10) -> Path:
    """A table of ``rows`` × ``columns`` cells (about 12 MB of markup)."""
    with path.open("w", encoding="utf-8") as out:
        out.write("<html><head><title>Table</title></head><body><h1>Numbers</h1><table>")
        for row in range(rows):
            out.write("<tr>" + "".join(f"<td>r{row}c{col}</td>" for col in range(columns)) + "</tr>")
        out.write("</table></body></html>")
    return path


def raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF from object bodies (object ``i`` is ``objects[i-1]``; 1 is the catalog), with an xref."""
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def pdf_stream(entries: bytes, data: bytes) -> bytes:
    return b"<< " + entries + b" /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def zlib_zeros(total: int, block: int = MIB) -> bytes:
    """A zlib stream that inflates to ``total`` zero bytes (~1000:1), made in milliseconds.

    One raw-deflate segment of ``block`` zeros ended by a full flush does not refer back to
    earlier data, so it can be repeated; the Adler-32 of n zeros is ``(n mod 65521) << 16 | 1``.
    """
    assert total % block == 0
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = compressor.compress(b"\0" * block) + compressor.flush(zlib.Z_FULL_FLUSH)
    final = zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    adler = ((total % 65521) << 16) | 1
    return b"\x78\xda" + segment * (total // block) + final + adler.to_bytes(4, "big")


def pdf_bomb(path: Path, inflated: int = 2048 * MIB) -> Path:
    """One page whose FlateDecode content stream inflates to ``inflated`` bytes (2 GiB from ~2 MB)."""
    path.write_bytes(
        raw_pdf(
            [
                b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
                pdf_stream(b"/Filter /FlateDecode", zlib_zeros(inflated)),
            ]
        )
    )
    return path


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def pdf_page_tree_cycle(path: Path) -> Path:
    """The page tree lists itself among its own kids."""
    content = b"BT /F1 12 Tf 72 720 Td (cycle text) Tj ET"
    path.write_bytes(
        raw_pdf(
            [
                b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R 2 0 R] /Count 2 >>",
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
                b" /Resources << /Font << /F1 5 0 R >> >> >>",
                pdf_stream(b"", content),
                _FONT,
            ]
        )
    )
    return path


def pdf_xobject_cycle(path: Path) -> Path:
    """A form XObject that draws itself (an object cycle through the resources)."""
    path.write_bytes(
        raw_pdf(
            [
                b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources 6 0 R >>",
                pdf_stream(b"", b"BT /F1 12 Tf 72 720 Td (xobject page text) Tj ET /X1 Do"),
                pdf_stream(
                    b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources 6 0 R",
                    b"BT /F1 12 Tf 72 700 Td (loop) Tj ET /X1 Do",
                ),
                b"<< /Font << /F1 7 0 R >> /XObject << /X1 5 0 R >> >>",
                _FONT,
            ]
        )
    )
    return path


def aes_pdf(path: Path, text: str, *, user_password: str, owner_password: str = "owner") -> Path:
    """A one-page PDF encrypted with AES-256 (pypdf needs ``cryptography`` to write and read it)."""
    from pypdf import PdfReader, PdfWriter

    from .builders import make_pdf

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf([text]))))
    writer.encrypt(user_password, owner_password, algorithm="AES-256")
    buffer = io.BytesIO()
    writer.write(buffer)
    path.write_bytes(buffer.getvalue())
    return path


def epub_zip_bomb(path: Path, inflated: int = 1024 * MIB) -> Path:
    """A valid-looking EPUB with one chapter that inflates to ``inflated`` bytes (~1 MB on disk)."""
    from .builders import CONTAINER

    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Bomb</dc:title></metadata>'
        '<manifest><item id="c1" href="ch1.xhtml" media-type="application/xhtml+xml"/></manifest>'
        '<spine><itemref idref="c1"/></spine></package>'
    )
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        archive.writestr("META-INF/container.xml", CONTAINER)
        archive.writestr("OEBPS/content.opf", opf)
        with archive.open("OEBPS/ch1.xhtml", "w", force_zip64=True) as member:
            block = b" " * (8 * MIB)
            for _ in range(inflated // len(block)):
                member.write(block)
    return path


def epub_lying_sizes(path: Path, inflated: int = 64 * MIB, claimed: int = 1000) -> Path:
    """An EPUB whose chapter claims ``claimed`` bytes in both zip headers but inflates to ``inflated``."""
    import struct

    epub_zip_bomb(path, inflated)
    data = bytearray(path.read_bytes())
    name = b"OEBPS/ch1.xhtml"
    local = _header_for(data, b"PK\x03\x04", 30, 26, name)
    central = _header_for(data, b"PK\x01\x02", 46, 28, name)
    if struct.unpack_from("<I", data, central + 24)[0] == 0xFFFFFFFF:  # zip64 sizes live in an extra field
        extra = central + 46 + len(name)
        struct.pack_into("<QQ", data, extra + 4, claimed, claimed)
    else:
        struct.pack_into("<I", data, central + 24, claimed)
    if struct.unpack_from("<I", data, local + 22)[0] == 0xFFFFFFFF:
        extra = local + 30 + len(name)
        struct.pack_into("<QQ", data, extra + 4, claimed, claimed)
    else:
        struct.pack_into("<I", data, local + 22, claimed)
    path.write_bytes(bytes(data))
    return path


def _header_for(data: bytearray, signature: bytes, fixed: int, name_length_at: int, name: bytes) -> int:
    """Offset of the zip header with ``signature`` whose file name is ``name``."""
    import struct

    at = data.find(signature)
    while at >= 0:
        length = struct.unpack_from("<H", data, at + name_length_at)[0]
        if data[at + fixed : at + fixed + length] == name:
            return at
        at = data.find(signature, at + 1)
    raise AssertionError(f"no header for {name!r}")


def make_suite(root: Path) -> dict[str, Path]:
    """Every hostile document, plus ``good.md`` (must be indexed), in ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    good = root / "good.md"
    good.write_text("# Good\n\nAspirin lowers the risk of a second stroke.\n", encoding="utf-8")
    return {
        "good.md": good,
        "one-line.md": one_line_markdown(root / "one-line.md"),
        "nested.md": nested_markdown(root / "nested.md"),
        "lists.md": nested_list_markdown(root / "lists.md"),
        "nested.html": nested_html(root / "nested.html"),
        "table.html": huge_html_table(root / "table.html"),
        "bomb.pdf": pdf_bomb(root / "bomb.pdf"),
        "cycle.pdf": pdf_page_tree_cycle(root / "cycle.pdf"),
        "xobject.pdf": pdf_xobject_cycle(root / "xobject.pdf"),
        "locked.pdf": aes_pdf(root / "locked.pdf", "locked secret", user_password="hunter2"),
        "open.pdf": aes_pdf(root / "open.pdf", "openly encrypted text", user_password=""),
        "bomb.epub": epub_zip_bomb(root / "bomb.epub"),
    }
