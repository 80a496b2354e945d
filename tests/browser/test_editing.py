"""The viewer in a real Chromium, as a user drives it: open a document from the tree, edit, save with
the button and with Ctrl+S, watch the preview and the status, then find the new text with the engine;
two tabs (conflict, lock); an invalid JSON document; a read-only JSONL one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from services.workspace.manager import Workspace
from tests.browser.conftest import CONFIG, NOTES, ROWS, OpenPage, screenshot
from tests.browser.pages import editor_value, open_document, state, type_into_editor, wait_preview, wait_state

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.slow]


def is_put(response: Any) -> bool:
    return bool(response.request.method == "PUT" and "/api/doc" in response.url)


async def save_with(page: Any, how: str) -> Any:
    """Save by clicking ``#save`` or pressing Ctrl+S in the editor; the server's answer."""
    async with page.expect_response(is_put) as answer:
        if how == "click":
            await page.click("#save")
        else:
            await page.locator("#editor").press("Control+s")
    return await answer.value


async def test_open_edit_save_preview_and_search(
    viewer: Any, open_page: OpenPage, workspace: Workspace, tmp_path: Path
) -> None:
    page, guard = await open_page(viewer)
    await open_document(page, "notes.md")
    assert await editor_value(page) == NOTES
    await wait_preview(page, "The heron waits by the weir")
    assert await page.locator("#preview h1").inner_text() == "Field notes"

    edited = NOTES + "\nA zanzibarquokka crossed the weir at noon.\n"
    await type_into_editor(page, edited)
    await wait_preview(page, "zanzibarquokka")  # live, before any save
    response = await save_with(page, "click")
    assert response.status == 200
    sentence = await wait_state(page, "saved")
    assert "saved" in sentence.lower()
    assert (tmp_path / "docs" / "notes.md").read_text(encoding="utf-8") == edited
    await wait_preview(page, "zanzibarquokka")
    await screenshot(page, "viewer-editor")

    from services.retrieval import RetrievalEngine

    with RetrievalEngine(workspace) as engine:
        hits = engine.query("zanzibarquokka", index="docs").hits
    assert hits and hits[0].source_path.endswith("notes.md") and "zanzibarquokka" in hits[0].text

    # Ctrl+S, a second edit of the same document (its new etag in hand).
    again = edited + "\n## Evening\n\nThe heron left with a pelicanmoth.\n"
    await type_into_editor(page, again)
    await wait_preview(page, "pelicanmoth")
    response = await save_with(page, "ctrl+s")
    assert response.status == 200
    await wait_state(page, "saved")
    assert (tmp_path / "docs" / "notes.md").read_text(encoding="utf-8") == again
    assert await page.locator("#preview h2").inner_text() == "Evening"
    with RetrievalEngine(workspace) as engine:
        hits = engine.query("pelicanmoth", index="docs").hits
    assert hits and "pelicanmoth" in hits[0].text
    assert page.url.startswith(viewer.url.split("#")[0])  # Ctrl+S never left the page
    guard.assert_clean()


async def test_second_tab_saves_first_so_the_first_gets_the_conflict(
    viewer: Any, open_page: OpenPage, tmp_path: Path
) -> None:
    first, guard = await open_page(viewer)
    second, _ = await open_page(viewer, tab_of=first)
    await open_document(first, "notes.md")
    await open_document(second, "notes.md")

    await type_into_editor(second, "# Second tab\n\nsaved first\n")
    assert (await save_with(second, "click")).status == 200
    await wait_state(second, "saved")

    await type_into_editor(first, "# First tab\n\nsaved second\n")
    response = await save_with(first, "click")
    assert response.status == 412
    sentence = await wait_state(first, "conflict")
    assert re.search(r"chang", sentence, re.I) and re.search(r"reload", sentence, re.I), sentence
    assert (tmp_path / "docs" / "notes.md").read_text(encoding="utf-8") == "# Second tab\n\nsaved first\n"
    assert await editor_value(first) == "# First tab\n\nsaved second\n"  # the user's text is not thrown away
    await screenshot(first, "conflict")
    guard.assert_clean()


async def test_a_save_during_a_slow_reindex_gets_the_lock_message(
    viewer_factory: Any, open_page: OpenPage, tmp_path: Path
) -> None:
    viewer = viewer_factory(reindex_delay=3.0)
    first, guard = await open_page(viewer)
    second, _ = await open_page(viewer, tab_of=first)
    await open_document(first, "notes.md")
    await open_document(second, "notes.md")
    target = tmp_path / "docs" / "notes.md"

    await type_into_editor(second, "# Second tab\n\nslow save\n")
    await type_into_editor(first, "# First tab\n\nduring the reindex\n")
    async with second.expect_response(is_put) as slow:
        await second.click("#save")
        # The write lands first; the reindex (slowed by 3 s) then holds the document's lock.
        for _ in range(100):
            if target.read_text(encoding="utf-8") == "# Second tab\n\nslow save\n":
                break
            await first.wait_for_timeout(50)
        response = await save_with(first, "click")
        assert response.status == 423
        assert response.headers.get("retry-after")
        sentence = await wait_state(first, "locked")
        assert re.search(r"try again", sentence, re.I), sentence
        await screenshot(first, "locked")
    assert (await slow.value).status == 200
    await wait_state(second, "saved")
    assert target.read_text(encoding="utf-8") == "# Second tab\n\nslow save\n"
    guard.assert_clean()


async def test_invalid_json_is_refused_with_line_and_column(viewer: Any, open_page: OpenPage, tmp_path: Path) -> None:
    page, guard = await open_page(viewer)
    await open_document(page, "config.json")
    assert await editor_value(page) == CONFIG
    broken = '{\n  "name": "demo",\n  "retries": \n}\n'  # no value: line 4, column 1
    await type_into_editor(page, broken)
    response = await save_with(page, "click")
    assert response.status == 422
    body = await response.json()
    assert (body["line"], body["column"]) == (4, 1)
    sentence = await wait_state(page, "invalid")
    assert re.search(r"line 4\b", sentence, re.I) and re.search(r"column 1\b", sentence, re.I), sentence
    assert (tmp_path / "docs" / "config.json").read_text(encoding="utf-8") == CONFIG
    await screenshot(page, "invalid-json")

    fixed = '{\n  "name": "demo",\n  "retries": 5\n}\n'
    await type_into_editor(page, fixed)
    assert (await save_with(page, "ctrl+s")).status == 200
    await wait_state(page, "saved")
    assert (tmp_path / "docs" / "config.json").read_text(encoding="utf-8") == fixed
    guard.assert_clean()


async def test_a_read_only_jsonl_document_cannot_be_saved(viewer: Any, open_page: OpenPage, tmp_path: Path) -> None:
    page, guard = await open_page(viewer)
    await open_document(page, "rows.jsonl", state="readonly")
    assert await editor_value(page) == ROWS
    assert not await page.locator("#editor").is_editable()
    await page.locator("#editor").press("Control+s")
    if await page.locator("#save").is_enabled():
        await page.click("#save")
    await page.wait_for_timeout(500)
    assert await state(page) == "readonly"
    assert guard.puts() == []  # the page did not even try
    await screenshot(page, "readonly")

    # Nor does the server take it from a page that tries anyway (the token is the page's own).
    status = await page.evaluate(
        """async () => {
            const token = new URLSearchParams(location.hash.slice(1)).get('token');
            const id = document.querySelector('#tree [data-doc-id$="/rows.jsonl"]').dataset.docId;
            const url = '/api/doc?id=' + encodeURIComponent(id);
            const doc = await fetch(url, {headers: {'X-Aries-Token': token}});
            const etag = doc.headers.get('ETag');
            const put = await fetch(url, {method: 'PUT', body: JSON.stringify({content: 'overwritten\\n'}),
                headers: {'X-Aries-Token': token, 'If-Match': etag, 'Content-Type': 'application/json'}});
            return put.status;
        }"""
    )
    assert status >= 400
    assert (tmp_path / "docs" / "rows.jsonl").read_text(encoding="utf-8") == ROWS
    guard.assert_clean()


async def test_unsaved_text_is_not_dropped_by_one_click(viewer: Any, open_page: OpenPage, tmp_path: Path) -> None:
    """With unsaved text, opening another document first says so and keeps the text; a second click
    on it discards the changes; the Save button is off until the text changes."""
    page, guard = await open_page(viewer)
    await open_document(page, "notes.md")
    assert not await page.locator("#save").is_enabled()  # nothing to save yet
    edited = NOTES + "\nAn unsaved line about a marmotfinch.\n"
    await type_into_editor(page, edited)
    assert await page.locator("#save").is_enabled()

    await page.click('#tree [data-doc-id$="/config.json"]')
    sentence = await wait_state(page, "unsaved")
    assert "notes.md" in sentence and "again" in sentence
    assert await editor_value(page) == edited  # still there, still the same document
    assert "notes.md" in await page.locator("#doc-title").inner_text()

    await open_document(page, "config.json")  # the second click: changes discarded on purpose
    assert await editor_value(page) == CONFIG
    assert (tmp_path / "docs" / "notes.md").read_text(encoding="utf-8") == NOTES  # never saved
    assert guard.puts() == []
    guard.assert_clean()
