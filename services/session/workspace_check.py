"""``check_workspace``: is every store of a workspace readable and sound?

Used by ``aries workspace open NAME --check`` and ``/doctor``.  Each check is one
:class:`CheckResult` (name, ok, detail); a check never raises for what it inspects, and
changes nothing (an older ``audit.db`` is migrated by opening it, as any open would).
Heavy libraries (tantivy, chromadb) are imported only when the workspace has indexes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.errors import AriesError
from services.workspace.paths import AUDIT_FILE, CHROMA_DIR, POLICY_FILE, TANTIVY_DIR, WORKSPACE_FILE

if TYPE_CHECKING:
    from services.workspace.manager import Workspace


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _guarded(name: str, check: Callable[[], str]) -> CheckResult:
    try:
        return CheckResult(name, True, check())
    except AriesError as exc:
        return CheckResult(name, False, exc.message)
    except Exception as exc:  # a check reports; it never takes the caller down
        return CheckResult(name, False, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")


def _workspace_yaml(workspace: Workspace) -> str:
    from services.files.yamlio import load_yaml
    from services.workspace.config import validate_config

    config = validate_config(load_yaml(workspace.meta_path), workspace.meta_path)
    settings = config.settings
    return (
        f"valid: profile {config.profile}, model {settings.model}, approval mode {settings.approval_mode or 'unset'}, "
        f"index in use {settings.active_index or 'none'}"
    )


def _policy_yaml(path: Path) -> str:
    from services.policy import load_policy

    policy = load_policy(path)
    return f"valid, in force for this workspace ({policy.hash[:19]}…)"


def _audit_db(workspace: Workspace) -> str:
    from services.audit.log import AuditStore
    from services.retrieval.audit import pending_report

    path = workspace.paths.audit_db
    if not path.exists():
        return "not created yet (no tool call or retrieval recorded)"
    with AuditStore(path) as store:
        counts = store.counts()
        version = store.schema_version()
    total = sum(counts.values())
    pending = pending_report(path)  # retrievals not committed yet (a running Aries, or a stopped one's)
    return "; ".join([f"integrity ok, schema {version}, {total} finished tool call(s)", *pending])


def _transcripts(workspace: Workspace) -> str:
    from services.workspace.transcripts import iter_problems, list_conversations

    problems = list(iter_problems(workspace.transcripts_dir, repair=False))
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise _Failed(f"{first}{more}")
    return f"{len(list_conversations(workspace.transcripts_dir))} conversation(s), no torn lines"


def _artifacts(workspace: Workspace) -> str:
    problems = workspace.artifacts.verify()
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise _Failed(f"{problems[0]}{more}")
    return f"{len(workspace.artifacts.list())} artifact(s), all objects match their hashes"


class _Failed(AriesError):
    code = "check_failed"


def _index(directory: Path) -> str:
    import os

    from services.retrieval.store_manifest import MANIFEST, quick_check, read_index_info

    manifest = directory / MANIFEST
    if not manifest.is_file():
        raise _Failed(f"{MANIFEST} is missing")
    try:
        verdict = quick_check(manifest)
    except sqlite3.Error as exc:
        raise _Failed(f"{MANIFEST}: {exc}") from None
    if verdict != ["ok"]:
        raise _Failed(f"{MANIFEST} is damaged ({verdict[0] if verdict else 'no answer'})")
    info = read_index_info(directory)
    if info is None:
        raise _Failed(f"{MANIFEST} cannot be read")
    parts = [f"{info['files']} file(s), {info['chunks']} chunk(s)"]
    from services.retrieval.store_locks import IndexLocks

    with IndexLocks(directory.parent, directory.name).store(reader=True):  # never beside a write (embedded Chroma)
        parts.append(_tantivy(directory))
        if os.environ.get("AXIOMME_CHROMA_URL", "").strip():
            parts.append("vectors on the Chroma server (not checked here)")
        else:
            embedded = int(info["chunks"]) - int(info.get("pending") or 0)  # the others: vectors pending, a state
            parts.append(_chroma(directory, str(info.get("collection") or ""), embedded, int(info["chunks"])))
    failed = list(info.get("failed") or [])
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        parts.append(f"{len(failed)} file(s) failed to re-load, old chunks kept: {first['path']}{more}")
    return "; ".join(parts)


def _tantivy(directory: Path) -> str:
    import tantivy

    from services.retrieval.store_lexical import tantivy_schema

    path = directory / TANTIVY_DIR
    if not path.is_dir():
        raise _Failed("the Tantivy folder is missing (it is rebuilt from the manifest on next use)")
    try:
        index = tantivy.Index(tantivy_schema(), path=str(path), reuse=True)
        index.reload()
        documents = index.searcher().num_docs
    except ValueError as exc:
        raise _Failed(f"the Tantivy index does not open ({exc}); it is rebuilt from the manifest on next use") from None
    return f"Tantivy opens ({documents} documents)"


def _chroma(directory: Path, collection: str, chunks: int, total: int) -> str:
    """The vector store opens, holds a vector per chunk of the manifest whose vector is written
    (``chunks`` of ``total``) and answers a probe query."""
    from services.retrieval.models import repair_advice

    path = directory / CHROMA_DIR
    repair = repair_advice(directory.name)
    if not path.is_dir():
        if chunks == 0:
            return "Chroma not created yet (no chunks)"
        raise _Failed(f"the Chroma folder is missing; {repair}")
    import chromadb
    from chromadb.config import Settings

    from services.retrieval.store_vectors import check_vectors

    try:
        client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    except Exception as exc:
        raise _Failed(f"the Chroma store does not open: {' '.join(str(exc).split())[:200]}; {repair}") from None
    try:
        try:
            health = check_vectors(client.get_collection(collection), chunks, total)
        except Exception as exc:
            reason = " ".join(str(exc).split())[:200]
            raise _Failed(f"the Chroma collection does not open: {reason}; {repair}") from None
    finally:
        closer = getattr(client, "close", None)
        if callable(closer):
            closer()
    if not health.ok:
        raise _Failed(f"vector store {health.status}: {health.detail}; {repair}")
    return f"Chroma opens and answers ({health.detail})"


def check_workspace(workspace: Workspace) -> list[CheckResult]:
    """Check ``workspace.yaml``, ``policy.yaml`` (if present), ``audit.db``, the transcripts,
    the artifact registry and each index (manifest, Tantivy, Chroma)."""
    results = [_guarded(WORKSPACE_FILE, lambda: _workspace_yaml(workspace))]
    policy = workspace.paths.policy
    if policy.exists():
        results.append(_guarded(POLICY_FILE, lambda: _policy_yaml(policy)))
    results.append(_guarded(AUDIT_FILE, lambda: _audit_db(workspace)))
    results.append(_guarded("transcripts", lambda: _transcripts(workspace)))
    results.append(_guarded("artifacts", lambda: _artifacts(workspace)))
    if workspace.indexes_dir.is_dir():
        for directory in sorted(p for p in workspace.indexes_dir.iterdir() if p.is_dir() and p.name[0] != "."):
            results.append(_guarded(f"index {directory.name}", lambda d=directory: _index(d)))  # type: ignore[misc]
    return results
