"""Request logs: every ContextService operation appends one ``context_requests`` row (real SQLite);
a log that cannot be written never fails the operation and is reported once."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.context.errors import ResourceNotFound
from services.context.requests import RequestLog
from services.context.service import ContextService
from services.context.uri import parse_uri
from services.workspace.manager import WorkspaceManager


def test_each_operation_is_one_row_with_outcome_and_counts(aries_home: Path, tmp_path: Path) -> None:
    workspace, _ = WorkspaceManager().create("reqlog")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nalpha text\n")
    with ContextService(workspace, indexer=lambda tree: None) as service:
        service.add(str(docs))
        service.ls(parse_uri("axiom://resources"))
        with pytest.raises(ResourceNotFound):
            service.read(parse_uri("axiom://resources/nope.md"))
        rows = service.requests.recent(10)
    assert [r["operation"] for r in rows] == ["read", "ls", "add"]
    assert rows[0]["outcome"] == ResourceNotFound.code and rows[0]["target"] == "axiom://resources/nope.md"
    assert rows[1]["outcome"] == "ok" and rows[1]["counts"] == {"items": 1}
    assert rows[2]["counts"]["files"] == 1 and rows[2]["counts"]["bytes"] > 0
    assert "alpha" not in str(rows)  # never contents


def test_an_unwritable_log_never_fails_the_operation_and_says_so_once(tmp_path: Path) -> None:
    (tmp_path / "audit.db").mkdir()  # not a database: every write fails
    said: list[str] = []
    log = RequestLog(tmp_path / "audit.db", on_warning=said.append)
    for _ in range(3):
        with log.request("ls", "axiom://resources") as req:
            req.counts = {"items": 0}
    assert len(said) == 1 and "context request log not written" in said[0]
