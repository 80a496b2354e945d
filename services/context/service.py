"""The context service of a workspace: add resources, run the queue, sessions, packages, reconcile.

``ContextService(workspace, engine_factory=…, indexer=…)`` opens ``ContextTree(workspace.root /
"context")``.  Every surface (CLI, TUI, tools) goes through it:

* The tool session (URL fetches) is ``session=`` or, made on first use and closed with the service,
  ``session_factory()`` (the CLI passes one; this package cannot import :mod:`services.session.session`).
* :meth:`ContextService.add` stages a local file/folder or a fetched URL under ``axiom://temp``
  (:mod:`services.context.ingest`), moves it into place with one rename
  (:meth:`ContextTree.finalize`) only when it is complete, and enqueues a ``tiers`` and an ``index``
  job (:mod:`services.context.queue`); it returns at once.  A URL is fetched through the session's
  ``builtin:web:fetch`` tool, so the policy (and the approval step) decide: a refused URL is
  :class:`~services.context.ingest.UrlRefused` and nothing is written.
* :meth:`ContextService.process_queue` is the worker: tiers (:func:`synthesize_tiers`) then
  ``indexer(tree)``; idempotent and replay-safe (see :mod:`services.context.queue`).
* :attr:`ContextService.sessions` is the :class:`SessionStore` of the ``session`` scope whose
  ``on_written`` enqueues a ``commit-index`` job for the new memory files.
* :meth:`ContextService.reconcile` (the steps and report of :mod:`services.context.reconcile`);
  the evidence reports over a service are :func:`services.context.evidence.write_evidence`.

Who indexes: ``indexer(tree)`` when given; else ``sync_index(tree, engine)`` of
:mod:`services.context.index` (the one ``context`` index of the workspace).  The engine comes from ``engine_factory``
(default: a :class:`~services.retrieval.RetrievalEngine` on the workspace, opened on first use).

``ARIES_CONTEXT_INGEST_FAULT=<step>[:kill|:sleep=<s>]`` stops the process at a named step
(``staged``, ``finalized``, ``enqueued``, ``running``, ``worked``) for crash tests; it does nothing
unless set.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from services.audit.db import AUDIT_FILE
from services.context.errors import ResourceNotFound, WrongKind
from services.context.ingest import (
    AddReport,
    IngestError,
    Progress,
    collect_local,
    default_name,
    fetch_url,
    is_url,
    url_name,
)
from services.context.queue import Job, JobQueue
from services.context.reconcile import ReconcileReport, index_dict, package_staging, pending_commits
from services.context.requests import RequestLog, logged
from services.context.scopes import check_write
from services.context.sessions import ContextSession, Extractor, SessionStore, recover_commit
from services.context.settings import ContextSettings
from services.context.tiers import ABSTRACT, OVERVIEW, synthesize_tiers
from services.context.tree import ContextTree, Entry
from services.context.uri import AxiomUri
from services.files.crashpoints import crash_point
from services.workspace.paths import WorkspacePaths

if TYPE_CHECKING:
    from services.context.packages import PackageReport
    from services.context.session_commit import CommitReport
    from services.workspace.manager import Workspace

Indexer = Callable[[ContextTree], object]


class ToolSession(Protocol):
    """What this service needs of a :class:`services.session.session.Session`: its engine, its governed tool
    calls (a URL fetch), and closing.  A protocol, because ``services.session.session`` imports this package."""

    def engine(self) -> Any: ...

    def call_tool_sync(self, tool_id: str, args: Any, **kwargs: Any) -> Any: ...

    def close(self, reason: str = ...) -> None: ...


FAULT_ENV = "ARIES_CONTEXT_INGEST_FAULT"
TIER_SCOPES = ("resources", "user", "agent")


def fault(step: str) -> None:
    """Crash-test hook: stop here when ``ARIES_CONTEXT_INGEST_FAULT`` names this step."""
    crash_point(FAULT_ENV, step)


def _folder_of(source_path: str) -> str:
    """The folder URI of a path relative to the context root (``user/memories/x.md``)."""
    parts = Path(source_path).parts
    return str(AxiomUri(parts[0], tuple(parts[1:-1])))


@dataclass
class QueueReport:
    processed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    tiers_changed: list[str] = field(default_factory=list)
    index: object = None
    remaining: int = 0

    def to_dict(self) -> dict[str, Any]:
        index = self.index
        return {
            "processed": list(self.processed),
            "failed": [{"job": job, "error": error} for job, error in self.failed],
            "tiers_changed": list(self.tiers_changed),
            "index": index_dict(index),
            "remaining": self.remaining,
        }


class ContextService:
    """The ``axiom://`` context filesystem of one workspace (see the module docstring)."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        engine_factory: Callable[[], Any] | None = None,
        indexer: Indexer | None = None,
        session: ToolSession | None = None,
        session_factory: Callable[[], ToolSession] | None = None,
        approver: Any = None,
        settings: ContextSettings | None = None,
        embedder: Any = None,
        on_log_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.workspace = workspace
        self.settings = settings or ContextSettings.from_env()
        self.tree = ContextTree(WorkspacePaths(workspace.root).context)
        self.queue = JobQueue(self.tree)
        self._engine_factory = engine_factory
        self._engine: Any = None
        self._session = session
        self._own_session: ToolSession | None = None
        self._session_factory = session_factory
        self._approver = approver
        self._embedder = embedder
        self.indexer: Indexer = indexer if indexer is not None else self._default_indexer()
        self.sessions = SessionStore(self.tree.root, on_written=self._memory_written)
        self.requests = RequestLog(Path(workspace.root) / AUDIT_FILE, on_warning=on_log_warning)

    # -- plumbing -----------------------------------------------------------------------------
    def engine(self) -> Any:
        if self._engine is None:
            if self._engine_factory is not None:
                self._engine = self._engine_factory()
            elif self._session is not None:
                self._engine = self._session.engine()
            else:
                from services.retrieval import RetrievalEngine

                self._engine = RetrievalEngine(self.workspace)
        return self._engine

    def _default_indexer(self) -> Indexer:
        from services.context.index import sync_index

        return lambda tree: sync_index(tree, self.engine())

    def session(self) -> ToolSession:
        """The tool session URL fetches go through (the given one, else one made here)."""
        if self._session is not None:
            return self._session
        if self._own_session is None:
            # Made by the caller: services.session.session imports this package (the context tools), so
            # this one may not import it back (import-linter: no cycles between sibling packages).
            if self._session_factory is None:
                raise IngestError("adding a URL needs a tool session (the policy decides the fetch); none was given")
            self._own_session = self._session_factory()
        return self._own_session

    def close(self) -> None:
        if self._own_session is not None:
            self._own_session.close()
            self._own_session = None
        if self._engine is not None and self._engine_factory is None and self._session is None:
            self._engine.close()
        self._engine = None
        self.requests.close()

    def __enter__(self) -> ContextService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tier_mode(self) -> tuple[str, Any]:
        mode = self.settings.tier_synthesis
        if mode == "semantic-lite" and self._embedder is None:
            self._embedder = self.engine().embedder
        return mode, self._embedder

    # -- browsing -----------------------------------------------------------------------------
    @logged("ls")
    def ls(self, uri: AxiomUri, *, hidden: bool = False) -> list[Entry]:
        return self.tree.ls(uri, hidden=hidden)

    @logged("read")
    def read(self, uri: AxiomUri, tier: str | None = None) -> str:
        """The text of a file (L2), or of a folder's ``L0``/``L1`` tier file."""
        if tier is None or tier == "L2":
            return self.tree.read_text(uri)
        if tier not in ("L0", "L1"):
            raise WrongKind(f"tier {tier!r}: use L0, L1 or L2")
        if self.tree.stat(uri).kind != "dir":
            raise WrongKind(f"{uri} is a file: only folders have L0/L1 tiers (read it without --tier)")
        tier_uri = uri.join(ABSTRACT if tier == "L0" else OVERVIEW)
        if not self.tree.exists(tier_uri):
            raise ResourceNotFound(f"{uri} has no {tier} tier yet (is the queue drained?)", uri=str(uri))
        return self.tree.read_text(tier_uri)

    # -- add ----------------------------------------------------------------------------------
    @logged("add")
    def add(
        self, source: str, to: AxiomUri | None = None, *, replace: bool = False, progress: Progress | None = None
    ) -> AddReport:
        """Stage ``source`` (path or http(s) URL), move it to ``to`` and enqueue its jobs."""
        if to is not None:
            check_write(to, "user")
        if is_url(source):
            return self._add_url(source, to, replace=replace, progress=progress)
        path = Path(source).expanduser()
        dest = to if to is not None else AxiomUri("resources", (default_name(path.absolute()),))
        existed = self._check_free(dest, replace)
        with self.tree.staging("user") as staging:
            collected = collect_local(path, staging.path, progress)
            fault("staged")
            self.tree.finalize(staging, dest, replace=replace)
        report = AddReport(source, str(dest), collected.kind, collected.files, collected.skipped, collected.bytes)
        report.replaced = existed
        fault("finalized")
        report.jobs = self._enqueue_change(dest)
        fault("enqueued")
        return report

    @logged("replace")
    def replace_file(self, uri: AxiomUri, data: bytes) -> list[str]:
        """The operator's full-document replace of the file ``uri`` (the web editor): the ``user``
        scope rules, one atomic write, then its ``tiers`` and ``index`` jobs are queued (returned);
        :meth:`process_queue` applies them."""
        check_write(uri, "user")
        if self.tree.stat(uri).kind != "file":
            raise WrongKind(f"{uri} is not a file", uri=str(uri))
        self.tree.write_bytes(uri, data, actor="user")
        return self._enqueue_change(uri)

    def _check_free(self, dest: AxiomUri, replace: bool) -> bool:
        from services.context.errors import ResourceExists

        check_write(dest, "user")
        exists = self.tree.exists(dest)
        if exists and not replace:
            raise ResourceExists(f"{dest} already exists; add it elsewhere (--to) or use --replace", uri=str(dest))
        return exists

    def _add_url(self, url: str, to: AxiomUri | None, *, replace: bool, progress: Progress | None) -> AddReport:
        body, final_url, content_type = fetch_url(self.session(), self.workspace, url)
        name = url_name(final_url, content_type)
        dest = to if to is not None else AxiomUri("resources", (name,))
        existed = self._check_free(dest, replace)
        with self.tree.staging("user") as staging:
            staging.path.write_bytes(body)
            if progress:
                progress("fetch", 1, 1)
            fault("staged")
            self.tree.finalize(staging, dest, replace=replace)
        report = AddReport(url, str(dest), "url", [name], [], len(body), existed)
        fault("finalized")
        report.jobs = self._enqueue_change(dest)
        fault("enqueued")
        return report

    def _enqueue_change(self, uri: AxiomUri, *, index: bool = True) -> list[str]:
        folder = uri if self.tree.exists(uri) and self.tree.stat(uri).kind == "dir" else uri.parent
        jobs = [self.queue.enqueue("tiers", folder).id]
        if index:
            jobs.append(self.queue.enqueue("index").id)
        return jobs

    # -- the worker ---------------------------------------------------------------------------
    def _tiers_of(self, target: str | None) -> list[str]:
        from services.context.uri import parse_uri

        uri = parse_uri(target) if target else AxiomUri("resources")
        while not uri.is_root and (not self.tree.exists(uri) or self.tree.stat(uri).kind != "dir"):
            uri = uri.parent  # gone or a file meanwhile: its nearest folder
        mode, embedder = self._tier_mode()
        return [str(changed) for changed in synthesize_tiers(self.tree, uri, mode=mode, embedder=embedder)]

    @logged("process_queue")
    def process_queue(self, limit: int | None = None, progress: Progress | None = None) -> QueueReport:
        """Run the queued jobs (oldest first; at most ``limit``): tiers, then one indexer call."""
        report = QueueReport()
        with self.queue.worker():
            jobs = [job for job in self.queue.jobs() if job.state != "failed"]
            if limit is not None:
                jobs = jobs[: max(0, limit)]
            indexing: list[Job] = []
            for number, job in enumerate(jobs, 1):
                self.queue.mark(job, "running")
                fault("running")
                try:
                    if job.kind == "tiers":
                        report.tiers_changed.extend(self._tiers_of(job.target))
                    elif job.kind == "commit-index":
                        for target in sorted({_folder_of(f) for f in job.detail.get("files", [])}):
                            report.tiers_changed.extend(self._tiers_of(target))
                except Exception as exc:  # the job fails; the others go on
                    self._fail(job, exc, report)
                    continue
                if job.kind == "tiers":
                    fault("worked")
                    self.queue.done(job)
                    report.processed.append(job.id)
                else:
                    indexing.append(job)
                if progress:
                    progress("queue", number, len(jobs))
            if indexing:
                try:
                    report.index = self.indexer(self.tree)
                except Exception as exc:
                    for job in indexing:
                        self._fail(job, exc, report)
                else:
                    fault("worked")
                    for job in indexing:
                        self.queue.done(job)
                        report.processed.append(job.id)
            report.remaining = len(self.queue.jobs())
        return report

    def _fail(self, job: Job, exc: Exception, report: QueueReport) -> None:
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        self.queue.mark(job, "failed", str(message)[:500])
        report.failed.append((job.id, str(message)[:500]))

    # -- sessions -----------------------------------------------------------------------------
    def _memory_written(self, paths: list[Path]) -> None:
        files = sorted(Path(os.path.abspath(p)).relative_to(self.tree.root).as_posix() for p in paths)
        if files:
            self.queue.enqueue("commit-index", None, files=files)

    @logged("session.new")
    def session_new(self, session_id: str | None = None) -> ContextSession:
        return self.sessions.create(session_id)

    @logged("session.append")
    def session_append(self, session_id: str, jsonl: Path) -> int:
        return len(self.sessions.load(session_id).append_jsonl(Path(jsonl)))

    @logged("session.commit")
    def session_commit(self, session_id: str, extractor: Extractor | None = None) -> CommitReport:
        session = self.sessions.load(session_id)
        return session.commit(extractor) if extractor is not None else session.commit()

    # -- packages -----------------------------------------------------------------------------
    @logged("export")
    def export(self, uri: AxiomUri, out: Path, *, overwrite: bool = False) -> PackageReport:
        from services.context.packages import export_tree

        if self.tree.stat(uri).kind != "dir":
            raise WrongKind(f"{uri} is not a folder: export a folder", uri=str(uri))
        return export_tree(self.tree.path_of(uri), Path(out), root_label=str(uri), overwrite=overwrite)

    @logged("import")
    def import_package(
        self, package: Path, to: AxiomUri, *, force: bool = False, vectorize: bool = False
    ) -> tuple[PackageReport, list[str]]:
        from services.context.packages import import_tree

        check_write(to, "user")
        if to.is_root or to.scope == "temp":
            raise IngestError(f"import into a folder below a scope, not {to}")
        jobs: list[str] = []
        report = import_tree(
            Path(package),
            self.tree.path_of(to, follow=False),
            force=force,
            vectorize=vectorize,
            on_imported=lambda _dest, vec: jobs.extend(self._enqueue_change(to, index=vec)),
        )
        return report, jobs

    # -- reconcile ------------------------------------------------------------------------------
    @logged("reconcile")
    def reconcile(self, *, full: bool = True) -> ReconcileReport:
        """Run the steps of :mod:`services.context.reconcile` on the tree; report what each changed.

        With ``full=False`` (what the CLI's writing commands run on open) the index step runs only
        when an earlier step changed something.
        """
        tree = self.tree
        report = ReconcileReport()
        report.staging_removed = tree.clean_stale_staging()
        report.package_staging_removed = package_staging(tree.root)
        for session_id in pending_commits(tree.root):
            if recover_commit(tree.root, session_id, on_written=self._memory_written) is not None:
                report.commits_recovered.append(session_id)
        with self.queue.worker():
            for job in self.queue.jobs():
                if job.state in ("running", "failed"):
                    report.jobs_rerun.append(job.id)
                    self.queue.mark(job, "pending")
        queued = self.process_queue()
        report.jobs_processed = len(queued.processed)
        report.jobs_failed = [{"job": job, "error": error} for job, error in queued.failed]
        report.tiers_changed = list(queued.tiers_changed)
        mode, embedder = self._tier_mode()
        for scope in TIER_SCOPES:
            changed = synthesize_tiers(tree, AxiomUri(scope), mode=mode, embedder=embedder)
            report.tiers_changed.extend(str(uri) for uri in changed if str(uri) not in report.tiers_changed)
        if full or report.changed:
            report.index = self.indexer(tree)
        report.queue_remaining = len(self.queue.jobs())
        return report


__all__ = ["FAULT_ENV", "ContextService", "Indexer", "QueueReport", "fault"]
