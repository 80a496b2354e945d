"""The ONNX Runtime backends of all-MiniLM-L6-v2 (``AXIOMME_EMBEDDER_BACKEND=onnx|onnx-int8``).

The model is exported once per test session into a session cache (``onnx_cache``), which every
test points ``AXIOMME_EMBEDDER_CACHE`` at; the one test that needs a second export (a new cache
key) runs it in two processes at once, which also checks the lock.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.embedders import (
    MINILM_ID,
    SentenceTransformerEmbedder,
    create_embedder,
    minilm_path,
    vector_space,
)
from services.retrieval.embedders_onnx import (
    FP32_FILE,
    INT8_FILE,
    MARKER,
    OnnxEmbedder,
    cache_key,
    ensure_onnx_models,
    package_version,
)
from services.retrieval.errors import EmbedderError, IndexMismatch
from services.workspace.manager import Workspace

from .conftest import REPO
from .test_chunking import ADVERSARIAL

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

SAMPLES = [
    "A cat sleeps on the sofa.",
    "Aspirin reduces the risk of stroke in some patients.",
    "What causes the spread of cancer cells to other organs?",
    "0-dimensional biomaterials show inductive properties.",
    "Tax law reform",
    "word " * 600,  # longer than the 256-token window: truncated like sentence-transformers does
    "Statins lower LDL cholesterol and the risk of cardiovascular events in patients with diabetes.",
]
ODD = ["x", *ADVERSARIAL[:4]]
"""Degenerate and adversarial texts (one letter, unspaced CJK, ...): int8 moves them most (0.97 measured)."""


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_cache_is_keyed_by_package_version_and_settings(onnx_cache: Path) -> None:
    key = cache_key()
    assert key.startswith(package_version() + "-") and package_version() != "unknown"
    directory = onnx_cache / key
    assert sorted(p.name for p in directory.iterdir()) == sorted([FP32_FILE, INT8_FILE, MARKER])
    marker = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    assert marker["key"] == key and marker["settings"]["int8"]["per_channel"] is True
    before = (directory / MARKER).stat().st_mtime_ns
    assert ensure_onnx_models(minilm_path(), onnx_cache) == directory  # complete: nothing rebuilt
    assert (directory / MARKER).stat().st_mtime_ns == before
    assert cache_key("9.9.9") != key


def test_create_embedder_picks_the_backend(onnx_cache: Path) -> None:
    for backend, quantization in (("onnx", "none"), ("onnx-int8", "int8-dynamic")):
        embedder = create_embedder(RetrievalSettings(embedder_backend=backend, embedder_cache=str(onnx_cache)))
        assert isinstance(embedder, OnnxEmbedder)
        assert (embedder.model_id, embedder.backend, embedder.quantization) == (MINILM_ID, backend, quantization)
    torch_embedder = create_embedder(RetrievalSettings(embedder_backend="torch"))
    assert isinstance(torch_embedder, SentenceTransformerEmbedder)
    onnx = create_embedder(RetrievalSettings(embedder_backend="onnx", embedder_cache=str(onnx_cache)))
    int8 = create_embedder(RetrievalSettings(embedder_backend="onnx-int8", embedder_cache=str(onnx_cache)))
    assert vector_space(onnx) == vector_space(torch_embedder) != vector_space(int8)


def test_onnx_vectors_match_torch(onnx_cache: Path) -> None:
    reference = SentenceTransformerEmbedder().embed(SAMPLES)
    fp32 = OnnxEmbedder(minilm_path(), quantized=False, cache_root=onnx_cache)
    int8 = OnnxEmbedder(minilm_path(), quantized=True, cache_root=onnx_cache)
    fp32_vectors, int8_vectors = fp32.embed(SAMPLES), int8.embed(SAMPLES)
    for text, ref, a, b in zip(SAMPLES, reference, fp32_vectors, int8_vectors, strict=True):
        assert sum(x * x for x in a) == pytest.approx(1.0, abs=1e-4)
        assert _cosine(ref, a) >= 0.999, text[:40]
        assert max(abs(x - y) for x, y in zip(ref, a, strict=True)) < 1e-4, text[:40]
        assert _cosine(ref, b) >= 0.98, text[:40]
    odd_ref, odd_fp32, odd_int8 = SentenceTransformerEmbedder().embed(ODD), fp32.embed(ODD), int8.embed(ODD)
    for text, ref, a, b in zip(ODD, odd_ref, odd_fp32, odd_int8, strict=True):
        assert _cosine(ref, a) >= 0.999, text[:40]
        assert _cosine(ref, b) >= 0.95, text[:40]
    # a query on its own gives the vector of the same text in a batch; int8 too, although dynamic
    # quantization scales a whole input tensor (so int8 encodes one text per call)
    assert fp32.embed_query(SAMPLES[2]) == pytest.approx(fp32_vectors[2], abs=1e-5)
    assert int8.embed_query(SAMPLES[2]) == pytest.approx(int8_vectors[2], abs=1e-6)
    assert int8.embed(SAMPLES[1:3])[1] == pytest.approx(int8_vectors[2], abs=1e-6)
    # deterministic: same input, same output
    assert int8.embed(SAMPLES) == int8_vectors


def test_same_chunk_ids_and_handles_whatever_the_backend(
    workspace: Workspace, docs: Path, onnx_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handles: dict[str, list[str]] = {}
    for backend in ("onnx", "onnx-int8", "torch"):
        monkeypatch.setenv("AXIOMME_EMBEDDER_BACKEND", backend)
        with RetrievalEngine(workspace) as engine:
            report = engine.index_add(docs, name=f"docs-{backend}")
            assert report.chunks_added > 0
            result = engine.query("which animal purrs when happy?", k=50, index=f"docs-{backend}")
            assert result.hits[0].source_path == "cats.md"
            handles[backend] = sorted(hit.handle.split(":", 1)[1] for hit in result.hits)
            info = engine.indexes.store(f"docs-{backend}")
            assert info.manifest.get_meta("embedding_backend") == backend
    assert handles["onnx"] == handles["onnx-int8"] == handles["torch"]


def test_mixing_backends_is_refused(
    workspace: Workspace, docs: Path, onnx_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AXIOMME_EMBEDDER_BACKEND", "onnx-int8")
    with RetrievalEngine(workspace) as engine:
        engine.index_add(docs, name="int8")
    monkeypatch.setenv("AXIOMME_EMBEDDER_BACKEND", "onnx")
    with RetrievalEngine(workspace) as engine:
        engine.index_add(docs, name="fp32")
        for call in (lambda: engine.query("cats", index="int8"), lambda: engine.index_add(docs, name="int8")):
            with pytest.raises(IndexMismatch) as caught:
                call()
            message = str(caught.value)
            assert "rebuild needed" in message and "AXIOMME_EMBEDDER_BACKEND=onnx-int8" in message
            assert "\n" not in message
    monkeypatch.setenv("AXIOMME_EMBEDDER_BACKEND", "onnx-int8")
    with RetrievalEngine(workspace) as engine:
        with pytest.raises(IndexMismatch, match="rebuild needed"):
            engine.query("cats", index="fp32")
        assert engine.query("cats", index="int8").hits  # its own index still answers
    # torch and fp32 ONNX share a vector space (max abs difference ~1e-7): no rebuild between them
    monkeypatch.setenv("AXIOMME_EMBEDDER_BACKEND", "torch")
    with RetrievalEngine(workspace) as engine:
        assert engine.query("which animal purrs?", index="fp32").hits[0].source_path == "cats.md"
        with pytest.raises(IndexMismatch, match="rebuild needed"):
            engine.query("cats", index="int8")


def test_no_torch_on_the_onnx_path(tmp_path: Path, docs: Path, onnx_cache: Path) -> None:
    """Ingest and query with an existing cache, in a fresh process: torch is never imported."""
    script = textwrap.dedent(
        f"""
        import sys
        from services.retrieval import RetrievalEngine
        from services.workspace.manager import WorkspaceManager
        ws, _ = WorkspaceManager({str(tmp_path / "ws")!r}).create("t")
        with RetrievalEngine(ws) as engine:
            engine.index_add({str(docs)!r})
            hits = engine.query("which animal purrs?", k=3).hits
        heavy = sorted(m for m in ("torch", "transformers", "sentence_transformers", "onnx") if m in sys.modules)
        print(hits[0].source_path, "onnxruntime" in sys.modules, heavy)
        """
    )
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(REPO),
        ARIES_HOME=str(tmp_path / "home"),
        AXIOMME_EMBEDDER="sentence-transformers",
        AXIOMME_EMBEDDER_BACKEND="onnx-int8",
        AXIOMME_EMBEDDER_CACHE=str(onnx_cache),
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["cats.md", "True", "[]"]


def test_new_key_rebuilds_once_with_two_processes_at_once(tmp_path: Path, onnx_cache: Path) -> None:
    """A new package version is a new key: exported once (the second process waits), the old key removed."""
    root = tmp_path / "cache"
    old = root / cache_key()
    shutil.copytree(onnx_cache / cache_key(), old)
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from services.retrieval.embedders_onnx import ensure_onnx_models, MARKER
        from services.retrieval.embedders import minilm_path
        directory = ensure_onnx_models(minilm_path(), Path({str(root)!r}), version="9.9.9")
        print(directory.name, (directory / MARKER).stat().st_mtime_ns)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=900) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    lines = {out.strip() for out, _ in outputs}
    assert len(lines) == 1, lines  # same directory, and the marker was written once
    new = root / cache_key("9.9.9")
    assert next(iter(lines)).split()[0] == new.name
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [new.name]  # the old key is gone
    assert not [p for p in new.iterdir() if p.name.endswith(".tmp")]
    fresh = OnnxEmbedder(minilm_path(), quantized=True, cache_root=root)
    fresh._path = new / INT8_FILE
    cached = OnnxEmbedder(minilm_path(), quantized=True, cache_root=onnx_cache)
    assert fresh.embed(SAMPLES[:3]) == cached.embed(SAMPLES[:3])  # the export is reproducible


def test_an_unusable_cache_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x", encoding="utf-8")
    embedder = OnnxEmbedder(minilm_path(), quantized=True, cache_root=blocker / "onnx")
    with pytest.raises(EmbedderError) as caught:
        embedder.embed_query("cats")
    assert "cannot create the ONNX model cache" in str(caught.value) and "\n" not in str(caught.value)
    assert blocker.read_text(encoding="utf-8") == "x"
