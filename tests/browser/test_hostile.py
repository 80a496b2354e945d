"""A hostile Markdown document (tests/browser/hostile.md: script tags, event handlers, javascript:,
vbscript: and data: links, remote images, SVG with script, iframes, meta refresh, style with url(),
object/embed/form/base) rendered by the viewer in a real Chromium: nothing runs, no dialog opens, the
page stays where it is, and no request leaves 127.0.0.1:PORT — whether opened from the tree or typed
into the editor (the live preview)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import HOSTILE, Guard, OpenPage, screenshot
from tests.browser.pages import editor_value, open_document, type_into_editor, wait_preview

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.slow]

LAST_LINE = "The last line of the hostile document."

# What the rendered preview must not hold, checked in the page itself.
INSPECT = """() => {
    const preview = document.querySelector('#preview');
    const found = [];
    if (!preview) return {found: ['#preview is gone: ' + location.href], pwned: null, title: document.title,
                          visible: false, bodyBackground: 'none'};
    const banned = 'script,iframe,frame,object,embed,style,link,meta,base,form,input,button,svg,math';
    for (const el of preview.querySelectorAll(banned)) found.push('element ' + el.tagName.toLowerCase());
    for (const el of preview.querySelectorAll('*')) {
        for (const attr of el.attributes) {
            const name = attr.name.toLowerCase();
            const value = attr.value.trim().toLowerCase();
            if (name.startsWith('on')) found.push('handler ' + name + ' on ' + el.tagName.toLowerCase());
            if (name === 'style' || name === 'srcdoc' || name === 'formaction') found.push('attribute ' + name);
            if (['href', 'src', 'xlink:href', 'action', 'data', 'poster', 'background'].includes(name)) {
                if (/^(javascript|vbscript|data:text)/.test(value.replace(/\\s/g, ''))) found.push(name + '=' + value);
                if (/^(https?:)?\\/\\//.test(value) && !value.includes('127.0.0.1')) {
                    if (el.tagName !== 'A') found.push('remote ' + name + '=' + value);
                }
            }
        }
    }
    return {
        found,
        pwned: typeof window.__pwned === 'undefined' ? null : String(window.__pwned),
        title: document.title,
        visible: getComputedStyle(preview).display !== 'none' && preview.getClientRects().length > 0,
        bodyBackground: getComputedStyle(document.body).backgroundImage,
    };
}"""


async def poke(page: Any) -> None:
    """Do what a reader would: click every link, hover and click every element of the preview."""
    links = page.locator("#preview a")
    for index in range(await links.count()):
        link = links.nth(index)
        href = (await link.get_attribute("href")) or ""
        if href.startswith(("http:", "https:", "//")):
            continue  # a real remote link would navigate (and be caught); the hostile ones are the others
        await link.click(timeout=2_000, no_wait_after=True)
    for selector in ("#preview div", "#preview summary", "#preview p", "#preview img"):
        items = page.locator(selector)
        for index in range(min(await items.count(), 20)):
            item = items.nth(index)
            if await item.is_visible():
                await item.hover(timeout=2_000)
                if selector != "#preview p":  # a paragraph's centre may be a (legitimate) remote link
                    await item.click(timeout=2_000, no_wait_after=True)
    await page.wait_for_timeout(1_000)  # a meta refresh, a late onerror or a timer would have fired


async def check_inert(page: Any, guard: Guard, title: str) -> None:
    report = await page.evaluate(INSPECT)
    guard.assert_clean()
    assert report["pwned"] is None, f"the hostile document ran code: {report['pwned']}"
    assert report["title"] == title
    assert report["found"] == [], report["found"]
    assert report["visible"], "the document's <style> hid the preview"
    assert report["bodyBackground"] in ("none", ""), report["bodyBackground"]


async def test_a_hostile_document_renders_inert(viewer: Any, open_page: OpenPage) -> None:
    page, guard = await open_page(viewer)
    title = await page.title()
    await open_document(page, "hostile.md")
    assert await editor_value(page) == HOSTILE  # the editor shows the source as text
    await wait_preview(page, LAST_LINE)
    await page.wait_for_timeout(500)
    await screenshot(page, "hostile")
    await check_inert(page, guard, title)
    await poke(page)
    await check_inert(page, guard, title)
    assert page.url.split("#")[0] == viewer.url.split("#")[0]


async def test_hostile_text_typed_into_the_editor_stays_inert(viewer: Any, open_page: OpenPage) -> None:
    page, guard = await open_page(viewer)
    title = await page.title()
    await open_document(page, "notes.md")
    await type_into_editor(page, HOSTILE.replace(LAST_LINE, "Typed, not opened."))
    await wait_preview(page, "Typed, not opened.")  # the live preview rendered it
    await page.wait_for_timeout(500)
    await check_inert(page, guard, title)
    await poke(page)
    await check_inert(page, guard, title)
