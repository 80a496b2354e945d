"""The spec's ingest result (``{"id", "ingested": [{"path", "chunks"}], "errors": []}``) from the
engine's ``IngestReport`` — ``aries ingest`` runs the same ``index add`` as ``aries rag index add``;
this only reshapes its report (with the index, the unchanged/removed/skipped files and ``cancelled``).

``id`` is a UUID derived from the index, the root and what was written, so the same ingest of the
same files gives the same id.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.retrieval import RetrievalEngine
    from services.retrieval.models import FileIssue, IngestReport

ID_NAMESPACE = uuid.UUID("0d6f2b8e-3c1a-4f5e-8a7b-2e9c4d1f6a30")


def _chunks(engine: RetrievalEngine, index: str, path: str) -> int:
    """How many chunks ``path`` has in ``index`` now (0 when it is not there)."""
    record = engine.indexes.store(index).manifest.file(path)
    return int(record.chunks) if record is not None else 0


def _issue(issue: FileIssue) -> dict[str, Any]:
    return {"path": issue.path, "code": issue.code, "message": issue.message}


def ingest_result(report: IngestReport, engine: RetrievalEngine) -> dict[str, Any]:
    ingested = [
        {"path": path, "chunks": _chunks(engine, report.index, path), "status": status}
        for status, paths in (("added", report.added), ("updated", report.updated))
        for path in paths
    ]
    key = "\n".join([report.index, report.root, *(f"{i['path']}:{i['chunks']}" for i in ingested)])
    return {
        "id": str(uuid.uuid5(ID_NAMESPACE, key)),
        "index": report.index,
        "root": report.root,
        "ingested": ingested,
        "unchanged": list(report.unchanged),
        "removed": list(report.removed),
        "skipped": [_issue(issue) for issue in report.skipped],
        "errors": [_issue(issue) for issue in report.errors],
        "cancelled": report.cancelled,
    }


__all__ = ["ingest_result"]
