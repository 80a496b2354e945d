"""An exported conversation (``aries history export --format html``) opened in a real Chromium with the
network blocked: the hostile conversation of ``tests/export/hostile.py`` (script and image tags, event
handlers, javascript: and remote links, a style that would hide the page, ESC/OSC sequences, a bidi
override, a fake tool-result block, secrets) shows as text; no request leaves the file, no script
runs, no console error (a CSP violation would be one), and the page is the export's own layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.export import export_conversation, write_export
from tests.browser.conftest import screenshot
from tests.export.hostile import SECRETS, make_workspace, write_conversation

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.slow]

INSPECT = """() => ({
    scripts: document.scripts.length,
    images: document.images.length,
    links: document.links.length,
    frames: document.querySelectorAll('iframe,frame,object,embed,form,base,svg').length,
    styles: document.querySelectorAll('style').length,
    handlers: [...document.querySelectorAll('*')].flatMap(
        el => [...el.attributes].filter(a => a.name.startsWith('on')).map(a => el.tagName + ' ' + a.name)),
    pwned: typeof window.__pwned === 'undefined' ? null : String(window.__pwned),
    entries: document.querySelectorAll('article.entry').length,
    visible: getComputedStyle(document.body).display !== 'none',
    text: document.body.innerText,
    csp: document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.content ?? null,
})"""


async def test_the_exported_html_is_inert_offline(browser: Any, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, "shared")
    conversation_id, _ = await write_conversation(workspace)
    path = write_export(export_conversation(workspace, conversation_id, "html"), tmp_path / "export.html")
    url = path.as_uri()
    requests: list[str] = []
    blocked: list[str] = []
    console: list[tuple[str, str]] = []
    errors: list[str] = []
    context = await browser.new_context(viewport={"width": 1200, "height": 900}, service_workers="block")
    try:

        async def route(route: Any) -> None:
            if route.request.url == url:
                await route.continue_()
            else:
                blocked.append(route.request.url)
                await route.abort()

        await context.route("**/*", route)
        context.on("request", lambda request: requests.append(request.url))
        page = await context.new_page()
        page.on("console", lambda message: console.append((message.type, message.text)))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("dialog", lambda dialog: errors.append(f"dialog {dialog.message}"))
        await page.goto(url)
        await page.wait_for_timeout(1_000)  # a late onerror, a timer or a meta refresh would have fired
        report = await page.evaluate(INSPECT)
        await screenshot(page, "export-hostile")
    finally:
        await context.close()
    assert [u for u in requests if u != url] == [] and blocked == [], (requests, blocked)
    assert errors == [] and [text for kind, text in console if kind in ("error", "warning")] == []
    assert report["pwned"] is None and report["handlers"] == []
    assert (report["scripts"], report["images"], report["links"], report["frames"], report["styles"]) == (0, 0, 0, 0, 1)
    assert report["entries"] == 6 and report["visible"]
    assert report["csp"] is not None and "default-src 'none'" in report["csp"]
    text = report["text"]
    assert '<script>window.__pwned = "script"</script>' in text and "<U+202E>exe.txt<U+202C>" in text
    assert "\\x1b]0;pwned title\\x07" in text and "\u202e" not in text and "\x1b" not in text
    assert "### Tool call — `builtin:shell:run`" in text  # the fake block, as the text it is
    for secret in SECRETS:
        assert secret not in text
