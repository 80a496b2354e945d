"""``aries serve`` as a real subprocess, and ViewerServer in its thread: the URL, the token, loopback
only, a clean stop on Ctrl+C/SIGTERM, and crash safety of a save (SIGKILL mid-save leaves the old or
the new document, and the next start reindexes what the killed save did not)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.retrieval import RetrievalEngine
from services.retrieval.settings import RetrievalSettings
from services.web.errors import ViewerError
from services.web.viewer import ViewerServer
from services.workspace.manager import WorkspaceManager

REPO = Path(__file__).resolve().parents[2]
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/#token=([A-Za-z0-9_-]+)")
ORIGINAL = "# Guide\n\nLlamas graze on the altiplano.\n"


@pytest.fixture
def workspace_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AXIOMME_EMBEDDER", "hash")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(ORIGINAL, encoding="utf-8")
    (docs / "other.md").write_text("# Other\n\nCondors soar.\n", encoding="utf-8")
    workspace, _ = WorkspaceManager().create("served")
    with RetrievalEngine(workspace, RetrievalSettings.from_env({"AXIOMME_EMBEDDER": "hash"})) as engine:
        engine.index_add(docs, "docs")
    return workspace.root


class Served:
    """One ``aries serve`` process; :attr:`port` and :attr:`token` once it printed its URL."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        full_env = {**os.environ, "PYTHONPATH": str(REPO), "AXIOMME_EMBEDDER": "hash", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "-w", "served", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=full_env,
            cwd=REPO,
        )
        self.port = 0
        self.token = ""

    def wait_for_url(self, timeout: float = 120) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            match = URL.search(line)
            if match:
                self.port, self.token = int(match.group(1)), match.group(2)
                return line
        raise AssertionError(f"no URL printed; stderr: {self.stop_output()}")

    def request(self, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method)
        for name, value in headers.items():
            request.add_header(name.replace("_", "-"), value)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                raw = response.read()
                return response.status, json.loads(
                    raw
                ) if response.headers.get_content_type() == "application/json" else {}
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def stop_output(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        _out, err = self.proc.communicate(timeout=30)
        return err


@pytest.fixture
def served() -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for process in started:
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.communicate(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_aries_serve_prints_the_url_answers_and_stops_cleanly(
    workspace_root: Path, served: list[Served], stop_signal: int
) -> None:
    server = Served()
    served.append(server)
    line = server.wait_for_url()
    assert "served" in line and len(server.token) >= 32
    status, _ = server.request("GET", "/")
    assert status == 200
    assert server.request("GET", "/api/tree")[0] == 401
    status, tree = server.request("GET", "/api/tree", X_Aries_Token=server.token)
    assert status == 200 and {doc["id"] for doc in tree["documents"]} >= {"rag/docs/guide.md", "rag/docs/other.md"}
    server.proc.send_signal(stop_signal)
    assert server.proc.wait(timeout=60) == 0
    assert "reconciling" in server.stop_output()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com", "::"])
def test_aries_serve_refuses_any_host_but_loopback(workspace_root: Path, host: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "app", "serve", "-w", "served", "--host", host],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 2
    assert "127.0.0.1" in proc.stderr and "refusing" in proc.stderr and proc.stdout == ""


def test_viewer_server_in_its_thread(workspace_root: Path) -> None:
    with pytest.raises(ViewerError, match="refusing"):
        ViewerServer(workspace_root, host="0.0.0.0").start()
    server = ViewerServer(workspace_root, token="fixed-token")
    assert not server.running
    server.start()
    try:
        assert server.running and server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}/#token=fixed-token"
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.port}/api/tree", headers={"X-Aries-Token": "fixed-token"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
        busy = ViewerServer(workspace_root, port=server.port)
        with pytest.raises(ViewerError, match="cannot listen"):
            busy.start()
        assert not busy.running
        busy.stop()
    finally:
        server.stop()
        server.stop()  # idempotent
    assert not server.running
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", server.port)) != 0
    assert len(ViewerServer(workspace_root).token) >= 32


def _query(workspace_root: Path, text: str) -> list[str]:
    workspace, _ = WorkspaceManager().open("served")
    with RetrievalEngine(workspace, RetrievalSettings.from_env({"AXIOMME_EMBEDDER": "hash"})) as engine:
        return [hit.text for hit in engine.query(text, k=2, index="docs").hits]


@pytest.mark.slow
def test_sigkill_right_after_the_write_then_the_next_start_reindexes(
    workspace_root: Path, served: list[Served], tmp_path: Path
) -> None:
    guide = tmp_path / "docs" / "guide.md"
    server = Served(env={"ARIES_WEB_SAVE_FAULT": "written"})
    served.append(server)
    server.wait_for_url()
    status, loaded = server.request("GET", "/api/doc?id=rag/docs/guide.md", X_Aries_Token=server.token)
    assert status == 200
    new = "# Guide\n\nPangolins curate the moonlit herbarium.\n"
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        server.request(
            "PUT",
            "/api/doc?id=rag/docs/guide.md",
            {"content": new},
            X_Aries_Token=server.token,
            If_Match=loaded["etag"],
        )
    assert server.proc.wait(timeout=30) == -signal.SIGKILL
    assert guide.read_text() == new  # the write was complete: the new document, whole
    assert not any("Pangolins" in text for text in _query(workspace_root, "pangolins moonlit herbarium"))
    again = Served()
    served.append(again)
    again.wait_for_url()  # the start-up reindexed the document the killed save left pending
    assert any("Pangolins" in text for text in _query(workspace_root, "pangolins moonlit herbarium"))
    assert list((workspace_root / "web" / "pending").glob("*.json")) == []
    again.proc.send_signal(signal.SIGTERM)
    assert again.proc.wait(timeout=60) == 0


@pytest.mark.slow
def test_sigkill_during_a_slow_save_leaves_the_old_or_the_new_document(
    workspace_root: Path, served: list[Served], tmp_path: Path
) -> None:
    guide = tmp_path / "docs" / "guide.md"
    server = Served(env={"ARIES_WEB_REINDEX_DELAY": "30"})
    served.append(server)
    server.wait_for_url()
    _status, loaded = server.request("GET", "/api/doc?id=rag/docs/guide.md", X_Aries_Token=server.token)
    new = "# Guide\n\n" + "Axolotls annotate the tide tables. " * 2000 + "\n"
    outcome: list[Any] = []

    def save() -> None:
        try:
            outcome.append(
                server.request(
                    "PUT",
                    "/api/doc?id=rag/docs/guide.md",
                    {"content": new},
                    X_Aries_Token=server.token,
                    If_Match=loaded["etag"],
                )
            )
        except OSError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=save)
    thread.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the save holds the document: a load says 423
        status, _ = server.request("GET", "/api/doc?id=rag/docs/guide.md", X_Aries_Token=server.token)
        if status == 423:
            break
        time.sleep(0.05)
    assert status == 423
    server.proc.kill()
    thread.join(timeout=30)
    assert outcome and isinstance(outcome[0], OSError)
    assert guide.read_text() in (ORIGINAL, new)
    # Killed inside the atomic write, its temp file may be left; the next start replays the save's
    # pending marker and removes it.
    again = Served()
    served.append(again)
    again.wait_for_url()
    assert guide.read_text() in (ORIGINAL, new)
    assert [p.name for p in guide.parent.iterdir() if p.name.endswith(".tmp")] == []
