"""The retrieval engine of one workspace: index lifecycle, hybrid query, inspection, audit.

This is what the TUI (from worker threads), the CLI and the headless ``ask`` mode call.
Every method is synchronous and thread-safe; long ones (``index_add``, the first ``query``
with the sentence-transformers model, :meth:`preload`) belong in a worker thread.

Citation handles are ``<index>:<chunk_id>``.  Chunk ids depend only on the file's relative
path, the chunk's offsets and its text (see :mod:`services.retrieval.chunking`), so the
handles of an unchanged file survive re-indexing, restarts and other processes.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from services.clock import format_ts
from services.errors import InvalidInput, InvalidName, NotFound
from services.names import validate_name
from services.retrieval.audit import AUDIT_DB, RetrievalAudit
from services.retrieval.chunking import ChunkConfig, chunk_document, default_counter
from services.retrieval.embedders import Embedder, create_embedder, preload
from services.retrieval.errors import (
    DuplicateSource,
    EmptyDocument,
    FileTooLarge,
    HandleNotFound,
    IndexMismatch,
    IndexNotFound,
    IngestError,
    MalformedDocument,
    NoActiveIndex,
    UnsafePath,
    UnsupportedType,
)
from services.retrieval.fusion import fuse
from services.retrieval.ingest import Batch, Cancelled, flush
from services.retrieval.loaders import SANDBOXED_TYPES, content_type_for, load_bytes
from services.retrieval.models import (
    ChunkView,
    Document,
    FileIssue,
    Hit,
    IndexInfo,
    IngestReport,
    ProgressEvent,
    QueryResult,
    RetrievalRecord,
)
from services.retrieval.settings import RetrievalSettings
from services.retrieval.store import FileRecord, IndexStore, read_index_info

if TYPE_CHECKING:
    from services.retrieval.sandbox import LoaderSandbox
    from services.workspaces import Workspace

ProgressCallback = Callable[[ProgressEvent], None]
MAX_K = 1000


def _issue(path: str, error: IngestError) -> FileIssue:
    return FileIssue(path=path, code=error.code, error=type(error).__name__, message=error.message)


def derive_index_name(path: Path) -> str:
    """An index name from a folder or file name, tidied for handles (``My Docs!/`` → ``My-Docs``)."""
    base = path.stem if path.is_file() else path.name
    cleaned = re.sub(r"[^\w.-]+", "-", base, flags=re.UNICODE).strip(".-")[:64].strip(".-")
    try:
        return validate_name(cleaned, "index")
    except InvalidName:
        return "index"


def parse_handle(handle: str) -> tuple[str, str]:
    index, sep, chunk_id = handle.strip().partition(":")
    if not sep or not index or not re.fullmatch(r"[0-9a-f]{16}", chunk_id):
        raise InvalidInput(f"{handle!r} is not a citation handle; expected <index>:<16 hex digits>")
    return index, chunk_id


class RetrievalEngine:
    """Indexes under ``<workspace>/indexes/<name>/`` and hybrid BM25 + dense queries over them."""

    def __init__(
        self,
        workspace: Workspace,
        settings: RetrievalSettings | None = None,
        *,
        embedder: Embedder | None = None,
        chroma_url: str | None = None,
        chunk_config: ChunkConfig | None = None,
    ) -> None:
        settings = settings or RetrievalSettings.from_env()
        if chroma_url is not None:
            settings = settings.with_(chroma_url=chroma_url)
        self.settings = settings
        self.workspace = workspace
        self.embedder = embedder or create_embedder(settings)
        self.chunk_config = chunk_config or ChunkConfig()
        self.audit = RetrievalAudit(workspace.root / AUDIT_DB, workspace=workspace.name)
        self._stores: dict[str, IndexStore] = {}
        self._lock = threading.RLock()
        self._sandbox: LoaderSandbox | None = None
        self._memory_active: str | None = None

    # -- life cycle ------------------------------------------------------------------------
    @property
    def backend(self) -> str:
        return self.settings.backend

    @property
    def persistent(self) -> bool:
        return self.settings.backend == "sqlite" and not self.workspace.ephemeral

    def preload(self) -> None:
        """Load the embedding model and the store libraries now (call from a worker thread)."""
        import chromadb  # noqa: F401
        import tantivy  # noqa: F401

        default_counter()
        preload(self.embedder)

    def close(self) -> None:
        with self._lock:
            for store in self._stores.values():
                store.close()
            self._stores.clear()
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None
            self.audit.close()

    def __enter__(self) -> RetrievalEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _index_dir(self, name: str) -> Path:
        return self.workspace.indexes_dir / validate_name(name, "index")

    def _exists(self, name: str) -> bool:
        if self.settings.backend == "memory":
            return name in self._stores
        return (self._index_dir(name) / "manifest.db").is_file()

    def _store(self, name: str, *, create: bool = False) -> IndexStore:
        validate_name(name, "index")
        with self._lock:
            store = self._stores.get(name)
            if store is not None:
                return store
            if not create and not self._exists(name):
                raise IndexNotFound(f"no index named {name!r}; see: rag index list", index=name)
            if self.settings.backend == "memory":
                store = IndexStore(name, None, chroma_url=self.settings.chroma_url)
            else:
                directory = self._index_dir(name)
                chroma_url = self.settings.chroma_url
                existed = directory.exists()
                if existed:
                    info = read_index_info(directory) or {}
                    chroma_url = info.get("chroma_url", chroma_url)
                try:
                    store = IndexStore(name, directory, chroma_url=chroma_url)
                except BaseException:
                    if not existed:  # leave no half-created index behind
                        import shutil

                        shutil.rmtree(directory, ignore_errors=True)
                    raise
            self._stores[name] = store
            return store

    def _sandboxed(self) -> LoaderSandbox:
        from services.retrieval.sandbox import LoaderSandbox

        with self._lock:
            if self._sandbox is None:
                self._sandbox = LoaderSandbox(self.settings.limits)
            return self._sandbox

    def _check_model(self, store: IndexStore) -> None:
        built_with = store.get_meta("embedding_model")
        if built_with is not None and built_with != self.embedder.model_id:
            raise IndexMismatch(
                f"index {store.name!r} was built with {built_with}, but the embedder now is {self.embedder.model_id}; "
                f"set AXIOMME_EMBEDDER to match, or drop and re-add the index",
                index=store.name,
            )

    # -- index lifecycle -------------------------------------------------------------------
    def index_list(self) -> list[IndexInfo]:
        active = self.active_index
        infos: list[IndexInfo] = []
        if self.settings.backend == "memory":
            for name, store in sorted(self._stores.items()):
                files, chunks = store.counts()
                infos.append(
                    IndexInfo(
                        name=name,
                        active=name == active,
                        backend="memory",
                        embedding_model=store.get_meta("embedding_model"),
                        files=files,
                        chunks=chunks,
                        roots=store.roots(),
                        created_at=store.get_meta("created_at"),
                        updated_at=store.get_meta("updated_at"),
                    )
                )
            return infos
        directory = self.workspace.indexes_dir
        if not directory.is_dir():
            return []
        for entry in sorted(directory.iterdir()):
            info = read_index_info(entry) if entry.is_dir() else None
            if info is None:
                continue
            infos.append(
                IndexInfo(
                    name=entry.name,
                    active=entry.name == active,
                    backend="sqlite",
                    embedding_model=info.get("embedding_model"),
                    files=int(info.get("files", 0)),
                    chunks=int(info.get("chunks", 0)),
                    roots=list(info.get("roots", [])),
                    created_at=info.get("created_at"),
                    updated_at=info.get("updated_at"),
                )
            )
        return infos

    def index_info(self, name: str) -> IndexInfo:
        for info in self.index_list():
            if info.name == name:
                return info
        raise IndexNotFound(f"no index named {name!r}; see: rag index list", index=name)

    @property
    def active_index(self) -> str | None:
        """The index queries go to: the workspace's ``active_index`` setting, if that index exists.

        With the ``memory`` backend the choice lives in this engine only (its indexes do not
        outlive it, so the workspace file is not touched).
        """
        if self.settings.backend == "memory":
            value = self._memory_active
        else:
            value = self.workspace.setting("active_index")
        if not value:
            return None
        name = str(value)
        try:
            return name if self._exists(name) else None
        except InvalidName:
            return None

    def _active_setting(self) -> str | None:
        value = self._memory_active if self.settings.backend == "memory" else self.workspace.setting("active_index")
        return str(value) if value else None

    def _set_active(self, name: str | None) -> None:
        if self.settings.backend == "memory":
            self._memory_active = name
        else:
            self.workspace.update(active_index=name)

    def index_use(self, name: str) -> IndexInfo:
        validate_name(name, "index")
        if not self._exists(name):
            raise IndexNotFound(f"no index named {name!r}; see: rag index list", index=name)
        self._set_active(name)
        return self.index_info(name)

    def index_drop(self, name: str) -> None:
        validate_name(name, "index")
        with self._lock:
            store = self._stores.pop(name, None)
            if store is None and self._exists(name):
                try:
                    store = self._store(name)
                    self._stores.pop(name, None)
                except Exception:
                    store = None
            if store is not None:
                store.destroy()
            elif self.settings.backend == "memory" or not self._index_dir(name).exists():
                raise IndexNotFound(f"no index named {name!r}", index=name)
            else:
                import shutil

                shutil.rmtree(self._index_dir(name))
        if self._active_setting() == name:
            self._set_active(None)

    # -- ingest ----------------------------------------------------------------------------
    def index_add(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> IngestReport:
        """Index a file or a folder (recursively) into ``name``; incremental and whole-file atomic.

        Unchanged files (same content hash and chunking) are skipped, changed ones replaced,
        files gone from the folder dropped.  Unreadable files are listed in ``report.errors``
        with a typed error; links that leave the root, unsupported types and special files
        in ``report.skipped``.  Setting ``cancel`` stops between files (and between embedding
        groups): files already written stay, the batch in progress is not written.
        """
        started = time.monotonic()
        given = Path(os.fspath(path)).expanduser()
        if not given.exists():
            raise NotFound(f"{given}: no such file or folder")
        root = given.resolve(strict=True)
        name = validate_name(name, "index") if name is not None else derive_index_name(root)
        candidates, skipped = self._scan(root)  # before anything is created: refuse a bad root cleanly
        store = self._store(name, create=True)
        self._check_model(store)
        if store.get_meta("embedding_model") is None:
            store.set_meta(embedding_model=self.embedder.model_id)
        report = IngestReport(index=name, root=root.as_posix())
        counter = default_counter()
        chunk_key = self.chunk_config.key(counter)
        root_key = root.as_posix()

        def emit(stage: str, done: int, total: int, where: str | None = None) -> None:
            if progress is not None:
                progress(ProgressEvent(stage, done, total, where))

        report.skipped.extend(skipped)
        emit("scan", len(candidates), len(candidates))
        store.add_root(root_key)
        known = {record.source_path: record for record in store.files_under(root_key)}
        kept: set[str] = set()
        batch = Batch()
        pending: list[tuple[str, bool, int]] = []  # (source path, is new, chunks) of the unwritten batch
        embedded = 0

        def on_group(count: int) -> None:
            nonlocal embedded
            embedded += count
            emit("embed", embedded, batch.chunk_count)

        def write(writer: Any) -> None:
            nonlocal embedded
            embedded = 0
            report.chunks_removed += flush(writer, self.embedder, batch, cancel, on_group)
            for source_path, is_new, count in pending:
                (report.added if is_new else report.updated).append(source_path)
                report.chunks_added += count
            pending.clear()
            emit("commit", len(kept), len(candidates))

        with store.writing() as writer:
            try:
                for number, (rel, real) in enumerate(candidates, start=1):
                    if cancel is not None and cancel.is_set():
                        raise Cancelled
                    emit("file", number, len(candidates), rel)
                    existing = known.get(rel) or store.file(rel)
                    if existing is not None and existing.root != root_key:
                        report.errors.append(
                            _issue(
                                rel,
                                DuplicateSource(f"{rel} is already indexed from {existing.root}; use another index"),
                            )
                        )
                        continue
                    try:
                        data, mtime = self._read(real)
                        content_hash = hashlib.sha256(data).hexdigest()
                        if (
                            existing is not None
                            and existing.content_hash == content_hash
                            and existing.config_key == chunk_key
                        ):
                            kept.add(rel)
                            report.unchanged.append(rel)
                            continue
                        content_type = content_type_for(rel) or "text/plain"
                        document = self._load(content_type, data)
                        chunks = chunk_document(
                            document, rel, embedding_model=self.embedder.model_id, config=self.chunk_config
                        )
                        if not chunks:
                            raise EmptyDocument("the file has no text")
                    except IngestError as exc:
                        report.errors.append(_issue(rel, exc))
                        if existing is not None:
                            batch.removals.append(rel)
                            report.removed.append(rel)
                        continue
                    record = FileRecord(
                        source_path=rel,
                        root=root_key,
                        content_hash=content_hash,
                        size=len(data),
                        content_type=document.content_type,
                        last_modified=format_ts(datetime.fromtimestamp(mtime, UTC)),
                        title=document.title,
                        config_key=chunk_key,
                    )
                    kept.add(rel)
                    batch.files.append((record, chunks))
                    pending.append((rel, existing is None, len(chunks)))
                    if batch.full():
                        write(writer)
                gone = sorted(set(known) - kept - set(batch.removals))
                batch.removals.extend(gone)
                report.removed.extend(gone)
                if batch:
                    write(writer)
            except Cancelled:
                report.cancelled = True
                report.removed = [path for path in report.removed if store.file(path) is None]
        if not report.cancelled and self.active_index is None:
            self._set_active(name)
            report.activated = True
        report.elapsed_s = round(time.monotonic() - started, 3)
        emit("done", len(candidates), len(candidates))
        return report

    def _scan(self, root: Path) -> tuple[list[tuple[str, Path]], list[FileIssue]]:
        """(relative POSIX path, real path) of the files to read, sorted; and what was skipped."""
        skipped: list[FileIssue] = []
        if root.is_file():
            if content_type_for(root.name) is None:
                raise UnsupportedType(
                    f"{root.name}: unsupported file type (supported: PDF, EPUB, Markdown, text, HTML)"
                )
            return [(root.name, root)], skipped
        found: list[tuple[str, Path]] = []
        for directory, dirnames, filenames in os.walk(root, followlinks=False):
            base = Path(directory)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for dirname in list(dirnames):
                link = base / dirname
                if link.is_symlink():
                    dirnames.remove(dirname)
                    rel = link.relative_to(root).as_posix()
                    target = link.resolve()
                    reason = (
                        UnsafePath(f"{rel}: the link points outside the root ({target})")
                        if not target.is_relative_to(root)
                        else UnsupportedType(f"{rel}: links to folders are not followed")
                    )
                    skipped.append(_issue(rel, reason))
            for filename in sorted(filenames):
                if filename.startswith("."):
                    continue
                path = base / filename
                rel = path.relative_to(root).as_posix()
                if content_type_for(filename) is None:
                    skipped.append(_issue(rel, UnsupportedType(f"{rel}: unsupported file type")))
                    continue
                real = path.resolve()
                if not real.is_relative_to(root):
                    skipped.append(_issue(rel, UnsafePath(f"{rel}: the link points outside the root ({real})")))
                    continue
                try:
                    mode = real.stat().st_mode
                except OSError as exc:
                    skipped.append(_issue(rel, MalformedDocument(f"{rel}: cannot stat: {exc.strerror}")))
                    continue
                if not stat.S_ISREG(mode):
                    skipped.append(_issue(rel, UnsupportedType(f"{rel}: not a regular file")))
                    continue
                found.append((rel, real))
        found.sort(key=lambda item: PurePosixPath(item[0]).parts)
        return found, skipped

    def _read(self, real: Path) -> tuple[bytes, float]:
        """The file's bytes (opened without following a last-moment link) and its mtime."""
        limit = self.settings.limits.max_file_bytes
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(real, flags)
        except OSError as exc:
            raise MalformedDocument(f"cannot open: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise UnsupportedType("not a regular file")
            if info.st_size > limit:
                raise FileTooLarge(f"{info.st_size} bytes is over the {limit}-byte limit")
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise FileTooLarge(f"the file grew over the {limit}-byte limit while it was read")
        if not data:
            raise EmptyDocument("the file is empty")
        return data, info.st_mtime

    def _load(self, content_type: str, data: bytes) -> Document:
        if content_type in SANDBOXED_TYPES:
            return self._sandboxed().load(content_type, data)
        return load_bytes(content_type, data, self.settings.limits)

    # -- query -----------------------------------------------------------------------------
    def query(
        self,
        text: str,
        k: int = 10,
        *,
        index: str | None = None,
        top_n: int | None = None,
        score_threshold: float | None = None,
    ) -> QueryResult:
        """Hybrid search of ``index`` (default: the active one); the entry is audited.

        ``top_n`` candidates come from each retriever (BM25 and dense) and are fused; the
        best ``k`` live chunks are returned, each with its fused score and both retrievers'
        ranks and scores.  ``score_threshold`` drops hits whose fused score is lower.
        """
        started = time.perf_counter()
        if not text or not text.strip():
            raise InvalidInput("the query is empty")
        if not 1 <= k <= MAX_K:
            raise InvalidInput(f"k must be between 1 and {MAX_K}")
        top_n = top_n or self.settings.top_n
        if top_n < 1:
            raise InvalidInput("top_n must be at least 1")
        name = index or self.active_index
        if name is None:
            raise NoActiveIndex("no active index; add one with: rag index add <path>, or pick one with: rag index use")
        store = self._store(name)
        self._check_model(store)
        candidates = max(top_n, k)
        bm25 = store.bm25(text, candidates)
        dense = store.dense(self.embedder.embed_query(text), candidates)
        fused = fuse(bm25, dense, self.settings.fusion)
        if score_threshold is not None:
            fused = [item for item in fused if item.score >= score_threshold]
        hits: list[Hit] = []
        position = 0
        while len(hits) < k and position < len(fused):
            window = fused[position : position + 2 * k]
            position += len(window)
            live = store.get_chunks([item.chunk_id for item in window])
            for item in window:
                stored = live.get(item.chunk_id)
                if stored is None:
                    continue
                chunk = stored.chunk
                hits.append(
                    Hit(
                        rank=len(hits) + 1,
                        handle=f"{name}:{chunk.chunk_id}",
                        chunk_id=chunk.chunk_id,
                        index=name,
                        source_path=chunk.source_path,
                        page=chunk.page,
                        section=chunk.section,
                        score=item.score,
                        bm25_rank=item.bm25_rank,
                        bm25_score=item.bm25_score,
                        dense_rank=item.dense_rank,
                        dense_score=item.dense_score,
                        text=chunk.text,
                    )
                )
                if len(hits) >= k:
                    break
        fusion = asdict(self.settings.fusion)
        params: dict[str, Any] = {
            "k": k,
            "top_n": top_n,
            "score_threshold": score_threshold,
            "fusion": fusion,
            "backend": self.settings.backend,
        }
        audit_id = self.audit.record(
            query=text,
            index=name,
            embedding_model=self.embedder.model_id,
            params=params,
            hits=[hit.to_dict(with_text=False) for hit in hits],
        )
        return QueryResult(
            query=text,
            index=name,
            embedding_model=self.embedder.model_id,
            k=k,
            top_n=top_n,
            fusion=fusion,
            hits=hits,
            elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
            audit_id=audit_id,
        )

    # -- inspection ------------------------------------------------------------------------
    def show(self, handle: str) -> ChunkView:
        """Full text and metadata of the chunk behind a citation handle."""
        name, chunk_id = parse_handle(handle)
        try:
            validate_name(name, "index")
        except InvalidName as exc:
            raise InvalidInput(f"{handle!r}: {exc.message}") from None
        if not self._exists(name):
            raise HandleNotFound(f"{handle}: there is no index named {name!r}", handle=handle)
        store = self._store(name)
        found = store.get_chunks([chunk_id]).get(chunk_id)
        if found is None:
            raise HandleNotFound(f"{handle}: no such chunk (the file may have changed since)", handle=handle)
        chunk, record = found.chunk, found.file
        return ChunkView(
            handle=f"{name}:{chunk.chunk_id}",
            index=name,
            chunk_id=chunk.chunk_id,
            text=chunk.text,
            context=chunk.context,
            source_path=chunk.source_path,
            root=record.root,
            content_type=record.content_type,
            last_modified=record.last_modified,
            page=chunk.page,
            section=chunk.section,
            start_offset=chunk.start_offset,
            end_offset=chunk.end_offset,
            hash=chunk.hash,
            embedding_model=chunk.embedding_model,
            ordinal=chunk.ordinal,
        )

    def last(self) -> RetrievalRecord | None:
        """The newest retrieval of this workspace (from ``audit.db``, so it survives restarts)."""
        return self.audit.last()

    def history(self, limit: int = 20) -> list[RetrievalRecord]:
        return self.audit.recent(limit)
