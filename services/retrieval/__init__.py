"""Retrieval: loaders, deterministic chunking, hybrid Tantivy BM25 + Chroma dense search.

Importing this package is cheap: torch, sentence-transformers, chromadb, tantivy, pypdf,
ebooklib and numpy are imported inside the functions that use them.  Start with
:class:`RetrievalEngine`::

    engine = RetrievalEngine(workspace)          # settings from AXIOMME_* (ConfigError if bad)
    report = engine.index_add("~/papers", name="papers", progress=cb, cancel=event)
    result = engine.query("does aspirin lower stroke risk", k=10)
    view = engine.show(result.hits[0].handle)
    engine.last()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.lazy import lazy_names

if TYPE_CHECKING:
    from services.retrieval.engine import RetrievalEngine, derive_index_name, parse_handle
    from services.retrieval.models import (
        ChunkView,
        FileIssue,
        Hit,
        IndexInfo,
        IngestReport,
        ProgressEvent,
        QueryResult,
        RetrievalRecord,
    )
    from services.retrieval.settings import FusionSettings, LoaderLimits, RetrievalSettings

# Where each public name lives: imported on first access (PEP 562), so that importing one submodule
# (say ``services.retrieval.audit``, which the Context pane reads at start-up) does not load the engine.
_HOMES = {
    "RetrievalEngine": "engine",
    "derive_index_name": "engine",
    "parse_handle": "engine",
    "ChunkView": "models",
    "FileIssue": "models",
    "Hit": "models",
    "IndexInfo": "models",
    "IngestReport": "models",
    "ProgressEvent": "models",
    "QueryResult": "models",
    "RetrievalRecord": "models",
    "FusionSettings": "settings",
    "LoaderLimits": "settings",
    "RetrievalSettings": "settings",
}


__getattr__ = lazy_names(__name__, _HOMES)


__all__ = [
    "ChunkView",
    "FileIssue",
    "FusionSettings",
    "Hit",
    "IndexInfo",
    "IngestReport",
    "LoaderLimits",
    "ProgressEvent",
    "QueryResult",
    "RetrievalEngine",
    "RetrievalRecord",
    "RetrievalSettings",
    "derive_index_name",
    "parse_handle",
]
