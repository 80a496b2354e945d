"""``/serve`` in the TUI, as a user tries it: the URL appears in the transcript and the header and
answers with the viewer's page; ``/serve status`` repeats it; ``/serve stop`` stops the server; the
palette command toggles it; switching the workspace and quitting stop it (the port is closed)."""

from __future__ import annotations

import re
import socket
import urllib.request
from typing import Any

from textual.command import CommandPalette
from textual.pilot import Pilot

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import Messages, palette_offers, until
from tests.tui.helpers import command as typed

SIZE = (160, 48)
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/#token=([A-Za-z0-9_\-]+)")


async def command(pilot: Pilot[int], line: str) -> None:
    await typed(pilot, line)
    await pilot.pause()


def notices(app: AriesApp) -> list[str]:
    assert app.session is not None
    return [str(e["content"]) for e in app.session.conversation.read().entries if e["role"] == "notice"]


def last_url(app: AriesApp) -> re.Match[str] | None:
    found = [URL.search(text) for text in notices(app)]
    return next((match for match in reversed(found) if match), None)


def page(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:  # the page itself needs no token
        return response.status, response.read().decode("utf-8")


def port_closed(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) != 0


async def test_serve_prints_a_url_that_answers_then_stop_stops_it() -> None:
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await command(pilot, "/serve")
        await until(pilot, lambda: last_url(app) is not None)
        match = last_url(app)
        assert match is not None
        port = int(match.group(1))
        status, body = page(match.group(0))
        assert status == 200 and 'id="editor"' in body and 'id="tree"' in body
        assert f"web http://127.0.0.1:{port}/" in app.header_text()
        assert app.commands.serve.running
        assert app.clipboard == app.commands.serve.server.url and "#token=" in app.clipboard  # type: ignore[union-attr]

        await command(pilot, "/serve status")
        await until(pilot, lambda: "serves workspace demo" in notices(app)[-1])
        assert match.group(0) in notices(app)[-1]

        await command(pilot, "/serve stop")
        await until(pilot, lambda: "stopped" in notices(app)[-1])
        assert not app.commands.serve.running and port_closed(port)
        assert "web http" not in app.header_text()

        await command(pilot, "/serve status")
        await until(pilot, lambda: "not running" in notices(app)[-1])
        await command(pilot, "/serve bogus")
        await messages.notified(pilot, "cannot read '/serve bogus'")


async def test_the_palette_toggles_it_and_a_workspace_switch_stops_it() -> None:
    WorkspaceManager().create("demo")
    WorkspaceManager().create("other")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.press(*"start/stop the web viewer")
        await until(pilot, lambda: palette_offers(app, "start/stop the web viewer"), what="the palette's hit")
        await pilot.press("enter")
        await until(pilot, lambda: app.commands.serve.running and last_url(app) is not None)
        match = last_url(app)
        assert match is not None
        port = int(match.group(1))
        assert page(match.group(0))[0] == 200

        await app.open_workspace("other")
        await until(pilot, lambda: port_closed(port))
        assert not app.commands.serve.running
        assert "web http" not in app.header_text()


async def test_quitting_stops_the_server() -> None:
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await command(pilot, "/serve start")
        await until(pilot, lambda: app.commands.serve.running)
        server = app.commands.serve.server
        assert server is not None
        port = server.port
        assert page(server.url)[0] == 200
        await command(pilot, "/quit")
    assert not server.running and port_closed(port)


def api(url: str, token: str, method: str = "GET", body: Any = None, **headers: str) -> tuple[int, Any, str]:
    import json

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("X-Aries-Token", token)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    for name, value in headers.items():
        request.add_header(name.replace("_", "-"), value)
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status, json.loads(response.read()), response.headers.get("ETag", "")


async def test_a_save_through_the_served_page_is_found_by_the_tuis_own_engine(tmp_path: Any) -> None:
    """The TUI's session keeps its engine open while the server (same process, own engine) saves and
    reindexes: the TUI's next query sees the new text."""
    import urllib.parse

    workspace, _ = WorkspaceManager().create("demo")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nThe heron waits.\n", encoding="utf-8")
    from services.retrieval import RetrievalEngine

    with RetrievalEngine(workspace) as engine:
        engine.index_add(str(docs), "docs")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        session = app.session
        assert session is not None
        before = session.engine().query("quetzalkite", index="docs").hits  # the engine is open before the save
        assert not any("quetzalkite" in hit.text for hit in before)
        await command(pilot, "/serve")
        await until(pilot, lambda: app.commands.serve.running)
        server = app.commands.serve.server
        assert server is not None
        base = f"http://127.0.0.1:{server.port}"
        _, tree, _ = api(f"{base}/api/tree", server.token)
        doc_id = next(d["id"] for d in tree["documents"] if d["path"].endswith("notes.md"))
        doc_url = f"{base}/api/doc?id={urllib.parse.quote(doc_id)}"
        _, _, etag = api(doc_url, server.token)
        content = "# Notes\n\nThe heron waits for a quetzalkite.\n"
        status, _, _ = api(doc_url, server.token, "PUT", {"content": content}, If_Match=etag)
        assert status == 200
        hits = session.engine().query("quetzalkite", index="docs").hits
        assert hits and "quetzalkite" in hits[0].text and hits[0].bm25_rank == 1
        await command(pilot, "/serve stop")
        await until(pilot, lambda: not app.commands.serve.running)


def _viewer_threads() -> list[str]:
    import threading

    return sorted(t.name for t in threading.enumerate() if t.name.startswith("aries-web") and t.is_alive())


def _spy_close(engine: Any, monkeypatch: Any) -> list[list[str]]:
    """Record, when the engine is closed (it still closes), which viewer threads are alive."""
    seen: list[list[str]] = []
    close = engine.close

    def closing() -> None:
        seen.append(_viewer_threads())
        close()

    monkeypatch.setattr(engine, "close", closing)
    return seen


async def test_the_viewer_shares_the_sessions_engine_and_stops_before_it_closes(monkeypatch: Any) -> None:
    """``/serve`` hands the viewer the session's own engine (no second one in the TUI process); a
    workspace switch stops the viewer — its threads joined — before the old session closes that engine."""
    WorkspaceManager().create("demo")
    WorkspaceManager().create("other")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        session = app.session
        assert session is not None
        await command(pilot, "/serve")
        await until(pilot, lambda: app.commands.serve.running)
        server = app.commands.serve.server
        assert server is not None and server.engine is session.engine()
        assert _viewer_threads()
        seen = _spy_close(session.engine(), monkeypatch)
        await app.open_workspace("other")
        assert seen == [[]]  # closed once, after every viewer thread ended
        assert session.closed and not server.running and port_closed(server.port)


async def test_a_switch_while_the_viewer_starts_stops_it_before_the_engine_closes(monkeypatch: Any) -> None:
    """A start still in flight (binding, reconciling on the session's engine) when the workspace is
    switched: the switch waits for it and stops it, so the old engine is closed with no viewer on it,
    and no viewer is left serving the old workspace."""
    WorkspaceManager().create("demo")
    WorkspaceManager().create("other")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        session = app.session
        assert session is not None
        seen = _spy_close(session.engine(), monkeypatch)
        app.commands.serve.start()
        await pilot.pause()
        await app.open_workspace("other")
        assert seen == [[]]
        await pilot.pause()
        assert app.commands.serve.server is None and _viewer_threads() == []
