from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.retrieval import RetrievalEngine, RetrievalSettings
from services.workspace.manager import Workspace, WorkspaceManager

REPO = Path(__file__).resolve().parents[2]
SCIFACT = REPO.parent / "shared" / "eval" / "scifact"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user data, no settings from the caller's shell; the hash embedder unless a test says otherwise."""
    monkeypatch.setenv("ARIES_HOME", str(tmp_path / "home"))
    for name in (
        "AXIOMME_RETRIEVAL_BACKEND",
        "AXIOMME_CHROMA_URL",
        "AXIOMME_EMBEDDER_MODEL_ENDPOINT",
        "AXIOMME_EMBEDDER_MODEL_NAME",
        "AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS",
        "AXIOMME_EMBEDDER_THREADS",
        "AXIOMME_EMBEDDER_BACKEND",
        "AXIOMME_EMBEDDER_CACHE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AXIOMME_EMBEDDER", "hash")


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ONNX exports of all-MiniLM-L6-v2, built once for the whole test session."""
    from services.retrieval.embedders import minilm_path
    from services.retrieval.embedders_onnx import ensure_onnx_models

    root = tmp_path_factory.mktemp("onnx-cache")
    ensure_onnx_models(minilm_path(), root)
    return root


@pytest.fixture
def onnx_env(onnx_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The model, through the session's ONNX cache (each test still picks its backend)."""
    monkeypatch.setenv("AXIOMME_EMBEDDER", "sentence-transformers")
    monkeypatch.setenv("AXIOMME_EMBEDDER_CACHE", str(onnx_cache))
    return onnx_cache


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    manager = WorkspaceManager(tmp_path / "home" / "workspaces")
    ws, _ = manager.create("test")
    yield ws


@pytest.fixture
def engine(workspace: Workspace) -> Iterator[RetrievalEngine]:
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as eng:
        yield eng


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A small folder of Markdown and text files."""
    root = tmp_path / "docs"
    (root / "guides").mkdir(parents=True)
    (root / "guides" / "install.md").write_text(
        "# Install\n\nInstall the workbench with pip into a virtual environment.\n\n"
        "## Linux\n\nOn Debian use apt to install the system libraries first.\n\n"
        "## Windows\n\nOn Windows use the official Python installer.\n",
        encoding="utf-8",
    )
    (root / "notes.txt").write_text(
        "Aspirin reduces the risk of stroke in some patients. Statins lower cholesterol.\n", encoding="utf-8"
    )
    (root / "cats.md").write_text("# Cats\n\nCats purr when they are content. Kittens sleep a lot.\n", encoding="utf-8")
    return root
