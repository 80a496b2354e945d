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
