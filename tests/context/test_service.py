"""The context service in-process: add (files, folders, URLs through the policy), the queue, sessions,
reconcile and evidence — on a real workspace, a real RetrievalEngine (Tantivy + Chroma on a temp dir,
hash embedder) and loopback HTTP servers.  The indexer is :func:`services.context.index.sync_index`: the
workspace's one ``context`` index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.context.errors import ResourceExists, ScopeReadOnly
from services.context.evidence import write_evidence
from services.context.index import sync_index
from services.context.ingest import NothingToAdd, UnsupportedSource, UrlRefused
from services.context.service import ContextService
from services.context.tiers import ABSTRACT, OVERVIEW
from services.context.uri import AxiomUri, parse_uri
from services.session.session import Session
from services.tools.calls import approve_all
from services.workspace.manager import WorkspaceManager
from tests.tools.conftest import policy_data

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def engine_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AXIOMME_EMBEDDER", "hash")
    monkeypatch.delenv("ARIES_CONTEXT_INGEST_FAULT", raising=False)


@pytest.fixture
def service(engine_env: None, aries_home: Path) -> Iterator[ContextService]:
    from services.retrieval import RetrievalEngine

    workspace = WorkspaceManager().create("demo")[0]
    engine = RetrievalEngine(workspace)
    svc = ContextService(
        workspace,
        indexer=lambda tree: sync_index(tree, engine),
        session_factory=lambda: Session(workspace, source="cli", interactive=False, approver=approve_all),
    )
    yield svc
    svc.close()
    engine.close()
    workspace.close()


def make_docs(base: Path) -> Path:
    docs = base / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "README.md").write_text("# Docs\n\nThe docs explain the Tantivy engine.\n", encoding="utf-8")
    (docs / "guide" / "install.md").write_text("# Install\n\nRun pip install to set up quokka.\n", encoding="utf-8")
    (docs / "notes.txt").write_text("Plain notes about chroma vectors.\n", encoding="utf-8")
    (docs / "image.png").write_bytes(b"\x89PNG\r\n")
    (docs / ".secret.md").write_text("hidden\n", encoding="utf-8")
    return docs


def test_scenario_a_add_a_folder_then_read_tiers_and_an_l2_file(service: ContextService, tmp_path: Path) -> None:
    docs = make_docs(tmp_path)
    report = service.add(str(docs))
    assert report.uri == "axiom://resources/docs"
    assert report.files == ["README.md", "guide/install.md", "notes.txt"]
    assert dict(report.skipped) == {
        ".secret.md": "names beginning with '.' are reserved inside the context tree",
        "image.png": "unsupported file type",
    }
    assert [j.kind for j in service.queue.jobs()] == ["tiers", "index"]
    # not processed yet: no tiers
    assert not service.tree.exists(parse_uri("axiom://resources/docs").join(ABSTRACT))
    queued = service.process_queue()
    assert len(queued.processed) == 2 and not queued.failed and queued.remaining == 0
    assert service.queue.jobs() == []
    root = parse_uri("axiom://resources/docs")
    for folder in (root, root.join("guide"), AxiomUri("resources")):
        assert service.tree.exists(folder.join(ABSTRACT)) and service.tree.exists(folder.join(OVERVIEW))
    assert "Docs" in service.read(root, "L0")
    assert "install.md" in service.read(root.join("guide"), "L1")
    assert service.read(root.join("guide").join("install.md")).startswith("# Install")
    added = [path for path in queued.index.added if not path.rsplit("/", 1)[-1].startswith(".")]
    assert added == ["resources/docs/README.md", "resources/docs/guide/install.md", "resources/docs/notes.txt"]
    # indexed for real: the engine finds the L2 text
    result = service.engine().query("quokka", index="context")
    assert "resources/docs/guide/install.md" in [hit.source_path for hit in result.hits]
    # replay-safe: processing the same work again changes nothing
    first = service.reconcile()  # the empty memory scopes get their tiers; nothing else changes
    assert first.consistent and first.tiers_changed == ["axiom://user", "axiom://agent"]
    again = service.reconcile()
    assert again.tiers_changed == [] and again.consistent
    assert again.index is None or (again.index.added == [] and again.index.updated == [])


def test_existing_destination_is_a_typed_error_unless_replace(service: ContextService, tmp_path: Path) -> None:
    docs = make_docs(tmp_path)
    service.add(str(docs))
    with pytest.raises(ResourceExists):
        service.add(str(docs))
    (docs / "notes.txt").write_text("changed notes\n", encoding="utf-8")
    report = service.add(str(docs), replace=True)
    assert report.replaced
    assert service.read(parse_uri("axiom://resources/docs/notes.txt")) == "changed notes\n"


def test_single_files_unsupported_types_and_bad_destinations(service: ContextService, tmp_path: Path) -> None:
    (tmp_path / "one.md").write_text("# One\n", encoding="utf-8")
    report = service.add(str(tmp_path / "one.md"), parse_uri("axiom://resources/notes/first.md"))
    assert report.uri == "axiom://resources/notes/first.md" and report.kind == "file"
    (tmp_path / "x.bin").write_bytes(b"\0")
    with pytest.raises(UnsupportedSource):
        service.add(str(tmp_path / "x.bin"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.bin").write_bytes(b"\0")
    with pytest.raises(NothingToAdd):
        service.add(str(tmp_path / "empty"))
    for target in ("axiom://queue/x.md", "axiom://session/x.md", "axiom://temp/x.md", "axiom://resources"):
        with pytest.raises(ScopeReadOnly):
            service.add(str(tmp_path / "one.md"), parse_uri(target))
    assert [e.name for e in service.tree.ls(AxiomUri("temp"))] == []


def test_queue_is_visible_and_read_only(service: ContextService, tmp_path: Path) -> None:
    service.add(str(make_docs(tmp_path)))
    entries = service.ls(AxiomUri("queue"))
    assert [e.name.rsplit("-", 1)[-1] for e in entries] == ["tiers.json", "index.json"]
    job = json.loads(service.read(entries[0].uri))
    assert job["kind"] == "tiers" and job["state"] == "pending" and job["target"] == "axiom://resources/docs"
    with pytest.raises(ScopeReadOnly):
        service.tree.write_text(entries[0].uri, "{}", actor="user")
    with pytest.raises(ScopeReadOnly):
        service.tree.remove(entries[0].uri, actor="user")
    service.process_queue()
    assert service.ls(AxiomUri("queue")) == []


def test_a_job_run_twice_changes_nothing(service: ContextService, tmp_path: Path) -> None:
    service.add(str(make_docs(tmp_path)))
    jobs = service.queue.jobs()
    service.process_queue()
    overview = service.tree.path_of(parse_uri("axiom://resources/docs")) / OVERVIEW
    before = (overview.read_bytes(), overview.stat().st_mtime_ns)
    for job in jobs:  # as if the process died after the work, before the done mark
        job.state = "running"
        service.queue._save(job)
    second = service.process_queue()
    assert len(second.processed) == 2 and second.tiers_changed == []
    assert second.index is None or (second.index.added == [] and second.index.updated == [])
    assert (overview.read_bytes(), overview.stat().st_mtime_ns) == before


def test_scenario_c_session_commit_enqueues_and_indexes_memories(service: ContextService, tmp_path: Path) -> None:
    session = service.session_new("s1")
    lines = [
        {"role": "user", "content": "I prefer dark mode in every editor."},
        {"role": "tool", "tool_name": "probe", "content": "probe output"},
        {"role": "user", "content": "We decided to use Tantivy for search."},
    ]
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert service.session_append(session.session_id, jsonl) == 3
    report = service.session_commit("s1")
    assert report.archived == 3 and report.written
    jobs = service.queue.jobs()
    assert [j.kind for j in jobs] == ["commit-index"]
    assert all(f.startswith(("user/memories/", "agent/memories/")) for f in jobs[0].detail["files"])
    queued = service.process_queue()
    assert not queued.failed and queued.remaining == 0
    assert any(u.endswith("/memories") for u in queued.tiers_changed)
    assert any(p.startswith(("user/memories/", "agent/memories/")) for p in queued.index.added)


def _policy(workspace_root: Path, port: int) -> None:
    data: dict[str, Any] = policy_data(workspace_root)
    data["web"] = {"schemes": ["http", "https"], "allow_private": [f"127.0.0.1:{port}"]}
    (workspace_root / "policy.yaml").write_text(json.dumps(data), encoding="utf-8")


def test_url_add_through_the_web_tool_and_its_policy(service: ContextService, loopback: Any) -> None:
    from aiohttp import web

    async def page(_request: Any) -> Any:
        return web.Response(
            text="<html><body><h1>Quokka facts</h1><p>Quokkas smile.</p></body></html>", content_type="text/html"
        )

    server = loopback({"/facts": page})
    _policy(service.workspace.root, server.port)
    report = service.add(f"{server.url}/facts")
    assert report.uri == "axiom://resources/facts.html" and report.kind == "url"
    assert "Quokka facts" in service.read(parse_uri(report.uri))
    assert not service.process_queue().failed
    other = loopback({"/facts": page})  # another port: not allowed by the policy
    with pytest.raises(UrlRefused):
        service.add(f"{other.url}/facts", parse_uri("axiom://resources/other.html"))
    assert not service.tree.exists(parse_uri("axiom://resources/other.html"))
    assert other.requests == []


def test_reconcile_cleans_stale_staging_and_evidence_passes(service: ContextService, tmp_path: Path) -> None:
    service.add(str(make_docs(tmp_path)))
    service.process_queue()
    temp = service.tree.path_of(AxiomUri("temp"))
    (temp / "staging-deadbeef00000000" / "payload").mkdir(parents=True)  # a killed add: no lock held
    report = service.reconcile()
    assert report.staging_removed == ["staging-deadbeef00000000"] and report.consistent
    paths = write_evidence(service, tmp_path / "ev")
    assert [p.name for p in paths] == ["operability.md", "reliability.md", "security.md"]
    texts = [p.read_text() for p in paths]
    assert all("FAIL" not in t for t in texts), "\n".join(texts)
    assert "hostile-URI suite" in texts[2]
    again = [p.read_text() for p in write_evidence(service, tmp_path / "ev2")]
    strip = lambda t: [line for line in t.splitlines() if not line.startswith("Generated:")]  # noqa: E731
    assert [strip(t) for t in texts] == [strip(t) for t in again]
