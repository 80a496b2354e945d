"""The PDF loader (pypdf, imported inside the function); one segment per page.

Runs in the loader subprocess (its memory and time limits catch decompression bombs and
parsers that loop).  Inside it: more than ``limits.max_pages`` pages or more than
``limits.max_text_chars`` characters of text is FileTooLarge, checked page by page; an object
tree that recurses (a cycle in the page tree) is NestingTooDeep.  Encrypted PDFs are tried with
the empty user password (pypdf needs ``cryptography`` for AES) and are EncryptedDocument when
that does not open them, never "malformed".
"""

from __future__ import annotations

from io import BytesIO

from services.retrieval.errors import (
    EmptyDocument,
    EncryptedDocument,
    FileTooLarge,
    MalformedDocument,
    NestingTooDeep,
)
from services.retrieval.loaders_text import check_text_size, clean_title, join_segments
from services.retrieval.models import Document
from services.retrieval.settings import LoaderLimits


def load_pdf(data: bytes, limits: LoaderLimits) -> Document:
    """One segment per page with text (``page`` is 1-based); password-protected PDFs are refused."""
    import logging

    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PyPdfError

    logging.getLogger("pypdf").setLevel(logging.CRITICAL)
    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise MalformedDocument("not a PDF file (no %PDF header)")
    decrypting = False  # an error while this is set is about the encryption
    try:
        reader = PdfReader(BytesIO(data), strict=False)
        if reader.is_encrypted:
            decrypting = True
            try:
                decrypted = reader.decrypt("")
            except DependencyError as exc:
                raise EncryptedDocument(
                    f"encrypted PDF; decrypting it needs a library that is missing: {exc}"
                ) from None
            if not decrypted:
                raise EncryptedDocument("encrypted PDF: it needs a password to open")
            decrypting = False
        count = len(reader.pages)
        if count > limits.max_pages:
            raise FileTooLarge(f"the PDF has {count} pages; the limit is {limits.max_pages} (limits.max_pages)")
        pages: list[tuple[str, int | None, str | None]] = []
        chars = 0
        for number, page in enumerate(reader.pages, start=1):
            text = (page.extract_text() or "").replace("\x00", "")
            text = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
            chars += len(text)
            check_text_size(chars, limits)
            pages.append((text.strip("\n"), number, None))
        title = None
        try:
            title = clean_title(reader.metadata.title if reader.metadata else None)
        except PyPdfError:
            title = None
    except (EncryptedDocument, EmptyDocument, FileTooLarge):
        raise
    except FileNotDecryptedError:
        raise EncryptedDocument("encrypted PDF: it needs a password to open") from None
    except DependencyError as exc:
        raise EncryptedDocument(f"encrypted PDF; decrypting it needs a library that is missing: {exc}") from None
    except RecursionError:
        raise NestingTooDeep("the PDF's object tree is nested too deeply (or loops)") from None
    except MemoryError:
        raise FileTooLarge("reading the PDF went over the memory limit (limits.memory_bytes)") from None
    except Exception as exc:
        what = "cannot decrypt the encrypted PDF" if decrypting else "cannot read the PDF"
        error = EncryptedDocument if decrypting else MalformedDocument
        raise error(f"{what}: {type(exc).__name__}: {exc}"[:500]) from None
    segments = join_segments(pages)
    return Document(content_type="application/pdf", segments=segments, title=title)
