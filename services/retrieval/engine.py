"""The retrieval engine of one workspace: index lifecycle, hybrid query, inspection, audit.

This is what the TUI (from worker threads), the CLI and the headless ``ask`` mode call.
Every method is synchronous and thread-safe; long ones (``index_add``, the first ``query``
with the sentence-transformers model, :meth:`preload`) belong in a worker thread.

Citation handles are ``<index>:<chunk_id>``.  Chunk ids depend only on the file's relative
path, the chunk's offsets and its text (see :mod:`services.retrieval.chunking`), so the
handles of an unchanged file survive re-indexing, restarts and other processes.

The engine is made of parts: :class:`~services.retrieval.engine_indexes.Indexes` (``indexes``:
opening stores, index management), :class:`~services.retrieval.engine_ingest.Ingestor`
(``ingestor``: ``index_add``, ``index_update``) and the retrieval audit (``audit``); this
module puts them together and answers queries, ``show`` and the history.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Self

from services.audit.db import AUDIT_FILE, AuditStoreError
from services.errors import InvalidInput, InvalidName
from services.retrieval.audit import RetrievalAudit
from services.retrieval.chunking import ChunkConfig, default_counter
from services.retrieval.cut import cut, keyword_screen, live_reader
from services.retrieval.embedders import Embedder, backend_of, preload, vector_space
from services.retrieval.engine_indexes import MAX_K, Indexes, ProgressCallback, derive_index_name, parse_handle
from services.retrieval.engine_ingest import Ingestor
from services.retrieval.engine_spaces import VectorSpaces
from services.retrieval.errors import HandleNotFound, NoActiveIndex, VectorStoreDamaged
from services.retrieval.faults import storage_guard
from services.retrieval.fusion import fuse
from services.retrieval.models import ChunkView, Hit, IndexInfo, IngestReport, QueryResult, RetrievalRecord
from services.retrieval.relevance import Relevance, relevance_for
from services.retrieval.settings import RetrievalSettings
from services.retrieval.store import IndexStore
from services.retrieval.store_check import Consistency
from services.retrieval.store_locks import DEFAULT_WRITE_WAIT_S
from services.text.names import validate_name

if TYPE_CHECKING:
    from services.retrieval.backfill import FillReport
    from services.workspace.manager import Workspace

DenseAnswer = tuple[list[tuple[str, float]], list[str]]
"""Dense hits (chunk id, similarity) and the warnings of a keyword-only answer."""

__all__ = ["MAX_K", "ProgressCallback", "RetrievalEngine", "derive_index_name", "parse_handle"]


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
        self.spaces = VectorSpaces(settings, embedder)
        self.embedder = self.spaces.default
        """The embedder of new indexes; an index is served by its own space (:meth:`VectorSpaces.embedder_for`)."""
        self.chunk_config = chunk_config or ChunkConfig(max_chars=settings.limits.max_chunk_chars)
        self.audit = RetrievalAudit(workspace.root / AUDIT_FILE, workspace=workspace.name)
        self.indexes = Indexes(workspace, settings, self.spaces)
        self.ingestor = Ingestor(self.indexes, self.chunk_config)
        self._lock = threading.Lock()
        self._said_unaudited = False  # "not audited" is said once per engine (a read-only workspace)
        self._encoder_pool: ThreadPoolExecutor | None = None

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

    def _encoder(self) -> ThreadPoolExecutor:
        """The thread that embeds queries while BM25 searches (one per engine, started on first use)."""
        with self._lock:
            if self._encoder_pool is None:
                self._encoder_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="query-encoder")
            return self._encoder_pool

    def close(self) -> None:
        with self._lock:
            pool, self._encoder_pool = self._encoder_pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        self.indexes.close()
        self.ingestor.close()
        self.audit.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- indexes (see Indexes and Ingestor) ---------------------------------------------------
    @property
    def active_index(self) -> str | None:
        """The index queries go to (see :attr:`Indexes.active`)."""
        return self.indexes.active

    def index_add(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        wait_s: float = DEFAULT_WRITE_WAIT_S,
        include_hidden: tuple[str, ...] = (),
        exclude_top: tuple[str, ...] = (),
        activate: bool = True,
    ) -> IngestReport:
        """Index a file or a folder into ``name``: see :meth:`Ingestor.add` and :meth:`Ingestor.add_files`."""
        return self.ingestor.add(
            path,
            name,
            progress=progress,
            cancel=cancel,
            wait_s=wait_s,
            include_hidden=include_hidden,
            exclude_top=exclude_top,
            activate=activate,
        )

    def index_update(
        self, name: str, root: str | os.PathLike[str], paths: list[str], *, wait_s: float = DEFAULT_WRITE_WAIT_S
    ) -> IngestReport:
        """Re-read only ``paths`` of ``root`` into index ``name``: see :meth:`Ingestor.update`."""
        return self.ingestor.update(name, root, paths, wait_s=wait_s)

    def index_fill(
        self,
        name: str,
        *,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        wait_s: float = DEFAULT_WRITE_WAIT_S,
    ) -> FillReport:
        """Write the vectors still pending in index ``name``: see :meth:`Ingestor.fill`."""
        return self.ingestor.fill(name, progress=progress, cancel=cancel, wait_s=wait_s)

    def indexes_pending(self) -> list[str]:
        """The indexes with vectors pending (their manifests read, nothing opened); the memory
        backend's indexes are filled by the ingest that made them."""
        if self.settings.backend == "memory":
            return []
        from services.retrieval.backfill import pending_indexes

        return pending_indexes(self.workspace.indexes_dir)

    def index_list(self, *, check: bool = True) -> list[IndexInfo]:
        return self.indexes.list(check=check)

    def index_info(self, name: str, *, check: bool = True) -> IndexInfo:
        return self.indexes.info(name, check=check)

    def index_use(self, name: str) -> IndexInfo:
        return self.indexes.use(name)

    def index_check(self, name: str) -> Consistency:
        return self.indexes.check(name)

    def index_drop(self, name: str) -> None:
        self.indexes.drop(name)

    def index_repair(
        self,
        name: str,
        *,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        wait_s: float = DEFAULT_WRITE_WAIT_S,
    ) -> int:
        """Rebuild the vectors of index ``name`` from its manifest: see :meth:`Indexes.repair`."""
        return self.indexes.repair(name, progress=progress, cancel=cancel, wait_s=wait_s)

    # -- query -----------------------------------------------------------------------------
    def query(
        self,
        text: str,
        k: int = 10,
        *,
        index: str | None = None,
        top_n: int | None = None,
        score_threshold: float | None = None,
        relevance: Relevance | None = None,
    ) -> QueryResult:
        """Hybrid search of ``index`` (default: the active one); the entry is audited.

        ``top_n`` candidates come from each retriever (BM25 and dense) and are fused; ``k`` live
        chunks are returned, each with its fused score and both retrievers' ranks and scores: the
        relevant ones first (``relevance``, default the workspace's threshold: see
        :mod:`services.retrieval.cut`), then the best of the rest, each group in fused order.
        ``score_threshold`` drops hits whose fused score is lower.
        """
        started = time.perf_counter()
        top_n = self._checked(text, k, top_n)
        name = index or self.active_index
        if name is None:
            raise NoActiveIndex("no active index; add one with: rag index add <path>, or pick one with: rag index use")
        relevance = relevance or relevance_for(self.workspace)
        hits, warnings, embedder, vector, share = self._search(name, text, max(top_n, k), k, score_threshold, relevance)
        backend, quantization = backend_of(embedder)
        mode = "keyword" if warnings else "hybrid"
        fusion = asdict(self.settings.fusion)
        rows = [hit.to_dict(with_text=False) for hit in hits]
        threshold = relevance.to_dict(rows)
        params: dict[str, Any] = {
            "k": k,
            "top_n": top_n,
            "score_threshold": score_threshold,
            "threshold": threshold,
            "fusion": fusion,
            "backend": self.settings.backend,
            "embedding_backend": backend,
            "embedding_quantization": quantization,
            "mode": mode,
            "dense_share": share,
        }
        if warnings:
            params["warnings"] = warnings
        audit_id = self._record(text, name, params, rows, warnings, embedder.model_id)
        return QueryResult(
            query=text,
            index=name,
            embedding_model=embedder.model_id,
            embedding_backend=backend,
            k=k,
            top_n=top_n,
            fusion=fusion,
            hits=hits,
            elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
            audit_id=audit_id,
            mode=mode,
            warnings=warnings,
            threshold=threshold,
            audited=audit_id is not None,
            query_vector=(vector_space(embedder), vector) if vector is not None else None,
            dense_share=share,
        )

    def _search(
        self, name: str, text: str, candidates: int, k: int, score_threshold: float | None, relevance: Relevance
    ) -> tuple[list[Hit], list[str], Embedder, list[float] | None, float]:
        """The hits of index ``name`` for ``text``, the warnings of a keyword-only answer, the
        embedder of the index's vector space (one that does not fit the index is refused), the
        query's vector (None when it was not made) and the share of the index the dense search
        covered (below 1 while vectors fill in behind)."""
        directory = self.indexes.index_dir(name) if self.settings.backend != "memory" else None
        with storage_guard(name, directory, "query it"):  # a store's failure is one line, never a traceback
            store = self.indexes.store(name)
            embedder = self.indexes.check_model(store)  # the index's own vector space (auto), or refused
            # The encoder thread embeds the query and searches Chroma with it while BM25 searches
            # here (both release the GIL): on two cores a query costs the longer of the two.
            encoder = self._encoder()
            vector = encoder.submit(embedder.embed_query, text) if store.vector_health.ok else None
            with store.reading():  # one state of the index: before or after a batch write, never during
                dense = None
                if vector is not None and store.vector_health.ok:
                    dense = encoder.submit(self._dense, store, embedder, text, vector, candidates, held=True)
                try:
                    share = dense_share(store)
                    hits, warnings = self.hits(
                        store, name, text, dense, candidates, k, score_threshold, embedder=embedder, relevance=relevance
                    )
                finally:
                    if dense is not None:  # its search runs under this thread's store lock: never after it
                        wait([dense])
        made = vector.result() if vector is not None and vector.done() and vector.exception() is None else None
        return hits, warnings, embedder, made, share

    def _checked(self, text: str, k: int, top_n: int | None) -> int:
        """The query's ``top_n`` (default: the settings'), once ``text``, ``k`` and it are valid."""
        if not text or not text.strip():
            raise InvalidInput("the query is empty")
        if not 1 <= k <= MAX_K:
            raise InvalidInput(f"k must be between 1 and {MAX_K}")
        top_n = top_n or self.settings.top_n
        if top_n < 1:
            raise InvalidInput("top_n must be at least 1")
        return top_n

    def _record(
        self, text: str, name: str, params: dict[str, Any], hits: list[dict[str, Any]], warnings: list[str], model: str
    ) -> int | None:
        """The audit row's id; None where the workspace cannot be written (the first time in this
        engine, a line in ``warnings`` says so).  Any other audit failure is raised."""
        try:
            return self.audit.record(
                query=text,
                index=name,
                embedding_model=model,
                params=params,
                hits=hits,
            )
        except AuditStoreError:
            why = self.audit.unwritable()
            if why is None:
                raise
        with self._lock:
            said, self._said_unaudited = self._said_unaudited, True
        if not said:
            warnings.append(
                f"retrievals are not audited in this workspace: {self.audit.db_path.name} cannot be written here: "
                f"{why}; rag last shows the last one recorded before"
            )
        return None

    @staticmethod
    def _dense(
        store: IndexStore,
        embedder: Embedder,
        text: str,
        vector: list[float] | Future[list[float]] | None,
        candidates: int,
        *,
        held: bool = False,
    ) -> DenseAnswer:
        """The dense hits of ``text`` and the warning of a vector store found damaged now (the
        answer is then keyword-only).  ``held``: the store lock is held for this call by the
        thread that waits for it (:meth:`query`)."""
        if isinstance(vector, Future):
            vector = vector.result()
        if vector is None:  # the vectors were repaired by another process since the query began
            vector = embedder.embed_query(text)
        try:
            return store.dense(vector, candidates, held=held), []
        except VectorStoreDamaged as exc:
            return [], [exc.message]

    def hits(
        self,
        store: IndexStore,
        name: str,
        text: str,
        vector: list[float] | Future[DenseAnswer] | None,
        candidates: int,
        k: int,
        score_threshold: float | None,
        *,
        embedder: Embedder | None = None,
        relevance: Relevance | None = None,
    ) -> tuple[list[Hit], list[str]]:
        """The hits of ``store`` (call it under its store lock: :meth:`IndexStore.reading`) and the
        warnings of a keyword-only answer.  ``vector`` is the query's vector, or None (``embedder``,
        default the store's own, embeds the query), or a future of the dense answer (:meth:`_dense`
        running in another thread while BM25 searches here).  With ``relevance`` the passages
        that pass it come first, cut at ``k`` after that (:func:`~services.retrieval.cut.cut`);
        without it, the first ``k`` in fused order."""
        bm25 = store.bm25(text, candidates)
        weights = store.keyword_weights(text)
        warnings: list[str] = []
        if isinstance(vector, Future):
            dense, said = vector.result()
            warnings.extend(said)
        elif store.vector_health.ok:
            dense, said = self._dense(store, embedder or self.indexes.embedder_for(store), text, vector, candidates)
            warnings.extend(said)
        else:
            dense = []
            warnings.append(store.vector_health.warning(name))
        fused = fuse(bm25, dense, self.settings.fusion)
        if score_threshold is not None:
            fused = [item for item in fused if item.score >= score_threshold]

        screen = keyword_screen(store, weights, relevance.min_keyword) if relevance is not None else None
        return cut(fused, k, live_reader(store, name, weights), relevance, screen), warnings

    # -- inspection ------------------------------------------------------------------------
    def show(self, handle: str) -> ChunkView:
        """Full text and metadata of the chunk behind a citation handle."""
        name, chunk_id = parse_handle(handle)
        try:
            validate_name(name, "index")
        except InvalidName as exc:
            raise InvalidInput(f"{handle!r}: {exc.message}") from None
        if not self.indexes.exists(name):
            raise HandleNotFound(f"{handle}: there is no index named {name!r}", handle=handle)
        store = self.indexes.store(name)
        found = store.manifest.get_chunks([chunk_id]).get(chunk_id)
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


def dense_share(store: IndexStore) -> float:
    """The share (0…1, rounded down to 4 places: 1 only when none is pending) of ``store``'s chunks
    with their vectors written; one cheap count while none is pending."""
    pending = store.manifest.pending_count()
    if not pending:
        return 1.0
    chunks = store.manifest.counts()[1]
    return ((chunks - pending) * 10000 // chunks) / 10000 if chunks else 1.0
