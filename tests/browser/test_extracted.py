"""PDF, HTML and EPUB documents of the index in a real Chromium (issue 24): listed in the tree beside the
Markdown, opened read-only with the text indexing extracted from them, page by page or section by
section; the page offers no save."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.workspace.manager import Workspace
from tests.browser.conftest import OpenPage, screenshot
from tests.browser.pages import editor_value, open_document, state

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.slow]


@pytest.fixture
def extracted(workspace: Workspace, tmp_path: Path) -> Path:
    """The fixture's ``docs`` folder with a PDF, an HTML page and an EPUB added to its index."""
    from services.retrieval import RetrievalEngine
    from tests.retrieval.builders import make_epub, make_pdf

    docs = tmp_path / "docs"
    (docs / "report.pdf").write_bytes(make_pdf(["Herons wait by the weir.", "Egrets follow the plough."]))
    (docs / "page.html").write_text(
        "<html><body><h1>Kingfishers</h1><p>They dive for minnows.</p></body></html>", encoding="utf-8"
    )
    make_epub(docs / "book.epub", [("Owls", "<p>Owls hunt at dusk.</p>")])
    with RetrievalEngine(workspace) as engine:
        engine.index_add(str(docs), "docs")
    return docs


async def test_pdf_html_and_epub_open_read_only_with_their_extracted_text(
    extracted: Path, viewer: Any, open_page: OpenPage
) -> None:
    page, guard = await open_page(viewer)
    for name in ("report.pdf", "page.html", "book.epub", "notes.md"):
        assert await page.locator(f'#tree [data-doc-id$="/{name}"]').count() == 1, name

    await open_document(page, "report.pdf", state="readonly")
    text = await editor_value(page)
    assert text == "[page 1]\nHerons wait by the weir.\n\n[page 2]\nEgrets follow the plough.\n"
    assert not await page.locator("#editor").is_editable()
    assert (await page.text_content("#doc-kind") or "").lower() == "pdf · read-only"  # CSS upper-cases it
    assert "extracted" in await page.inner_text("#status")
    await screenshot(page, "extracted-pdf")

    await open_document(page, "page.html", state="readonly")
    assert "[Kingfishers]" in await editor_value(page) and "They dive for minnows." in await editor_value(page)
    await open_document(page, "book.epub", state="readonly")
    assert "Owls hunt at dusk." in await editor_value(page)
    await page.locator("#editor").press("Control+s")
    assert await state(page) == "readonly" and guard.puts() == []
    assert (extracted / "report.pdf").read_bytes().startswith(b"%PDF")
    guard.assert_clean()
