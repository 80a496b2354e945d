"""The CI variant of ``bench/long_conversation.py`` (issue 30's acceptance): 40 turns against the
scripted server, the workspace's default embedder (all-MiniLM-L6-v2, ONNX fp32), a document index in
use. The facts of turns 1–20, asked for in other words, come back in the requests of the questions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("long_conversation", ROOT / "bench" / "long_conversation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("long_conversation", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ONNX export of all-MiniLM-L6-v2, made once for this module."""
    from services.retrieval.embedders import minilm_path
    from services.retrieval.embedders_onnx import ensure_onnx_models

    root = tmp_path_factory.mktemp("onnx-cache")
    ensure_onnx_models(minilm_path(), root)
    return root


def test_every_question_shares_at_most_one_content_word_with_its_fact() -> None:
    module = bench()
    assert module.check_questions() == []
    assert module.content_words("My sister moved to Bergen.") == {"sister", "mov", "bergen"}
    said = module.messages(40)
    assert len(said) == 59 and said[0] == module.FACTS[0][0] and said[-1] == module.FACTS[-1][1]


def test_the_facts_come_back_at_turn_40(onnx_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AXIOMME_EMBEDDER", "sentence-transformers")
    monkeypatch.setenv("AXIOMME_EMBEDDER_CACHE", str(onnx_cache))
    stats = bench().run_scripted(40, True)
    assert stats["failed turns"] == []
    assert stats["turns left out of the last request"] >= 20  # the facts are out of the window
    found = int(stats["facts brought back"].split("/")[0])
    assert found >= 18, stats
    assert stats["facts in the request bodies"] == stats["facts brought back"]  # what the server received
