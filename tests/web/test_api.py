"""The viewer's HTTP API through aiohttp's test client on a real loopback server: every status code,
every header, the checks on Host/Origin/token, the save path (etag, lock, validation) and that a save
really reindexes (a query finds the new text once the PUT has returned)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import Any

import pytest

from services.context.uri import AxiomUri
from services.web.app import CSP, MAX_BODY_BYTES, STATIC_DIR
from tests.web.conftest import TOKEN, Env

AUTH = {"X-Aries-Token": TOKEN}
SECURITY = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def _check_headers(response: Any, *, api: bool) -> None:
    for name, value in SECURITY.items():
        assert response.headers.get(name) == value, name
    policy = response.headers["Permissions-Policy"]
    for feature in ("camera=()", "microphone=()", "geolocation=()"):
        assert feature in policy
    if api:
        assert response.headers["Cache-Control"] == "no-store"


async def _load(client: Any, doc_id: str) -> dict[str, Any]:
    response = await client.get("/api/doc", params={"id": doc_id}, headers=AUTH)
    assert response.status == 200, await response.text()
    body: dict[str, Any] = await response.json()
    assert response.headers["ETag"] == f'"{body["etag"]}"'
    return body


async def _put(client: Any, doc_id: str, content: str, etag: str | None, **headers: str) -> Any:
    sent = {**AUTH, **headers}
    if etag is not None:
        sent["If-Match"] = f'"{etag}"'
    return await client.put("/api/doc", params={"id": doc_id}, json={"content": content}, headers=sent)


# -- the page --------------------------------------------------------------------------------------
async def test_page_and_static_files_carry_the_headers(served: Any) -> None:
    client, _state = served
    page = await client.get("/")
    assert page.status == 200 and page.content_type == "text/html"
    _check_headers(page, api=False)
    html = await page.text()
    for dom_id in ("tree", "editor", "save", "preview", "status", "doc-title"):
        assert f'id="{dom_id}"' in html
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
        response = await client.get(f"/static/{name}")
        assert response.status == 200 and response.content_type == kind
        _check_headers(response, api=False)
    missing = await client.get("/static/..%2Fviewer.py")
    assert missing.status == 404
    _check_headers(missing, api=False)


def test_the_page_has_no_inline_script_style_or_remote_asset() -> None:
    html = (STATIC_DIR / "index.html").read_text()
    assert re.findall(r"<script(?![^>]*\bsrc=)", html) == []
    assert "style=" not in html and "<style" not in html
    assert not re.search(r"\son[a-z]+=", html)
    for name in ("index.html", "app.js", "app.css"):
        text = (STATIC_DIR / name).read_text()
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name


# -- who may ask -----------------------------------------------------------------------------------
async def test_the_api_needs_the_token(served: Any) -> None:
    client, _state = served
    for headers in ({}, {"X-Aries-Token": "wrong"}, {"X-Aries-Token": TOKEN + "x"}):
        response = await client.get("/api/tree", headers=headers)
        assert response.status == 401
        _check_headers(response, api=True)
        assert "token" in (await response.json())["error"]
    ok = await client.get("/api/tree", headers=AUTH)
    assert ok.status == 200
    _check_headers(ok, api=True)


async def test_host_must_name_this_server(served: Any) -> None:
    client, state = served
    for host in ("evil.example:%d", "127.0.0.1:1", "127.0.0.1", "0.0.0.0:%d", "attacker.localhost:%d"):
        value = host % state.port if "%d" in host else host
        for path in ("/", "/api/tree"):
            response = await client.get(path, headers={**AUTH, "Host": value})
            assert response.status == 403, (value, path)
            _check_headers(response, api=path.startswith("/api"))
    for host in ("localhost:%d", "[::1]:%d", "127.0.0.1:%d"):
        response = await client.get("/api/tree", headers={**AUTH, "Host": host % state.port})
        assert response.status == 200, host


async def test_origin_must_be_this_server(served: Any) -> None:
    client, state = served
    for origin in (
        "http://evil.example",
        "null",
        f"http://localhost:{state.port + 1}",
        f"https://127.0.0.1:{state.port}",
    ):
        response = await client.get("/api/tree", headers={**AUTH, "Origin": origin})
        assert response.status == 403, origin
        _check_headers(response, api=True)
        bad_put = await _put(client, "rag/docs/guide.md", "x", "0" * 64, Origin=origin)
        assert bad_put.status == 403
    same = await client.get("/api/tree", headers={**AUTH, "Origin": f"http://127.0.0.1:{state.port}"})
    assert same.status == 200


# -- the tree and loads ----------------------------------------------------------------------------
async def test_the_tree_lists_index_and_context_documents(served: Any) -> None:
    client, _state = served
    response = await client.get("/api/tree", headers=AUTH)
    documents = {doc["id"]: doc for doc in (await response.json())["documents"]}
    expected = {
        "rag/docs/guide.md": ("markdown", True),
        "rag/docs/config.json": ("json", True),
        "rag/docs/settings.yaml": ("yaml", True),
        "rag/docs/notes.txt": ("txt", False),
        "rag/docs/events.jsonl": ("jsonl", False),
        "rag/docs/feed.xml": ("xml", False),
        "rag/docs/sub/deep.md": ("markdown", True),
        "axiom://resources/notes.md": ("markdown", True),
        "axiom://user/prefs.yaml": ("yaml", True),
    }
    for doc_id, (kind, editable) in expected.items():
        assert documents[doc_id]["kind"] == kind and documents[doc_id]["editable"] is editable, doc_id
    assert "rag/docs/image.png" not in documents
    assert "rag/docs/escape.md" not in documents  # a link out of the folder
    assert not any(".abstract" in doc_id or ".overview" in doc_id for doc_id in documents)


async def test_load_returns_the_content_and_the_etag_of_the_bytes_on_disk(served: Any, env: Env) -> None:
    client, _state = served
    body = await _load(client, "rag/docs/guide.md")
    data = (env.docs / "guide.md").read_bytes()
    assert body["content"] == data.decode() and body["etag"] == hashlib.sha256(data).hexdigest()
    assert body["kind"] == "markdown" and body["editable"] is True
    context = await _load(client, "axiom://resources/notes.md")
    assert context["content"] == "# Notes\n\nFirst.\n"


@pytest.mark.parametrize(
    ("doc_id", "status"),
    [
        ("rag/docs/../secret.md", 400),
        ("rag/docs/sub/../../secret.md", 400),
        ("rag/docs//etc/passwd", 400),
        ("rag/docs/.hidden.md", 400),
        ("rag/docs/%2e%2e/secret.md", 400),
        ("rag/../docs/guide.md", 400),
        ("/etc/passwd", 400),
        ("../secret.md", 400),
        ("", 400),
        ("axiom://resources/../user/prefs.yaml", 400),
        ("axiom://resources/%2e%2e/x.md", 400),
        ("rag/docs/escape.md", 404),  # a symlink out of the indexed folder
        ("rag/docs/missing.md", 404),
        ("rag/nope/guide.md", 404),
        ("rag/docs/image.png", 404),
        ("axiom://session/x.md", 404),
        ("axiom://resources/.abstract.md", 404),
        ("axiom://resources/missing.md", 404),
    ],
)
async def test_bad_and_unknown_ids_are_refused_without_a_read(served: Any, doc_id: str, status: int) -> None:
    client, _state = served
    response = await client.get("/api/doc", params={"id": doc_id}, headers=AUTH)
    assert response.status == status, await response.text()
    body = await response.json()
    assert "error" in body and "content" not in body
    assert "never served" not in await response.text()
    _check_headers(response, api=True)
    put = await _put(client, doc_id, "x", "0" * 64)
    assert put.status == status


async def test_a_symlink_into_the_context_tree_from_outside_is_not_served(served: Any, env: Env) -> None:
    client, _state = served
    (env.context.tree.root / "resources" / "leak.md").symlink_to(env.outside)
    response = await client.get("/api/doc", params={"id": "axiom://resources/leak.md"}, headers=AUTH)
    assert response.status == 404
    assert "never served" not in await response.text()


async def test_unknown_routes_and_methods(served: Any) -> None:
    client, _state = served
    missing = await client.get("/api/nothing", headers=AUTH)
    assert missing.status == 404
    _check_headers(missing, api=True)
    wrong = await client.delete("/api/doc", params={"id": "rag/docs/guide.md"}, headers=AUTH)
    assert wrong.status == 405
    _check_headers(wrong, api=True)


# -- saves -----------------------------------------------------------------------------------------
async def test_save_needs_if_match_then_the_current_etag(served: Any, env: Env) -> None:
    client, _state = served
    before = (env.docs / "guide.md").read_bytes()
    missing = await _put(client, "rag/docs/guide.md", "# New\n", None)
    assert missing.status == 428
    _check_headers(missing, api=True)
    stale = await _put(client, "rag/docs/guide.md", "# New\n", "0" * 64)
    assert stale.status == 412
    body = await stale.json()
    assert body["etag"] == hashlib.sha256(before).hexdigest() and "changed" in body["error"]
    assert (env.docs / "guide.md").read_bytes() == before


async def test_a_save_replaces_the_file_and_reindexes_it_before_answering(served: Any, env: Env) -> None:
    client, _state = served
    loaded = await _load(client, "rag/docs/guide.md")
    text = "# Guide\n\nQuokkas photobomb the zebrafish hatchery.\n"
    response = await _put(client, "rag/docs/guide.md", text, loaded["etag"])
    assert response.status == 200, await response.text()
    _check_headers(response, api=True)
    body = await response.json()
    assert body["etag"] == hashlib.sha256(text.encode()).hexdigest()
    assert response.headers["ETag"] == f'"{body["etag"]}"'
    assert body["reindex_ms"] >= 0 and body["save_ms"] >= 0 and body["reindex"]["updated"] == ["guide.md"]
    assert (env.docs / "guide.md").read_text() == text
    hits = env.engine.query("quokkas zebrafish hatchery", k=3, index="docs").hits
    assert hits and hits[0].source_path == "guide.md" and "Quokkas" in hits[0].text
    # the old etag is now stale: a second tab that loaded before gets 412 with the new etag
    again = await _put(client, "rag/docs/guide.md", "# Other\n", loaded["etag"])
    assert again.status == 412 and (await again.json())["etag"] == body["etag"]
    # the rest of the index was left alone
    assert env.engine.query("condors soar", k=1, index="docs").hits[0].source_path == "sub/deep.md"


async def test_a_context_save_goes_through_the_queue_to_the_context_index(served: Any, env: Env) -> None:
    from services.context.search import ContextRetriever

    client, _state = served
    loaded = await _load(client, "axiom://resources/notes.md")
    text = "# Notes\n\nThe wombat ledger balances at midnight.\n"
    response = await _put(client, "axiom://resources/notes.md", text, loaded["etag"])
    assert response.status == 200, await response.text()
    assert env.context.tree.read_text(AxiomUri.root("resources").join("notes.md")) == text
    assert env.context.queue.jobs() == []
    hits = env.engine.query("wombat ledger midnight", k=3, index="context").hits
    assert hits and hits[0].source_path == "resources/notes.md"
    found = ContextRetriever(env.context.tree, env.engine).find("wombat ledger")
    assert any(str(hit.uri) == "axiom://resources/notes.md" for hit in found.hits)


@pytest.mark.parametrize("doc_id", ["rag/docs/notes.txt", "rag/docs/events.jsonl", "rag/docs/feed.xml"])
async def test_read_only_kinds_refuse_a_save_with_405(served: Any, env: Env, doc_id: str) -> None:
    client, _state = served
    loaded = await _load(client, doc_id)
    assert loaded["editable"] is False
    response = await _put(client, doc_id, "changed", loaded["etag"])
    assert response.status == 405
    assert "read-only" in (await response.json())["error"]
    assert (env.docs / doc_id.removeprefix("rag/docs/")).read_text() == loaded["content"]


@pytest.mark.parametrize(
    ("doc_id", "content", "line", "column"),
    [
        ("rag/docs/config.json", '{\n  "name": "aries",\n  "port": ,\n}\n', 3, 11),
        ("rag/docs/settings.yaml", "name: aries\nlevels: [1, 2\nother: x\n", 3, 6),
        ("axiom://user/prefs.yaml", "theme: dark\n  bad: indent: here\n", 2, 6),
    ],
)
async def test_invalid_json_and_yaml_are_refused_with_line_and_column(
    served: Any, doc_id: str, content: str, line: int, column: int
) -> None:
    client, _state = served
    loaded = await _load(client, doc_id)
    response = await _put(client, doc_id, content, loaded["etag"])
    assert response.status == 422
    body = await response.json()
    assert (body["line"], body["column"]) == (line, column), body
    assert (await _load(client, doc_id))["content"] == loaded["content"]
    good = await _put(client, doc_id, '{"ok": true}\n' if doc_id.endswith("json") else "ok: true\n", loaded["etag"])
    assert good.status == 200


async def test_a_body_over_the_cap_is_413(served: Any) -> None:
    client, _state = served
    loaded = await _load(client, "rag/docs/guide.md")
    response = await _put(client, "rag/docs/guide.md", "x" * (MAX_BODY_BYTES + 10), loaded["etag"])
    assert response.status == 413
    _check_headers(response, api=True)
    preview = await client.post("/api/preview", json={"content": "y" * (MAX_BODY_BYTES + 10)}, headers=AUTH)
    assert preview.status == 413


async def test_a_document_being_saved_answers_423_with_retry_after(served: Any, env: Env) -> None:
    client, state = served
    state.reindex_delay = 1.5
    loaded = await _load(client, "rag/docs/guide.md")
    save = asyncio.ensure_future(_put(client, "rag/docs/guide.md", "# Guide\n\nSlow save.\n", loaded["etag"]))
    for _ in range(200):
        if "rag/docs/guide.md" in state.saving:
            break
        await asyncio.sleep(0.01)
    assert "rag/docs/guide.md" in state.saving
    load = await client.get("/api/doc", params={"id": "rag/docs/guide.md"}, headers=AUTH)
    assert load.status == 423 and load.headers["Retry-After"] == "1"
    _check_headers(load, api=True)
    second = await _put(client, "rag/docs/guide.md", "# Other\n", loaded["etag"])
    assert second.status == 423 and second.headers["Retry-After"] == "1"
    other = await client.get("/api/doc", params={"id": "rag/docs/config.json"}, headers=AUTH)
    assert other.status == 200  # only that document is held
    first = await save
    assert first.status == 200
    assert (await _load(client, "rag/docs/guide.md"))["content"] == "# Guide\n\nSlow save.\n"


async def test_loads_and_saves_are_logged_with_their_timings(served: Any, env: Env) -> None:
    client, _state = served
    loaded = await _load(client, "rag/docs/guide.md")
    await _put(client, "rag/docs/guide.md", "# Logged\n", loaded["etag"])
    await _put(client, "rag/docs/guide.md", "# Logged\n", None)
    lines = [json.loads(line) for line in (env.workspace.root / "logs" / "web.ndjson").read_text().splitlines()]
    keys = {"ts", "method", "id", "status", "save_ms", "reindex_ms", "total_ms", "content_bytes"}
    assert all(keys <= set(line) for line in lines)
    assert [(line["method"], line["status"]) for line in lines] == [("GET", 200), ("PUT", 200), ("PUT", 428)]
    assert lines[1]["content_bytes"] == len(b"# Logged\n") and lines[1]["reindex_ms"] > 0
    assert lines[1]["total_ms"] >= lines[1]["save_ms"] + lines[1]["reindex_ms"]


async def test_an_inconsistent_index_is_served_read_only(env: Env) -> None:
    from services.web.documents import DocumentSet

    store = env.engine.indexes.store("docs")
    chunk_id = store.manifest.chunk_ids()[0]
    store.vectors.delete(ids=[chunk_id])  # Chroma loses a chunk the manifest has
    documents = DocumentSet(env.workspace, env.engine, env.context)
    report = documents.reconcile()
    assert "docs" in report["readonly_indexes"]
    doc = documents.resolve("rag/docs/guide.md")
    assert doc.editable is False and doc.note and "NOT consistent" in doc.note


def _add_extracted(env: Env) -> None:
    """A PDF, an HTML page and an EPUB in the indexed folder, indexed (issue 24: the viewer lists them)."""
    from tests.retrieval.builders import make_epub, make_pdf

    (env.docs / "report.pdf").write_bytes(make_pdf(["Herons wait by the weir.", "Egrets follow the plough."]))
    (env.docs / "page.html").write_text(
        "<html><body><h1>Kingfishers</h1><p>They dive for minnows.</p></body></html>", encoding="utf-8"
    )
    make_epub(env.docs / "book.epub", [("Owls", "<p>Owls hunt at dusk.</p>")])
    env.engine.index_add(env.docs, "docs")


async def test_pdf_html_and_epub_are_listed_read_only_with_their_extracted_text(served: Any, env: Env) -> None:
    _add_extracted(env)
    client, _state = served
    response = await client.get("/api/tree", headers=AUTH)
    documents = {doc["id"]: doc for doc in (await response.json())["documents"]}
    for name, kind in (("report.pdf", "pdf"), ("page.html", "html"), ("book.epub", "epub")):
        doc_id = f"rag/docs/{name}"
        assert documents[doc_id]["kind"] == kind and documents[doc_id]["editable"] is False, doc_id
        assert "extracted" in documents[doc_id]["note"]
    pdf = await _load(client, "rag/docs/report.pdf")
    data = (env.docs / "report.pdf").read_bytes()
    assert pdf["etag"] == hashlib.sha256(data).hexdigest()  # the etag of the file, not of the text
    assert [(s["page"], s["text"].strip()) for s in pdf["segments"]] == [
        (1, "Herons wait by the weir."),
        (2, "Egrets follow the plough."),
    ]
    assert pdf["content"] == "[page 1]\nHerons wait by the weir.\n\n[page 2]\nEgrets follow the plough.\n"
    html = await _load(client, "rag/docs/page.html")
    assert "[Kingfishers]" in html["content"] and "They dive for minnows." in html["content"]
    epub = await _load(client, "rag/docs/book.epub")
    assert "Owls hunt at dusk." in epub["content"] and any(s["section"] for s in epub["segments"])
    response = await _put(client, "rag/docs/report.pdf", "changed", pdf["etag"])
    assert response.status == 405 and "read-only" in (await response.json())["error"]
    assert (env.docs / "report.pdf").read_bytes() == data
