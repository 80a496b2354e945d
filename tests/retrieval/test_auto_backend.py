"""``AXIOMME_EMBEDDER_BACKEND`` unset (*auto*): new indexes are built with fp32 onnx, existing ones
are read and updated in their own vector space — no "rebuild needed", no torch import.

The model runs through the session's ONNX cache (``onnx_cache``: exported once per test worker);
the fresh-process checks are real subprocesses that report ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from services.retrieval import RetrievalEngine, RetrievalSettings
from services.retrieval.embedders import (
    MINILM_ID,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    create_embedder,
    minilm_path,
)
from services.retrieval.embedders_onnx import FIX, PREPARING, cache_key
from services.retrieval.errors import IndexMismatch
from services.retrieval.settings import NEW_INDEX_BACKEND
from services.workspace.manager import Workspace, WorkspaceManager

from .conftest import REPO

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

QUERY = "which animal purrs when happy?"
NEW_FILE = "Penguins huddle together on the Antarctic ice to keep warm through the polar winter.\n"

SERVE = textwrap.dedent(
    """
    import json, sys
    from services.retrieval import RetrievalEngine
    from services.workspace.manager import WorkspaceManager
    home, docs, query = sys.argv[1:4]
    ws, _ = WorkspaceManager(home).open("w")
    out = {}
    with RetrievalEngine(ws) as engine:
        for name in sys.argv[4:]:
            first = engine.query(query, k=5, index=name)
            report = engine.index_add(docs, name=name, activate=False)
            penguins = engine.query("birds keeping warm on the ice", k=1, index=name)
            store = engine.indexes.store(name)
            info = engine.index_info(name)
            out[name] = {
                "handles": [hit.handle for hit in first.hits],
                "backend": first.embedding_backend,
                "audit": engine.last().params["embedding_backend"],
                "added": report.added,
                "penguins": penguins.hits[0].source_path,
                "penguins_dense_rank": penguins.hits[0].dense_rank,
                "meta": [store.manifest.get_meta(k) for k in ("embedding_backend", "embedding_quantization")],
                "listed": [info.embedding_backend, info.built_backend],
            }
    heavy = sorted(m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules)
    print(json.dumps({"indexes": out, "heavy": heavy, "onnxruntime": "onnxruntime" in sys.modules}))
    """
)


def _env(tmp_path: Path, onnx_cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AXIOMME_", "ARIES_"))}
    env.update(
        PYTHONPATH=str(REPO),
        ARIES_HOME=str(tmp_path / "home"),
        AXIOMME_EMBEDDER="sentence-transformers",
        AXIOMME_EMBEDDER_CACHE=str(onnx_cache),
        **extra,
    )
    return env


def _forget_backend(index_dir: Path) -> None:
    """Make the index look like one written before backends were recorded (model only)."""
    db = sqlite3.connect(index_dir / "manifest.db")
    try:
        with db:
            db.execute("DELETE FROM meta WHERE key IN ('embedding_backend', 'embedding_quantization')")
    finally:
        db.close()


def test_unset_backend_means_auto_and_new_indexes_get_fp32_onnx(onnx_cache: Path) -> None:
    settings = RetrievalSettings.from_env({"AXIOMME_EMBEDDER": "sentence-transformers"})
    assert settings.embedder_backend is None and NEW_INDEX_BACKEND == "onnx"
    default = create_embedder(settings.with_(embedder_cache=str(onnx_cache)))
    assert isinstance(default, OnnxEmbedder) and default.backend == "onnx"
    explicit = RetrievalSettings.from_env({"AXIOMME_EMBEDDER_BACKEND": "torch"})
    assert isinstance(create_embedder(explicit), SentenceTransformerEmbedder)


def test_torch_indexes_are_served_under_auto_without_torch(tmp_path: Path, docs: Path, onnx_cache: Path) -> None:
    """Indexes built with explicit torch (one recording it, one from before backends were recorded)
    are queried and updated under auto with the same top hits, no mismatch, and torch never imported."""
    home = tmp_path / "ws"
    workspace, _ = WorkspaceManager(home).create("w")
    settings = RetrievalSettings.from_env(
        {"AXIOMME_EMBEDDER": "sentence-transformers", "AXIOMME_EMBEDDER_BACKEND": "torch"}
    )
    expected: dict[str, list[str]] = {}
    with RetrievalEngine(workspace, settings) as engine:
        for name in ("torch", "legacy"):
            engine.index_add(docs, name=name)
            assert engine.indexes.store(name).manifest.get_meta("embedding_backend") == "torch"
            expected[name] = [hit.handle for hit in engine.query(QUERY, k=5, index=name).hits]
    _forget_backend(workspace.indexes_dir / "legacy")
    workspace.close()
    assert expected["torch"][0].startswith("torch:") and len(expected["torch"]) == 5
    (docs / "penguins.txt").write_text(NEW_FILE, encoding="utf-8")

    env = _env(tmp_path, onnx_cache)
    assert "AXIOMME_EMBEDDER_BACKEND" not in env
    argv = [sys.executable, "-c", SERVE, str(home), str(docs), QUERY, "torch", "legacy"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["heavy"] == [] and result["onnxruntime"] is True
    for name, recorded in (("torch", "torch"), ("legacy", "onnx")):
        served = result["indexes"][name]
        assert served["handles"] == expected[name]  # the same hits, in the same order
        assert served["backend"] == served["audit"] == "onnx"  # fp32: the torch vectors, no torch
        assert served["added"] == ["penguins.txt"]
        assert served["penguins"] == "penguins.txt" and served["penguins_dense_rank"] == 1
        # the index stays in its space: torch's record kept; the legacy one now names what wrote it
        assert served["meta"] == [recorded, "none"]
        assert served["listed"] == ["onnx", recorded]

    # explicit torch still reads both, including the vectors ONNX added
    workspace, _ = WorkspaceManager(home).open("w")
    with RetrievalEngine(workspace, settings) as engine:
        for name in ("torch", "legacy"):
            hit = engine.query("birds keeping warm on the ice", k=1, index=name).hits[0]
            assert hit.source_path == "penguins.txt" and hit.dense_rank == 1
    workspace.close()


def test_new_index_under_auto_is_fp32_and_int8_stays_in_its_own_space(
    workspace: Workspace, docs: Path, onnx_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new index under auto is fp32 ONNX (torch reads it as its own); an int8 index built on purpose
    is served under auto by int8, and explicit torch/onnx on it say "rebuild needed"."""
    with RetrievalEngine(workspace) as engine:
        assert engine.settings.embedder_backend is None
        engine.index_add(docs, name="fresh")
        store = engine.indexes.store("fresh")
        assert store.manifest.get_meta("embedding_model") == MINILM_ID
        assert (store.manifest.get_meta("embedding_backend"), store.manifest.get_meta("embedding_quantization")) == (
            "onnx",
            "none",
        )
        result = engine.query(QUERY, k=3, index="fresh")
        assert result.hits[0].source_path == "cats.md"
        assert result.embedding_backend == "onnx" and result.to_dict()["embedding_backend"] == "onnx"
        record = engine.last()
        assert record is not None and record.params["embedding_backend"] == "onnx"
        assert record.params["embedding_quantization"] == "none"
        info = engine.index_info("fresh")
        assert (info.embedding_backend, info.built_backend) == ("onnx", "onnx")
    monkeypatch.setenv("AXIOMME_EMBEDDER_BACKEND", "torch")  # the same vector space: torch reads it
    with RetrievalEngine(workspace) as engine:
        assert engine.query(QUERY, k=1, index="fresh").hits[0].source_path == "cats.md"
    monkeypatch.setenv("AXIOMME_EMBEDDER_BACKEND", "onnx-int8")
    with RetrievalEngine(workspace) as engine:
        engine.index_add(docs, name="small")
        with pytest.raises(IndexMismatch) as caught:
            engine.query("cats", index="fresh")
        assert "rebuild needed" in str(caught.value) and "\n" not in str(caught.value)
    monkeypatch.delenv("AXIOMME_EMBEDDER_BACKEND")
    with RetrievalEngine(workspace) as engine:  # auto: each index in its own space
        assert engine.query(QUERY, k=1, index="small").embedding_backend == "onnx-int8"
        assert engine.query(QUERY, k=1, index="fresh").embedding_backend == "onnx"
        listed = {i.name: i.embedding_backend for i in engine.index_list()}
        assert listed == {"fresh": "onnx", "small": "onnx-int8"}
    for backend in ("torch", "onnx"):
        monkeypatch.setenv("AXIOMME_EMBEDDER_BACKEND", backend)
        with RetrievalEngine(workspace) as engine:
            for call in (lambda: engine.query("cats", index="small"), lambda: engine.index_add(docs, name="small")):
                with pytest.raises(IndexMismatch) as caught:
                    call()
                message = str(caught.value)
                assert "rebuild needed" in message and "AXIOMME_EMBEDDER_BACKEND=onnx-int8" in message


def test_auto_follows_only_the_sentence_transformers_family(
    workspace: Workspace, docs: Path, onnx_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hash indexes, and an embedder passed in by the caller, are used as given."""
    monkeypatch.setenv("AXIOMME_EMBEDDER", "hash")
    with RetrievalEngine(workspace) as engine:
        engine.index_add(docs, name="hashed")
        assert engine.query("cats", index="hashed").embedding_backend == "hash"
    monkeypatch.setenv("AXIOMME_EMBEDDER", "sentence-transformers")
    with RetrievalEngine(workspace) as engine:
        with pytest.raises(IndexMismatch, match="was built with hash"):
            engine.query("cats", index="hashed")
    monkeypatch.setenv("AXIOMME_EMBEDDER_BACKEND", "onnx-int8")
    with RetrievalEngine(workspace) as engine:
        engine.index_add(docs, name="int8")
    monkeypatch.delenv("AXIOMME_EMBEDDER_BACKEND")
    given = OnnxEmbedder(minilm_path(), quantized=False, cache_root=onnx_env)
    with RetrievalEngine(workspace, embedder=given) as engine:
        with pytest.raises(IndexMismatch, match="rebuild needed"):  # given, so not swapped for int8
            engine.query("cats", index="int8")


def test_a_failed_export_is_one_line_naming_the_fix(tmp_path: Path, docs: Path) -> None:
    """The CLI says it is preparing the encoder, then fails with one typed line naming the way around."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / cache_key()).write_text("not a folder", encoding="utf-8")  # the export cannot write there
    env = _env(tmp_path, cache)
    created, _ = WorkspaceManager(tmp_path / "home" / "workspaces").create("w")
    created.close()
    done = subprocess.run(
        [sys.executable, "-m", "app", "-w", "w", "rag", "index", "add", str(docs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    lines = done.stderr.splitlines()
    assert f"aries: {PREPARING}" in lines, done.stderr
    errors = [line for line in lines if "ONNX model cache" in line]
    assert len(errors) == 1 and errors[0].endswith(FIX), done.stderr
    assert "Traceback" not in done.stderr
    assert (cache / cache_key()).read_text(encoding="utf-8") == "not a folder"
