"""The retrieval engine of one workspace: index lifecycle, hybrid query, inspection, audit.

This is what the TUI (from worker threads), the CLI and the headless ``ask`` mode call.
Every method is synchronous and thread-safe; long ones (``index_add``, the first ``query``
with the sentence-transformers model, :meth:`preload`) belong in a worker thread.

Citation handles are ``<index>:<chunk_id>``.  Chunk ids depend only on the file's relative
path, the chunk's offsets and its text (see :mod:`services.retrieval.chunking`), so the
handles of an unchanged file survive re-indexing, restarts and other processes.

The engine is built in layers: :mod:`services.retrieval.engine_indexes` (life cycle, index
management), :mod:`services.retrieval.engine_ingest` (``index_add``) and this module (query,
show, history).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from services.errors import InvalidInput, InvalidName
from services.names import validate_name
from services.retrieval.engine_indexes import MAX_K, ProgressCallback, derive_index_name, parse_handle
from services.retrieval.engine_ingest import IngestingEngine
from services.retrieval.errors import HandleNotFound, NoActiveIndex
from services.retrieval.fusion import fuse
from services.retrieval.models import ChunkView, Hit, QueryResult, RetrievalRecord
from services.retrieval.store import IndexStore

__all__ = ["MAX_K", "ProgressCallback", "RetrievalEngine", "derive_index_name", "parse_handle"]


class RetrievalEngine(IngestingEngine):
    """Indexes under ``<workspace>/indexes/<name>/`` and hybrid BM25 + dense queries over them."""

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
        vector = self.embedder.embed_query(text)
        with store.reading():  # one state of the index: before or after a batch write, never during
            hits = self._hits(store, name, text, vector, candidates, k, score_threshold)
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

    def _hits(
        self,
        store: IndexStore,
        name: str,
        text: str,
        vector: list[float],
        candidates: int,
        k: int,
        score_threshold: float | None,
    ) -> list[Hit]:
        fused = fuse(store.bm25(text, candidates), store.dense(vector, candidates), self.settings.fusion)
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
        return hits

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
