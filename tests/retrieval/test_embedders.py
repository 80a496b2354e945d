"""Embedders: the hash fallback, and semantic-model-http against a loopback Ollama-protocol server."""

from __future__ import annotations

import asyncio
import math
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from services.errors import ConfigError
from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.embedders import HashEmbedder, create_embedder
from services.retrieval.embedders_http import (
    CONCURRENCY,
    EmbedderBadResponse,
    EmbedderHTTPError,
    EmbedderTimeout,
    EmbedderUnreachable,
    HttpEmbedder,
    check_loopback_endpoint,
)
from services.retrieval.embedders_lite import SemanticLiteEmbedder
from services.retrieval.errors import EmbedderError
from services.workspace.manager import Workspace
from tests.loopback import LoopbackServer

pytestmark = pytest.mark.timeout(60)


def test_hash_embedder_is_deterministic_and_normalised() -> None:
    embedder = HashEmbedder()
    first = embedder.embed(["Owls hunt at night", "Cats purr"])
    again = HashEmbedder().embed(["Owls hunt at night", "Cats purr"])
    assert first == again and len(first[0]) == 384
    assert math.isclose(sum(x * x for x in first[0]), 1.0, rel_tol=1e-9)
    assert embedder.embed_query("Owls hunt at night") == first[0]
    same_words = embedder.embed_query("owls HUNT at night!")
    assert same_words == first[0]


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:11434/api/embeddings",
        "http://127.0.0.1:11434/api/embed",
        "http://localhost:8080/api/embed",
        "http://LOCALHOST:8080/api/embeddings",
        "http://[::1]:11434/api/embed",
        "http://[0:0:0:0:0:0:0:1]:11434/api/embeddings",
    ],
)
def test_loopback_endpoints_are_accepted(endpoint: str) -> None:
    assert check_loopback_endpoint(endpoint) == endpoint


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://10.0.0.5:11434/api/embed",
        "http://example.com/api/embed",
        "http://0.0.0.0:11434/api/embed",
        "http://127.8.9.10:1/api/embeddings",  # loopback, but not one of the three hosts the spec allows
        "http://127.0.0.2:11434/api/embeddings",
        "http://127.1:11434/api/embeddings",
        "http://[::ffff:127.0.0.1]:11434/api/embeddings",
        "http://localhost.evil.com/api/embed",
        "http://127.0.0.1.nip.io/api/embed",
        "https://user:pw@127.0.0.1/api/embed",
        "ftp://127.0.0.1/api/embed",
        "127.0.0.1:11434",
    ],
)
def test_other_endpoints_are_refused(endpoint: str, workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError):
        HttpEmbedder(endpoint, "m")
    monkeypatch.setenv("AXIOMME_EMBEDDER", "semantic-model-http")
    monkeypatch.setenv("AXIOMME_EMBEDDER_MODEL_ENDPOINT", endpoint)
    with pytest.raises(ConfigError):  # refused when the engine starts, before any request
        RetrievalEngine(workspace)


@dataclass
class OllamaServer:
    """A loopback aiohttp server speaking the Ollama embed API (``/api/embed``, ``/api/embeddings``)."""

    base: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    mode: str = "ok"
    delay: float = 0.0
    in_flight: int = 0
    most_in_flight: int = 0


def _vector(text: str) -> list[float]:
    return HashEmbedder(dim=16).embed_query(text)


@pytest.fixture
def ollama(loopback: Callable[..., LoopbackServer]) -> OllamaServer:
    from aiohttp import web

    state = OllamaServer()

    async def embed(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        state.requests.append({"path": request.path, **body})
        if state.mode == "error":
            return web.json_response({"error": "model 'nomic' not found"}, status=404)
        if state.mode == "garbage":
            return web.Response(text="<html>not json</html>")
        if state.mode == "short":
            return web.json_response({"embeddings": [[0.1, 0.2]]})
        if state.mode == "slow":
            await asyncio.sleep(2)
        if state.mode == "redirect":
            raise web.HTTPFound("http://example.com/steal")
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return web.json_response({"model": body["model"], "embeddings": [_vector(t) for t in inputs]})

    async def legacy(request: web.Request) -> web.StreamResponse:
        """Ollama's ``/api/embeddings``: ``{"model", "prompt"}`` → ``{"embedding": [...]}``."""
        body = await request.json()
        state.requests.append({"path": request.path, **body})
        state.in_flight += 1
        state.most_in_flight = max(state.most_in_flight, state.in_flight)
        try:
            await asyncio.sleep(state.delay)
            if state.mode == "error":
                return web.json_response({"error": f"model '{body['model']}' not found"}, status=404)
            if state.mode == "garbage":
                return web.Response(text="<html>not json</html>")
            if state.mode == "slow":
                await asyncio.sleep(2)
            if state.mode == "short":
                return web.json_response({"embedding": []})
            return web.json_response({"embedding": _vector(body["prompt"])})
        finally:
            state.in_flight -= 1

    server = loopback({"POST /api/embed": embed, "POST /api/embeddings": legacy})
    state.base = server.url
    return state


def test_http_embedder_batches_and_normalises(ollama: OllamaServer) -> None:
    embedder = HttpEmbedder(f"{ollama.base}/api/embed", "nomic-embed-text", timeout_ms=3000)
    texts = [f"text number {i}" for i in range(40)]
    vectors = embedder.embed(texts)
    assert len(vectors) == 40 and all(math.isclose(sum(x * x for x in v), 1.0) for v in vectors)
    assert vectors[3] == pytest.approx(_vector("text number 3"))
    assert [len(r["input"]) for r in ollama.requests] == [32, 8]
    assert ollama.requests[0]["model"] == "nomic-embed-text"
    assert embedder.model_id == "semantic-model-http:nomic-embed-text"


def test_http_embedder_legacy_endpoint(ollama: OllamaServer) -> None:
    embedder = HttpEmbedder(f"{ollama.base}/api/embeddings", "m")
    assert embedder.embed_query("hello") == pytest.approx(_vector("hello"))
    assert ollama.requests == [{"path": "/api/embeddings", "model": "m", "prompt": "hello"}]


def test_scripted_server_speaks_ollama_embeddings_to_the_official_client(ollama: OllamaServer) -> None:
    """The official ``ollama`` client accepts the scripted server's ``/api/embeddings`` and ``/api/embed``."""
    import ollama as ollama_client

    client = ollama_client.Client(host=ollama.base)
    single = client.embeddings(model="nomic-embed-text", prompt="owls hunt at night")
    assert list(single.embedding) == pytest.approx(_vector("owls hunt at night"))
    batch = client.embed(model="nomic-embed-text", input=["a", "b"])
    assert [list(v) for v in batch.embeddings] == [pytest.approx(_vector("a")), pytest.approx(_vector("b"))]
    assert ollama.requests[0] == {
        "path": "/api/embeddings",
        "model": "nomic-embed-text",
        "prompt": "owls hunt at night",
    }
    ollama.mode = "error"
    with pytest.raises(ollama_client.ResponseError) as caught:
        client.embeddings(model="nomic-embed-text", prompt="x")
    assert caught.value.status_code == 404 and "not found" in caught.value.error


def test_http_embedder_embeddings_one_text_per_request_bounded(ollama: OllamaServer) -> None:
    """The spec's default protocol: one ``/api/embeddings`` request per text, at most CONCURRENCY at once,
    vectors in the order of the texts whatever order the answers come in."""
    ollama.delay = 0.05
    embedder = HttpEmbedder(f"{ollama.base}/api/embeddings", "nomic-embed-text", timeout_ms=3000)
    texts = [f"text number {i}" for i in range(20)]
    vectors = embedder.embed(texts)
    assert [v for v in vectors] == [pytest.approx(_vector(t)) for t in texts]
    assert sorted(r["prompt"] for r in ollama.requests) == sorted(texts)
    assert all(set(r) == {"path", "model", "prompt"} and r["path"] == "/api/embeddings" for r in ollama.requests)
    assert 2 <= ollama.most_in_flight <= CONCURRENCY
    assert embedder.embed([]) == [] and len(ollama.requests) == 20


@pytest.mark.parametrize(
    ("mode", "kind", "message"),
    [
        ("error", EmbedderHTTPError, "HTTP 404"),
        ("garbage", EmbedderBadResponse, "not JSON"),
        ("short", EmbedderBadResponse, "malformed"),
        ("slow", EmbedderTimeout, "did not answer within AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS = 500 ms"),
    ],
)
def test_http_embedder_embeddings_failures_are_typed(ollama: OllamaServer, mode: str, kind: type, message: str) -> None:
    ollama.mode = mode
    embedder = HttpEmbedder(f"{ollama.base}/api/embeddings", "m", timeout_ms=500)
    with pytest.raises(kind, match=message) as caught:
        embedder.embed(["a", "b", "c", "d", "e", "f"])
    assert isinstance(caught.value, EmbedderError) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("mode", "kind", "message"),
    [
        ("error", EmbedderHTTPError, "HTTP 404"),
        ("garbage", EmbedderBadResponse, "not JSON"),
        ("short", EmbedderBadResponse, "malformed"),
        ("slow", EmbedderTimeout, "did not answer within AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS = 500 ms"),
        ("redirect", EmbedderHTTPError, "HTTP 302"),
    ],
)
def test_http_embedder_failures_are_typed(ollama: OllamaServer, mode: str, kind: type, message: str) -> None:
    ollama.mode = mode
    embedder = HttpEmbedder(f"{ollama.base}/api/embed", "m", timeout_ms=500)
    with pytest.raises(kind, match=message) as caught:
        embedder.embed(["a", "b"])
    assert isinstance(caught.value, EmbedderError) and "\n" not in str(caught.value)


def test_http_embedder_server_down() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = HttpEmbedder(f"http://127.0.0.1:{port}/api/embed", "m", timeout_ms=500)
    with pytest.raises(EmbedderUnreachable, match="not reachable: Connection refused"):
        embedder.embed_query("x")


def test_http_embedder_timeout_covers_a_dripping_body(loopback: Callable[..., LoopbackServer]) -> None:
    """Headers at once, then one byte every 0.2 s: the request deadline still ends it."""
    from aiohttp import web

    async def drip(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"embeddings": [[')
        while True:
            await asyncio.sleep(0.2)
            await response.write(b"0.1,")

    server = loopback({"POST /api/embed": drip})
    embedder = HttpEmbedder(f"{server.url}/api/embed", "m", timeout_ms=800)
    started = time.monotonic()
    with pytest.raises(EmbedderTimeout):
        embedder.embed_query("x")
    assert time.monotonic() - started < 0.8 + 2.5


async def test_http_embedder_works_when_called_inside_a_running_loop(ollama: OllamaServer) -> None:
    embedder = HttpEmbedder(f"{ollama.base}/api/embed", "m")
    assert embedder.embed_query("hello") == pytest.approx(_vector("hello"))


def test_aiohttp_is_the_only_http_client() -> None:
    """No module of the core or the app talks HTTP through anything but aiohttp."""
    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"urllib\.request|http\.client|^\s*(?:import|from)\s+(?:requests|httpx|urllib3)\b", re.M)
    offenders = [
        f"{path.relative_to(root)}: {match.group(0).strip()}"
        for folder in ("services", "app")
        for path in sorted((root / folder).rglob("*.py"))
        for match in pattern.finditer(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_engine_with_semantic_model_http(
    ollama: OllamaServer, workspace: Workspace, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AXIOMME_EMBEDDER", "semantic-model-http")
    monkeypatch.setenv("AXIOMME_EMBEDDER_MODEL_ENDPOINT", f"{ollama.base}/api/embed")
    monkeypatch.setenv("AXIOMME_EMBEDDER_MODEL_NAME", "nomic-embed-text")
    with RetrievalEngine(workspace) as engine:
        report = engine.index_add(docs)
        assert len(report.added) == 3
        result = engine.query("cats purr", k=2)
        assert result.embedding_model == "semantic-model-http:nomic-embed-text"
        assert result.hits[0].source_path == "cats.md"
        assert engine.show(result.hits[0].handle).embedding_model == "semantic-model-http:nomic-embed-text"
        ollama.mode = "error"
        with pytest.raises(EmbedderError):
            engine.query("cats")
        (docs / "more.txt").write_text("more text", encoding="utf-8")
        with pytest.raises(EmbedderError):
            engine.index_add(docs)
        # Keywords first (issue 32 item 4): the new file is searchable by keyword, its vector waits for the
        # encoder — a state the index says, not damage; the next add fills it in.
        info = engine.index_info("docs")
        assert info.files == 4 and info.vectors_pending == 1 and info.status == "ok"
        ollama.mode = "ok"
        engine.index_add(docs)
        assert engine.index_info("docs").vectors_pending == 0


def test_engine_with_semantic_model_http_default_protocol(
    ollama: OllamaServer, workspace: Workspace, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/api/embeddings`` (the spec's protocol) end to end: index, query, and a typed error when it fails."""
    monkeypatch.setenv("AXIOMME_EMBEDDER", "semantic-model-http")
    monkeypatch.setenv("AXIOMME_EMBEDDER_MODEL_ENDPOINT", f"{ollama.base}/api/embeddings")
    with RetrievalEngine(workspace) as engine:
        assert len(engine.index_add(docs).added) == 3
        assert engine.query("cats purr", k=2).hits[0].source_path == "cats.md"
        assert {r["path"] for r in ollama.requests} == {"/api/embeddings"}
        assert {r["model"] for r in ollama.requests} == {"nomic-embed-text"}  # the spec's default model
        ollama.mode = "error"
        with pytest.raises(EmbedderHTTPError):
            engine.query("cats")


def test_create_embedder_choices() -> None:
    assert isinstance(create_embedder(RetrievalSettings(embedder="hash")), HashEmbedder)
    assert isinstance(create_embedder(RetrievalSettings(embedder="semantic-lite")), SemanticLiteEmbedder)
    http = create_embedder(RetrievalSettings(embedder="semantic-model-http"))
    assert isinstance(http, HttpEmbedder) and http.endpoint == "http://127.0.0.1:11434/api/embeddings"
    assert http.legacy and not http.batch and http.model == "nomic-embed-text" and http.timeout_s == 3.0
    assert not http.strict
    strict = create_embedder(
        RetrievalSettings.from_env({"AXIOMME_EMBEDDER": "semantic-model-http", "AXIOMME_EMBEDDER_STRICT": "on"})
    )
    assert isinstance(strict, HttpEmbedder) and strict.strict
    batch = create_embedder(
        RetrievalSettings(embedder="semantic-model-http", http_endpoint="http://localhost:11434/api/embed")
    )
    assert isinstance(batch, HttpEmbedder) and batch.batch
