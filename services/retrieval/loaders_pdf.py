"""The PDF loader (pypdf, imported inside the function); one segment per page."""

from __future__ import annotations

from io import BytesIO

from services.retrieval.errors import (
    EmptyDocument,
    EncryptedDocument,
    FileTooLarge,
    MalformedDocument,
    NestingTooDeep,
)
from services.retrieval.loaders_text import clean_title, join_segments
from services.retrieval.models import Document
from services.retrieval.settings import LoaderLimits


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
            title = clean_title(reader.metadata.title if reader.metadata else None)
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
    segments = join_segments(pages)
    return Document(content_type="application/pdf", segments=segments, title=title)
