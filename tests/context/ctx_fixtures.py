"""A real workspace, retrieval engine (hash embedder) and context tree for the index/search tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from services.context.index import sync_index
from services.context.search import ContextRetriever
from services.context.settings import ContextSettings
from services.context.tiers import synthesize_tiers
from services.context.tree import ContextTree
from services.context.uri import AxiomUri
from services.retrieval import RetrievalEngine
from services.retrieval.settings import RetrievalSettings
from services.workspace.manager import Workspace, WorkspaceManager

NESTED = {
    "animals/mammals/llamas/grazing.md": "# Grazing\n\nLlamas graze on the altiplano grass at high altitude.\n",
    "animals/mammals/llamas/wool.md": "# Wool\n\nLlama wool is soft, warm and light.\n",
    "animals/mammals/alpacas/fleece.md": "# Fleece\n\nAlpaca fleece is finer than llama wool.\n",
    "animals/birds/condor.md": "# Condor\n\nThe Andean condor soars over the altiplano on thermals.\n",
    "cooking/bread/sourdough.md": "# Sourdough\n\nKnead the dough, let it rise overnight, then bake.\n",
    "cooking/soups/lentils.md": "# Lentil soup\n\nSimmer lentils with onions and cumin.\n",
    "travel/zurich.md": "# Zurich\n\nZurich lies on a lake; the old town has narrow lanes.\n",
    "travel/kubernetes.txt": "Kubernetes schedules containers across a cluster of nodes.\n",
}


@dataclass
class Ctx:
    workspace: Workspace
    engine: RetrievalEngine
    tree: ContextTree

    def retriever(self, **env: str) -> ContextRetriever:
        return ContextRetriever(self.tree, self.engine, settings=ContextSettings.from_env(env))

    def write(self, rel: str, text: str, scope: str = "resources") -> None:
        self.tree.write_text(AxiomUri.root(scope).join(rel), text, actor="user" if scope != "session" else "system")

    def build(self, files: dict[str, str] | None = None) -> None:
        for rel, text in (NESTED if files is None else files).items():
            self.write(rel, text)
        synthesize_tiers(self.tree, AxiomUri.root("resources"))
        sync_index(self.tree, self.engine)


@pytest.fixture(name="ctx")
def ctx_fixture() -> Iterator[Ctx]:
    workspace, _ = WorkspaceManager().create("ctx")
    engine = RetrievalEngine(workspace, RetrievalSettings.from_env({"AXIOMME_EMBEDDER": "hash"}))
    try:
        yield Ctx(workspace, engine, ContextTree(workspace.root / "context"))
    finally:
        engine.close()
        workspace.close()
