"""A workspace with a small real index (hash embedder), a session, and providers pointed at the
scripted Ollama / OpenAI-compatible servers of ``tests/models``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.models.config import make_provider, resolve_model
from services.session.session import Session
from services.workspace.manager import Workspace, WorkspaceManager
from tests.models.servers import ScriptedServer

DOCS = {
    "approvals.md": "# Approvals\n\nEvery tool call passes the policy gateway. Writes wait for the operator, "
    "who approves once, for the session, or denies with a reason.\n",
    "tantivy.md": "# Tantivy\n\nTantivy is a full-text search engine library written in Rust, used for BM25.\n",
}


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    workspace, _ = WorkspaceManager().create("assist")
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    (workspace.root / "notes.txt").write_text("the notes\n", encoding="utf-8")
    from services.retrieval import RetrievalEngine

    with RetrievalEngine(workspace) as engine:
        engine.index_add(str(docs), "docs")
    return workspace


@pytest.fixture
def session(workspace: Workspace) -> Iterator[Session]:
    session = Session(workspace, interactive=False)
    yield session
    if not session.closed:
        session.close()


def provider_for(server: ScriptedServer) -> object:
    if server.kind == "ollama":
        config = resolve_model(None, {"ARIES_MODEL": "ollama:llama3.2:3b", "OLLAMA_HOST": server.url})
    else:
        config = resolve_model(None, {"ARIES_MODEL": "openai:qwen2.5", "OPENAI_BASE_URL": server.base_url})
    return make_provider(config)


def offer_every_tool(session: Session) -> None:
    """A window and a tools' budget that hold every enabled tool, so that all are offered (the tests of
    what the policy or a profile enables, not of the ranking: services/assistant/tool_offer.py)."""
    every = {"context_window": 65536, "tool_budget": 100_000}
    session.workspace.update(models={"qwen2.5": every, "llama3.2:3b": every})


@pytest.fixture(params=["ollama", "openai"])
def server(request: pytest.FixtureRequest) -> Iterator[ScriptedServer]:
    server = ScriptedServer(request.param).start()
    yield server
    server.stop()
