"""The Chroma side of an index: the client (embedded, in memory or a server), the collection, dense search."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from services.retrieval.errors import IndexCorrupt, VectorStoreUnavailable
from services.retrieval.settings import parse_chroma_url
from services.workspace.paths import CHROMA_DIR

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.collection_configuration import CreateCollectionConfiguration
    from chromadb.api.models.Collection import Collection

CHROMA_BATCH = 1000
HNSW = {"space": "cosine", "ef_construction": 200, "ef_search": 200, "max_neighbors": 16}


def open_chroma(
    name: str,
    directory: Path | None,
    chroma_url: str | None,
    collection_name: str,
    db: sqlite3.Connection | None,
    *,
    folder: str = CHROMA_DIR,
) -> tuple[ClientAPI, Collection]:
    """The client and the collection of index ``name`` (embedded in ``directory/folder``);
    on failure ``db`` (its manifest), if given, is closed."""
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    client: ClientAPI | None = None
    try:
        if chroma_url:
            host, port, ssl = parse_chroma_url(chroma_url)
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
        elif directory is None:
            client = chromadb.EphemeralClient(settings=settings)
        else:
            client = chromadb.PersistentClient(path=str(directory / folder), settings=settings)
        collection = client.get_or_create_collection(
            collection_name,
            embedding_function=None,
            configuration=cast("CreateCollectionConfiguration", {"hnsw": HNSW}),
            metadata={"aries_index": name},
        )
    except Exception as exc:
        if db is not None:
            db.close()
        if not chroma_url and directory is not None:
            _forget_system(client, str(directory / folder))
        if chroma_url:
            raise VectorStoreUnavailable(f"cannot use the Chroma server at {chroma_url}: {exc}") from exc
        raise IndexCorrupt(f"index {name!r}: cannot open the Chroma store: {exc}") from exc
    return client, collection


def _forget_system(client: ClientAPI | None, path: str) -> None:
    """Release a store that failed to open, so that a later open of ``path`` starts afresh.

    Chroma caches one started system per path; one whose start failed would otherwise be
    handed to every later client of that path (after a rebuild, too).
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    close = getattr(client, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            close()
    with SharedSystemClient._refcount_lock:
        if SharedSystemClient._identifier_to_refcount.get(path, 0) > 0:
            return  # in use by another client of this process
        system = SharedSystemClient._identifier_to_system.pop(path, None)
    if system is not None:
        with contextlib.suppress(Exception):
            system.stop()


def dense_search(collection: Collection, vector: list[float], top_n: int) -> list[tuple[str, float]]:
    """(chunk id, cosine similarity) of the ``top_n`` nearest vectors."""
    queries: list[Sequence[float] | Sequence[int]] = [vector]
    reply = collection.query(query_embeddings=queries, n_results=top_n, include=["distances"])
    ids = reply["ids"][0]
    distances = (reply.get("distances") or [[]])[0]
    return [(str(i), 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)]


OK = "ok"
MISSING = "missing"
DAMAGED = "damaged"
UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class VectorHealth:
    """``status`` is ``ok``, ``missing`` (no vectors at all), ``damaged``, or ``unavailable`` (an
    embedded store that cannot be opened where its folder cannot be written); ``detail`` says why."""

    status: str
    detail: str

    @property
    def ok(self) -> bool:
        return self.status == OK

    def warning(self, index: str) -> str:
        """The one-line warning shown where keyword-only results are shown."""
        if self.status == UNAVAILABLE:
            return (
                f"index {index!r}: vector store {self.status} ({self.detail}); keyword-only results. "
                "Hybrid results come back where the index folder can be written"
            )
        return (
            f"index {index!r}: vector store {self.status} ({self.detail}); keyword-only results. "
            f"Repair with: rag index repair {index} (or the next rag index add rebuilds it)"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def vectors_share(embedded: int, chunks: int) -> str:
    """``vectors: 43 %``: the share of an index's chunks whose vectors are written (rounded down:
    100 % only when every one is)."""
    percent = 100 if embedded >= chunks else (embedded * 100) // chunks
    return f"vectors: {percent} %"


def check_vectors(collection: Collection, expected: int, chunks: int | None = None) -> VectorHealth:
    """Count, compare with the ``expected`` chunks of the manifest that have their vectors
    written (of ``chunks`` in all: the others are pending, a state and not damage), and probe
    ``collection``."""
    try:
        count = int(collection.count())
    except Exception as exc:  # chromadb raises its own, Rust-side error types
        return VectorHealth(DAMAGED, f"the vector store does not answer: {_short(exc)}")
    if count < expected:
        if count == 0:
            return VectorHealth(MISSING, f"the vector store is empty but the index has {expected} chunks")
        return VectorHealth(DAMAGED, f"the vector store holds {count} vectors for {expected} chunks")
    if expected:
        try:
            stored = collection.get(limit=1, include=["embeddings"])
            embeddings = stored.get("embeddings")
            if embeddings is None or len(embeddings) == 0:
                return VectorHealth(DAMAGED, "the vector store returns no stored vector")
            probe: list[Sequence[float] | Sequence[int]] = [[float(x) for x in embeddings[0]]]
            collection.query(query_embeddings=probe, n_results=1, include=["distances"])
        except Exception as exc:
            return VectorHealth(DAMAGED, f"a probe query fails: {_short(exc)}")
    if chunks is not None and expected < chunks:
        return VectorHealth(OK, f"{vectors_share(expected, chunks)}: {count} vectors for {chunks} chunks, filling in")
    return VectorHealth(OK, f"{count} vectors for {expected} chunks")


def unopenable(exc: BaseException, read_only: Path | None = None) -> VectorHealth:
    """The health of an embedded store that did not open; ``read_only``: the index folder, which
    cannot be written (the embedded Chroma writes to its own files when it opens)."""
    if read_only is not None:
        from services.retrieval.readonly import why_unwritable

        return VectorHealth(
            UNAVAILABLE, f"the embedded store opens only where it can write, and {why_unwritable(read_only)}"
        )
    return VectorHealth(DAMAGED, f"the vector store does not open: {_short(exc)}")
