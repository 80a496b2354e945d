"""semantic-lite (the local heuristic embedder), the run environment and the release-profile gate.

Determinism is checked across processes with different hash seeds (``PYTHONHASHSEED``): the vectors
must be byte-identical, or an index written by one process would not match a query from another.
The strict-mode runs talk to real loopback servers (one that refuses, one that is down).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.embedders import HashEmbedder, cache_tag, create_embedder, vector_space
from services.retrieval.embedders_lite import LITE_DIM, VERSION, SemanticLiteEmbedder, normalize_text, stem
from services.retrieval.errors import EmbedderError, IndexMismatch
from services.retrieval.eval_run import evaluate_run, release_gate, run_environment
from services.workspace.manager import Workspace
from tests.loopback import LoopbackServer

REPO = Path(__file__).resolve().parents[2]
TEXTS = [
    "Microstructural development of human newborn cerebral white matter",
    "Café crème: naïve façade, ÉCOLE",
    "",
    "the of and",  # stop words only
    "ß Straße 42 x",
]

DIGEST = """
import hashlib, struct, sys
from services.retrieval.embedders_lite import SemanticLiteEmbedder
texts = {texts!r}
vectors = SemanticLiteEmbedder().embed(texts)
print(hashlib.sha256(b"".join(struct.pack("<d", x) for v in vectors for x in v)).hexdigest())
"""


def _digest(vectors: list[list[float]]) -> str:
    import struct

    return hashlib.sha256(b"".join(struct.pack("<d", x) for v in vectors for x in v)).hexdigest()


def test_vectors_are_unit_length_fixed_size_and_named() -> None:
    embedder = SemanticLiteEmbedder()
    vectors = embedder.embed(TEXTS)
    assert [len(v) for v in vectors] == [LITE_DIM] * len(TEXTS)
    for text, vector in zip(TEXTS, vectors, strict=True):
        norm = math.sqrt(sum(x * x for x in vector))
        assert norm == pytest.approx(1.0) if text not in ("", "the of and") else norm == 0.0
    assert embedder.model_id == f"semantic-lite-v{VERSION}-{LITE_DIM}"
    assert embedder.embed_query(TEXTS[0]) == vectors[0]
    assert embedder.backend == "lite" and embedder.quantization == "none"
    assert vector_space(embedder) == cache_tag(embedder) == embedder.model_id


def test_same_vectors_in_every_process() -> None:
    """Byte-identical vectors in fresh interpreters with different hash seeds, and in this one."""
    here = _digest(SemanticLiteEmbedder().embed(TEXTS))
    digests = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", DIGEST.format(texts=TEXTS)], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        digests.add(done.stdout.strip())
    assert digests == {here}


def test_normalization_and_morphology() -> None:
    assert normalize_text("Café ÉCOLE Straße") == "cafe ecole strasse"
    assert [stem(w) for w in ("cells", "studies", "running", "stopped", "glass", "virus", "is")] == [
        "cell",
        "study",
        "run",
        "stop",
        "glass",
        "virus",
        "is",
    ]
    lite, hashed = SemanticLiteEmbedder(), HashEmbedder()

    def cos(embedder: Any, a: str, b: str) -> float:
        x, y = embedder.embed_query(a), embedder.embed_query(b)
        return sum(p * q for p, q in zip(x, y, strict=True))

    # inflected and accented forms meet in semantic-lite; the hash embedder sees different words
    assert cos(lite, "tumour cells proliferating", "tumour cell proliferation") > 0.6
    assert cos(hashed, "tumour cells proliferating", "tumour cell proliferation") < 0.4
    assert cos(lite, "café", "CAFE") == pytest.approx(1.0)
    # stop words carry nothing: only the content words decide
    assert cos(lite, "the effect of the drug", "drug effect") == pytest.approx(1.0)
    assert cos(lite, "owls hunt at night", "stock market prices") < 0.2


def test_changing_the_embedder_says_rebuild(workspace: Workspace, docs: Path) -> None:
    """An index built with semantic-lite is refused by another embedder (and by another semantic-lite
    version), with the message that says what to do."""
    with RetrievalEngine(workspace, RetrievalSettings(embedder="semantic-lite")) as engine:
        engine.index_add(docs)
        result = engine.query("cats purr", k=2)
        assert result.hits[0].source_path == "cats.md"
        assert result.embedding_model == SemanticLiteEmbedder().model_id
    with RetrievalEngine(workspace, RetrievalSettings(embedder="hash")) as engine:
        with pytest.raises(IndexMismatch, match="semantic-lite-v1-512.*drop and re-add"):
            engine.query("cats")
    next_version = SemanticLiteEmbedder()
    next_version.model_id = f"semantic-lite-v{VERSION + 1}-{LITE_DIM}"  # what a bumped VERSION would write
    with RetrievalEngine(workspace, RetrievalSettings(embedder="semantic-lite"), embedder=next_version) as engine:
        with pytest.raises(IndexMismatch, match="drop and re-add"):
            engine.query("cats")


# -- the run environment and the release gate --------------------------------------------------------


def _dataset(root: Path) -> Path:
    root.mkdir()
    corpus = [
        {"_id": "d1", "title": "Owls", "text": "Owls hunt small mammals at night."},
        {"_id": "d2", "title": "Cats", "text": "Cats purr when they are content."},
        {"_id": "d3", "title": "Bees", "text": "Bees pollinate flowering plants."},
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in corpus), encoding="utf-8")
    queries = [{"_id": "q1", "text": "which animal hunts at night"}, {"_id": "q2", "text": "purring cats"}]
    (root / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in queries), encoding="utf-8")
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n", encoding="utf-8")
    return root


def _down_endpoint() -> str:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/api/embeddings"


def test_release_gate_policy() -> None:
    lite = run_environment(RetrievalSettings(embedder="semantic-lite"), SemanticLiteEmbedder())
    assert lite == {
        "embedding_provider": "semantic-lite",
        "embedding_model": "semantic-lite-v1-512",
        "embedding_backend": "lite",
        "embedding_strict": False,
        "embedding_strict_error": None,
    }
    assert release_gate(lite, "ci")["passed"]  # only release profiles check the embedding policy
    failed = release_gate(lite, "nightly-release")
    assert not failed["passed"] and failed["embedding_provider"] == "semantic-lite"
    assert "requires 'semantic-model-http'" in failed["reasons"][0]
    assert not release_gate(lite, None, write_release_check=True)["passed"]
    model = dict(lite, embedding_provider="semantic-model-http")
    assert release_gate(model, "release")["passed"]
    broken = dict(model, embedding_strict_error="embedding server … is not reachable")
    verdict = release_gate(broken, "RELEASE")
    assert not verdict["passed"] and verdict["embedding_strict_error"].startswith("embedding server")


def test_strict_failure_is_recorded_and_fails_the_release_gate(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path / "beir")
    env = {"AXIOMME_EMBEDDER": "semantic-model-http", "AXIOMME_EMBEDDER_MODEL_ENDPOINT": _down_endpoint()}
    strict = RetrievalSettings.from_env({**env, "AXIOMME_EMBEDDER_STRICT": "yes"})
    run = evaluate_run(dataset, settings=strict, cache_dir=tmp_path / "cache", gate_profile="release")
    environment = run["environment"]
    assert environment["embedding_provider"] == "semantic-model-http" and environment["embedding_strict"]
    assert "not reachable: Connection refused" in environment["embedding_strict_error"]
    assert run["methods"] == {} and run["ok"] is False
    assert run["gate"]["passed"] is False and run["gate"]["reasons"][0].startswith("embedding_strict_error:")
    # without strict mode: today's behaviour, the typed error itself
    with pytest.raises(EmbedderError, match="not reachable"):
        evaluate_run(dataset, settings=RetrievalSettings.from_env(env), cache_dir=tmp_path / "cache")


def test_release_gate_passes_with_a_working_model_server(
    tmp_path: Path, loopback: Callable[..., LoopbackServer]
) -> None:
    from aiohttp import web

    async def embeddings(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        return web.json_response({"embedding": SemanticLiteEmbedder(dim=64).embed_query(body["prompt"])})

    server = loopback({"POST /api/embeddings": embeddings})
    settings = RetrievalSettings.from_env(
        {
            "AXIOMME_EMBEDDER": "semantic-model-http",
            "AXIOMME_EMBEDDER_MODEL_ENDPOINT": f"{server.url}/api/embeddings",
            "AXIOMME_EMBEDDER_STRICT": "1",
        }
    )
    run = evaluate_run(_dataset(tmp_path / "beir"), settings=settings, cache_dir=tmp_path / "c", gate_profile="release")
    assert run["ok"] and run["gate"]["passed"] and run["environment"]["embedding_strict_error"] is None
    assert run["methods"]["dense"]["ndcg@10"] == pytest.approx(1.0)


def _eval_cli(argv: list[str]) -> int:
    """``aries ARGV`` in this process, through ``app.cli.main`` (its one-line error exits)."""
    return main(argv)


def test_eval_cli_writes_the_run_and_exits_1_on_a_strict_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = _dataset(tmp_path / "beir")
    base = ["eval", "rag", "--dataset", str(dataset), "--cache", str(tmp_path / "cache")]
    monkeypatch.setenv("AXIOMME_EMBEDDER", "semantic-lite")
    assert _eval_cli([*base, "--json", "--gate-profile", "ci", "--run-file", str(tmp_path / "ci.json")]) == 0
    run = json.loads((tmp_path / "ci.json").read_text(encoding="utf-8"))
    assert run["environment"]["embedding_provider"] == "semantic-lite" and run["gate"]["passed"]
    assert json.loads(capsys.readouterr().out) == run
    assert _eval_cli([*base, "--json", "--gate-profile", "release"]) == 1  # semantic-lite is not for release
    assert "requires 'semantic-model-http'" in capsys.readouterr().err
    monkeypatch.setenv("AXIOMME_EMBEDDER", "semantic-model-http")
    monkeypatch.setenv("AXIOMME_EMBEDDER_MODEL_ENDPOINT", _down_endpoint())
    monkeypatch.setenv("AXIOMME_EMBEDDER_STRICT", "on")
    assert _eval_cli([*base, "--run-file", str(tmp_path / "strict.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("aries: AXIOMME_EMBEDDER_STRICT: the embedder failed: ") and err.count("\n") == 1
    strict = json.loads((tmp_path / "strict.json").read_text(encoding="utf-8"))
    assert "not reachable" in strict["environment"]["embedding_strict_error"]
    monkeypatch.setenv("AXIOMME_EMBEDDER_STRICT", "off")
    assert _eval_cli(base) == 1  # the typed error, one line, as before
    assert "not reachable" in capsys.readouterr().err


def test_create_embedder_returns_semantic_lite() -> None:
    embedder = create_embedder(RetrievalSettings.from_env({"AXIOMME_EMBEDDER": "semantic-lite"}))
    assert isinstance(embedder, SemanticLiteEmbedder)
