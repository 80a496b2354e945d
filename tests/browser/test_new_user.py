"""The issue's acceptance, as a new user does it: ``aries serve -w web`` (a real subprocess), open the
printed URL in Chromium, edit and save a Markdown file, then ``aries rag query`` finds the new text;
Ctrl+C stops the server with exit 0."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from services.workspace.manager import Workspace
from tests.browser.conftest import NOTES, REPO_ROOT, OpenPage, screenshot
from tests.browser.pages import editor_value, open_document, type_into_editor, wait_preview, wait_state

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.slow]
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/#token=\S+")


def aries(*args: str, **options: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "AXIOMME_EMBEDDER": "hash"}
    return subprocess.Popen(
        [sys.executable, "-m", "app", *args],
        text=True,
        env=env,
        cwd=REPO_ROOT,
        **options,  # type: ignore[call-overload]
    )


def printed_url(proc: subprocess.Popen[str], timeout: float = 120) -> re.Match[str]:
    """The URL ``aries serve`` prints on stdout (read in a thread: readline has no timeout)."""
    found: list[re.Match[str]] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            match = URL.search(line)
            if match:
                found.append(match)
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    assert found, f"aries serve printed no URL (exit {proc.poll()})"
    return found[0]


async def test_aries_serve_edit_in_chromium_then_aries_rag_query_finds_it(
    workspace: Workspace, open_page: OpenPage, tmp_path: Path
) -> None:
    server = aries("serve", "-w", workspace.name, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        match = printed_url(server)
        page, guard = await open_page(SimpleNamespace(port=int(match.group(1)), url=match.group(0)))
        await open_document(page, "notes.md")
        assert await editor_value(page) == NOTES
        edited = NOTES + "\nAn ocelotbanjo played by the weir.\n"
        await type_into_editor(page, edited)
        await wait_preview(page, "ocelotbanjo")
        await page.click("#save")
        await wait_state(page, "saved")
        await screenshot(page, "aries-serve-saved")
        assert (tmp_path / "docs" / "notes.md").read_text(encoding="utf-8") == edited
        guard.assert_clean()

        query = aries(
            "-w",
            workspace.name,
            "rag",
            "query",
            "ocelotbanjo",
            "--json",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = query.communicate(timeout=120)
        assert query.returncode == 0, err
        hits = json.loads(out)["hits"]
        assert hits and "ocelotbanjo" in hits[0]["text"] and hits[0]["source_path"].endswith("notes.md")
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
        try:
            server.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()
    assert server.returncode == 0
