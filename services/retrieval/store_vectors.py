"""The Chroma side of an index: the client (embedded, in memory or a server), the collection, dense search."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from services.retrieval.errors import IndexCorrupt, VectorStoreUnavailable
from services.retrieval.settings import parse_chroma_url

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.collection_configuration import CreateCollectionConfiguration
    from chromadb.api.models.Collection import Collection

CHROMA_BATCH = 1000
HNSW = {"space": "cosine", "ef_construction": 200, "ef_search": 200, "max_neighbors": 16}


def open_chroma(
    name: str, directory: Path | None, chroma_url: str | None, collection_name: str, db: sqlite3.Connection
) -> tuple[ClientAPI, Collection]:
    """The client and the collection of index ``name``; on failure ``db`` (its manifest) is closed."""
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    client: ClientAPI
    try:
        if chroma_url:
            host, port, ssl = parse_chroma_url(chroma_url)
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
        elif directory is None:
            client = chromadb.EphemeralClient(settings=settings)
        else:
            client = chromadb.PersistentClient(path=str(directory / "chroma"), settings=settings)
        collection = client.get_or_create_collection(
            collection_name,
            embedding_function=None,
            configuration=cast("CreateCollectionConfiguration", {"hnsw": HNSW}),
            metadata={"aries_index": name},
        )
    except Exception as exc:
        db.close()
        if chroma_url:
            raise VectorStoreUnavailable(f"cannot use the Chroma server at {chroma_url}: {exc}") from exc
        raise IndexCorrupt(f"index {name!r}: cannot open the Chroma store: {exc}") from exc
    return client, collection


def dense_search(collection: Collection, vector: list[float], top_n: int) -> list[tuple[str, float]]:
    """(chunk id, cosine similarity) of the ``top_n`` nearest vectors."""
    queries: list[Sequence[float] | Sequence[int]] = [vector]
    reply = collection.query(query_embeddings=queries, n_results=top_n, include=["distances"])
    ids = reply["ids"][0]
    distances = (reply.get("distances") or [[]])[0]
    return [(str(i), 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)]
