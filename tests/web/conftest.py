"""A real workspace for the web viewer tests: a folder indexed as ``docs`` (hash embedder), a context
tree with a resource, and the viewer's aiohttp application on a loopback test server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.context.service import ContextService
from services.context.uri import AxiomUri
from services.retrieval import RetrievalEngine
from services.retrieval.settings import RetrievalSettings
from services.web.documents import DocumentSet
from services.workspace.manager import Workspace, WorkspaceManager

TOKEN = "test-token-0123456789"
FILES = {
    "guide.md": "# Guide\n\nLlamas graze on the altiplano.\n",
    "config.json": '{"name": "aries", "port": 1}\n',
    "settings.yaml": "name: aries\nlevels: [1, 2]\n",
    "notes.txt": "Plain notes, read-only here.\n",
    "events.jsonl": '{"a": 1}\n{"a": 2}\n',
    "feed.xml": "<feed><title>x</title></feed>\n",
    "sub/deep.md": "# Deep\n\nCondors soar.\n",
    "image.png": "not shown",
}


@dataclass
class Env:
    workspace: Workspace
    engine: RetrievalEngine
    context: ContextService
    documents: DocumentSet
    docs: Path
    outside: Path


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    monkeypatch.setenv("AXIOMME_EMBEDDER", "hash")
    monkeypatch.delenv("ARIES_WEB_REINDEX_DELAY", raising=False)
    docs = tmp_path / "docs"
    for rel, text in FILES.items():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(text, encoding="utf-8")
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n\nnever served\n", encoding="utf-8")
    workspace, _ = WorkspaceManager().create("web")
    engine = RetrievalEngine(workspace, RetrievalSettings.from_env({"AXIOMME_EMBEDDER": "hash"}))
    context = ContextService(workspace, engine_factory=lambda: engine)
    try:
        engine.index_add(docs, "docs")
        (docs / "escape.md").symlink_to(outside)  # after indexing: the engine would skip it anyway
        context.tree.write_text(AxiomUri.root("resources").join("notes.md"), "# Notes\n\nFirst.\n", actor="user")
        context.tree.write_text(AxiomUri.root("user").join("prefs.yaml"), "theme: dark\n", actor="user")
        documents = DocumentSet(workspace, engine, context)
        documents.reconcile()
        yield Env(workspace, engine, context, documents, docs, outside)
    finally:
        context.close()
        engine.close()
        workspace.close()


@pytest.fixture
async def served(env: Env) -> AsyncIterator[tuple[object, object]]:
    """(client, state): aiohttp's TestClient on the viewer app, the app's ViewerState."""
    from aiohttp.test_utils import TestClient, TestServer

    from services.web.app import ViewerState, build_app
    from services.web.reqlog import WebRequestLog

    state = ViewerState(env.documents, TOKEN, log=WebRequestLog(env.workspace.root))
    server = TestServer(build_app(state), host="127.0.0.1")
    client = TestClient(server)
    await client.start_server()
    state.port = server.port or 0
    try:
        yield client, state
    finally:
        await client.close()
        state.writer.shutdown(wait=True)
