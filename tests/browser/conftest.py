"""Real-browser tests of the web viewer: Playwright's Python client driving Debian's Chromium.

- ``browser``: one headless Chromium per xdist worker (session scope, on the session's event loop:
  the sync API would leave its loop marked as running and break the async tests sharing the worker).
  It is ``/usr/bin/chromium`` (Debian's ``chromium`` package, or ``ARIES_CHROMIUM``); Playwright's own
  browser download is never used. ``launch()`` gives it a fresh temporary profile (user-data dir) that
  Playwright deletes when it closes. Without playwright or Chromium the tests skip with one line;
  with ``ARIES_REQUIRE_BROWSER=1`` (``.ci/run`` sets it when Chromium is installed) they fail instead.
- ``viewer``: a real ``ViewerServer`` on a temp workspace whose ``docs`` index is built with the hash
  embedder; ``viewer_factory(reindex_delay=…)`` for a slow save.
- ``open_page()``: a page in its own browser context whose every request, console message, page
  error and dialog is recorded by a :class:`Guard` (``open_page(server, tab_of=page)``: a second tab
  of the same context, same guard); requests anywhere but ``127.0.0.1:PORT`` are
  aborted and recorded, and ``guard.assert_clean()`` fails the test on any of them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from services.workspace.manager import Workspace, WorkspaceManager

REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO_ROOT / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

NOTES = "# Field notes\n\nThe heron waits by the weir at dawn.\n\n- first\n- second\n"
CONFIG = '{\n  "name": "demo",\n  "retries": 3\n}\n'
ROWS = '{"id": 1, "text": "alpha"}\n{"id": 2, "text": "beta"}\n'
HOSTILE = Path(__file__).with_name("hostile.md").read_text(encoding="utf-8")


def chromium_path() -> tuple[str | None, str]:
    """The Chromium to drive, or None and why not."""
    explicit = os.environ.get("ARIES_CHROMIUM")
    if explicit:
        return (explicit, "") if Path(explicit).is_file() else (None, f"ARIES_CHROMIUM={explicit} is not a file")
    for candidate in ("/usr/bin/chromium", shutil.which("chromium") or ""):
        if candidate and Path(candidate).is_file():
            return candidate, ""
    return None, "Chromium is not installed (apt-get install chromium; see the README)"


def _unavailable(reason: str) -> None:
    if os.environ.get("ARIES_REQUIRE_BROWSER") == "1":
        pytest.fail(f"ARIES_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Any]:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]')")
    executable, why = chromium_path()
    if executable is None:
        _unavailable(why)
    async with async_playwright() as playwright:
        try:
            launched = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        except Exception as exc:  # a broken or incompatible Chromium: one line, not a traceback
            _unavailable(f"Chromium at {executable} did not start: {str(exc).splitlines()[0]}")
        try:
            yield launched
        finally:
            await launched.close()


# -- the workspace and the server -----------------------------------------------------------------
@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """A workspace whose ``docs`` index (hash embedder) holds Markdown, JSON, JSONL and a hostile page."""
    workspace, _ = WorkspaceManager().create("web")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text(NOTES, encoding="utf-8")
    (docs / "config.json").write_text(CONFIG, encoding="utf-8")
    (docs / "rows.jsonl").write_text(ROWS, encoding="utf-8")
    (docs / "hostile.md").write_text(HOSTILE, encoding="utf-8")
    from services.retrieval import RetrievalEngine

    with RetrievalEngine(workspace) as engine:
        engine.index_add(str(docs), "docs")
    return workspace


@pytest.fixture
def viewer_factory(workspace: Workspace) -> Iterator[Callable[..., Any]]:
    from services.web.viewer import ViewerServer

    started: list[ViewerServer] = []

    def start(**options: Any) -> ViewerServer:
        server = ViewerServer(workspace.root, **options)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def viewer(viewer_factory: Callable[..., Any]) -> Any:
    return viewer_factory()


# -- pages under guard ----------------------------------------------------------------------------
@dataclass
class Guard:
    """Everything one browser context did: requests, console, page errors, dialogs."""

    origin: str
    requests: list[tuple[str, str]] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    navigations: list[str] = field(default_factory=list)
    responses: list[tuple[int, str]] = field(default_factory=list)

    def local(self, url: str) -> bool:
        return url.startswith(self.origin + "/") or url == self.origin or url.startswith("data:")

    def puts(self) -> list[str]:
        return [url for method, url in self.requests if method == "PUT"]

    def assert_clean(self) -> None:
        outside = [url for _, url in self.requests if not self.local(url)]
        assert not outside, f"requests (made or attempted) to other hosts than {self.origin}: {outside}"
        assert not self.blocked, f"requests blocked: {self.blocked}"
        assert not self.errors, f"page errors: {self.errors}"
        assert not self.dialogs, f"dialogs opened: {self.dialogs}"
        foreign = [url for url in self.navigations if not self.local(url)]
        assert not foreign, f"the page navigated away: {foreign}"
        # CSP reports and script errors are console errors; an expected failed request (a 412/423/422
        # answer) is logged by Chromium as "Failed to load resource" and is not one of them.
        bad = [text for kind, text in self.console if kind == "error" and "Failed to load resource" not in text]
        assert not bad, f"console errors: {bad}"
        # A header the browser does not understand (a Permissions-Policy feature, a CSP directive) is
        # a warning; the page asks for nothing that is not there (a favicon, an asset): no 404, no 5xx.
        headers = ("Permissions-Policy", "Content-Security-Policy", "Content Security Policy")
        warned = [text for kind, text in self.console if kind == "warning" and any(h in text for h in headers)]
        assert not warned, f"header warnings: {warned}"
        missing = [(status, url) for status, url in self.responses if status == 404 or status >= 500]
        assert not missing, f"failed loads: {missing}"


OpenPage = Callable[..., Awaitable[tuple[Any, Guard]]]


@pytest_asyncio.fixture(loop_scope="session")
async def open_page(browser: Any) -> AsyncIterator[OpenPage]:
    """``page, guard = await open_page(server)``: a new context and page at the server's URL."""
    contexts: list[Any] = []

    guards: dict[int, Guard] = {}

    async def open_one(server: Any, *, tab_of: Any = None, wait_tree: bool = True) -> tuple[Any, Guard]:
        """A page in a new context, or (``tab_of=page``) another tab of that page's context, whose
        guard it shares."""
        if tab_of is not None:
            guard = guards[id(tab_of.context)]
            page = await tab_of.context.new_page()
            watch(page, guard)
            await page.goto(server.url)
            if wait_tree:
                await page.wait_for_selector("#tree [data-doc-id]")
            return page, guard
        origin = f"http://127.0.0.1:{server.port}"
        guard = Guard(origin)
        context = await browser.new_context(viewport={"width": 1280, "height": 800}, service_workers="block")
        contexts.append(context)
        guards[id(context)] = guard

        async def route(route: Any) -> None:
            url = route.request.url
            if guard.local(url):
                await route.continue_()
            else:
                guard.blocked.append(url)
                await route.abort()

        await context.route("**/*", route)
        context.on("request", lambda request: guard.requests.append((request.method, request.url)))
        context.on("response", lambda response: guard.responses.append((response.status, response.url)))
        context.on("page", lambda opened: watch(opened, guard))  # a popup is watched too
        page = await context.new_page()
        watch(page, guard)  # (the "page" event may come after new_page() returns)
        await page.goto(server.url)
        if wait_tree:
            await page.wait_for_selector("#tree [data-doc-id]")
        return page, guard

    def watch(page: Any, guard: Guard) -> None:
        if getattr(page, "_aries_watched", False):
            return
        page._aries_watched = True
        page.on("console", lambda message: guard.console.append((message.type, message.text)))
        page.on("pageerror", lambda error: guard.errors.append(str(error)))

        async def dialog(opened: Any) -> None:
            guard.dialogs.append(f"{opened.type}: {opened.message}")
            await opened.dismiss()

        page.on("dialog", dialog)
        page.on("framenavigated", lambda frame: guard.navigations.append(frame.url))

    yield open_one
    for context in contexts:
        await context.close()


async def screenshot(page: Any, name: str) -> Path:
    """Save a full-page PNG into ``test-artifacts/screenshots/`` (git-ignored; CI keeps the folder)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    with tempfile.NamedTemporaryFile(dir=SCREENSHOTS, suffix=".png.tmp", delete=False) as handle:
        temporary = Path(handle.name)
    await page.screenshot(path=str(temporary), full_page=True, type="png")
    temporary.chmod(0o644)
    temporary.replace(path)  # two xdist workers never leave a half-written PNG
    return path
