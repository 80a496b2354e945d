"""Retrieval quality harness over a BEIR-format collection.

A BEIR folder holds ``corpus.jsonl`` (``{"_id", "title", "text"}``), ``queries.jsonl``
(``{"_id", "text"}``) and ``qrels.tsv`` (``query-id, corpus-id, score`` with a header line).
Each corpus document is indexed like a file (title as context, text as one segment) with
the same chunker, embedder, stores and fusion as ``/rag``.  Evaluation is document level: a
document is ranked where its best chunk is ranked.  Methods: ``bm25`` (Tantivy alone),
``dense`` (Chroma alone) and ``hybrid`` (the fused ranking that ``query`` returns).

The index is cached under ``$ARIES_HOME/cache/eval/<key>`` (or a given cache directory),
keyed by a hash of the documents and of everything that shapes the index (embedding model,
chunking configuration, store schema), so a second run only runs the queries.

Honesty rules:

* a judgment whose document is not in the corpus is **kept** (the document is relevant and
  cannot be found: it counts against recall and nDCG) and **reported** (``missing_judged``:
  count, share of the judgments, a few examples); above :data:`MISSING_JUDGED_MAX` of the
  judgments the run is not ``ok`` — the collection and its judgments do not belong together;
* two identical runs give byte-identical metrics.  Chroma's HNSW graph is not the same from one
  build to the next (its compaction batches inserts as its background work happens to run, so the
  links differ), and an approximate search over two graphs returns different neighbours: on a
  1,500-document set, dense recall@10 moved by 0.017 between two builds of the same index.  So the
  ``dense`` ranking here is the *exact* cosine ranking over the index's stored vectors (ties broken
  by chunk id), what HNSW approximates, and ``ann_recall@100`` reports how much of that exact top
  100 Chroma's HNSW finds for the same query vectors (what the engine's own queries lose to the
  approximation).  Metrics are rounded to :data:`PRECISION` decimals.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.errors import CorruptFile, InvalidInput, NotFound
from services.hashing import BLOCK, HashingReader, sha256_hex, sha256_parts
from services.retrieval.chunking import ChunkConfig, chunk_document, default_counter
from services.retrieval.embedders import Embedder, backend_of, cache_tag, create_embedder
from services.retrieval.fusion import fuse
from services.retrieval.ingest import Batch, flush
from services.retrieval.models import Document, Segment
from services.retrieval.settings import FusionSettings, RetrievalSettings
from services.retrieval.store import IndexStore
from services.retrieval.store_manifest import SCHEMA_VERSION, FileRecord
from services.retrieval.store_vectors import HNSW
from services.retrieval.store_writer import recover, writing

MISSING_JUDGED_MAX = 0.01
"""The share of judgments whose document is missing from the corpus above which a run is not ``ok``."""
PRECISION = 4
"""Decimals of every reported metric."""
METHODS = ("bm25", "dense", "hybrid")
METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10", "p@10")
DEPTH = 100


@dataclass(frozen=True)
class BeirData:
    corpus: dict[str, tuple[str, str]]
    """doc id → (title, text), in file order."""
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    """query id → {doc id: relevance > 0}; only queries with at least one relevant document
    (in the corpus or not: a judged document missing from the corpus still counts as relevant)."""
    missing: tuple[tuple[str, str], ...] = ()
    """(query id, doc id) of the judgments whose document is not in the corpus."""

    @property
    def judgments(self) -> int:
        return sum(len(judged) for judged in self.qrels.values())

    def missing_report(self) -> dict[str, Any]:
        """``{"count", "judgments", "share", "examples"}`` of the judged documents missing from the corpus."""
        total = self.judgments
        return {
            "count": len(self.missing),
            "judgments": total,
            "share": round(len(self.missing) / total, PRECISION) if total else 0.0,
            "examples": [f"{qid}\t{doc}" for qid, doc in self.missing[:5]],
        }


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise NotFound(f"{path}: file not found")
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorruptFile(f"{path}:{number}: not JSON ({exc.msg})", path=str(path), line=number) from None
            if not isinstance(row, dict) or "_id" not in row:
                raise CorruptFile(f"{path}:{number}: expected an object with an _id", path=str(path), line=number)
            rows.append(row)
    return rows


def load_beir(dataset: Path, queries_file: Path | None = None, qrels_file: Path | None = None) -> BeirData:
    dataset = Path(dataset)
    if not dataset.is_dir():
        raise NotFound(f"{dataset}: no such dataset directory")
    corpus = {
        str(row["_id"]): (str(row.get("title") or ""), str(row.get("text") or ""))
        for row in _read_jsonl(dataset / "corpus.jsonl")
    }
    queries = {
        str(row["_id"]): str(row.get("text") or "") for row in _read_jsonl(queries_file or dataset / "queries.jsonl")
    }
    qrels_path = qrels_file or dataset / "qrels.tsv"
    if not qrels_path.is_file():
        alternative = dataset / "qrels" / "test.tsv"
        if qrels_file is None and alternative.is_file():
            qrels_path = alternative
        else:
            raise NotFound(f"{qrels_path}: file not found")
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.strip().split("\t") if "\t" in line else line.split()
            if not fields or not fields[0]:
                continue
            if len(fields) < 3:
                raise CorruptFile(f"{qrels_path}:{number}: expected query-id, corpus-id, score", line=number)
            try:
                score = int(float(fields[2]))
            except ValueError:
                if number == 1:
                    continue  # header
                raise CorruptFile(f"{qrels_path}:{number}: score {fields[2]!r} is not a number", line=number) from None
            if score > 0 and fields[0] in queries:
                qrels.setdefault(fields[0], {})[fields[1]] = score
    kept = {qid: text for qid, text in queries.items() if qid in qrels}
    if not any(doc in corpus for judged in qrels.values() for doc in judged):
        raise InvalidInput(f"{dataset}: no query has a relevant document in the corpus")
    missing = tuple((qid, doc) for qid in kept for doc in sorted(qrels[qid]) if doc not in corpus)
    return BeirData(corpus=corpus, queries=kept, qrels=qrels, missing=missing)


DATASET_FILES = ("corpus.jsonl", "queries.jsonl", "qrels.tsv")


def dataset_fingerprint(
    dataset: Path, queries_file: Path | None = None, qrels_file: Path | None = None
) -> dict[str, Any]:
    """``{"path", "sha256", "files"}``: the dataset folder, the SHA-256 of its corpus, queries and
    qrels files read in that order, and each file's own SHA-256 (keyed by its name)."""
    dataset = Path(dataset).resolve()
    qrels = qrels_file or dataset / "qrels.tsv"
    if qrels_file is None and not qrels.is_file() and (dataset / "qrels" / "test.tsv").is_file():
        qrels = dataset / "qrels" / "test.tsv"
    paths = [dataset / "corpus.jsonl", queries_file or dataset / "queries.jsonl", qrels]
    files: dict[str, str] = {}

    def blocks() -> Iterator[bytes]:
        for path in paths:
            with Path(path).open("rb") as handle:
                reader = HashingReader(handle)
                while block := reader.read(BLOCK):
                    yield block
            files[Path(path).name] = reader.hexdigest()

    whole = sha256_parts(blocks())
    return {"path": str(dataset), "sha256": whole, "files": files}


def _id_order(value: str) -> tuple[int, int | str]:
    return (0, int(value)) if value.isdigit() else (1, value)


def select_subset(data: BeirData, limit_docs: int) -> BeirData:
    """A deterministic sub-collection of at most ``limit_docs`` documents.

    All documents judged relevant for the kept queries are in it (queries are taken in id
    order while their documents fit), and the rest is filled with other documents in the
    order of SHA-256 of their ids (a fixed pseudo-random sample).
    """
    if limit_docs < 1:
        raise InvalidInput("--limit-docs must be at least 1")
    if limit_docs >= len(data.corpus):
        return data
    chosen: set[str] = set()
    queries: dict[str, str] = {}
    for qid in sorted(data.queries, key=_id_order):
        relevant = {doc for doc in data.qrels[qid] if doc in data.corpus}
        if len(chosen | relevant) > limit_docs:
            continue
        chosen |= relevant
        queries[qid] = data.queries[qid]
    for doc_id in sorted(data.corpus, key=sha256_hex):
        if len(chosen) >= limit_docs:
            break
        chosen.add(doc_id)
    corpus = {doc_id: value for doc_id, value in data.corpus.items() if doc_id in chosen}
    qrels = {qid: data.qrels[qid] for qid in queries}
    missing = tuple(pair for pair in data.missing if pair[0] in queries)
    return BeirData(corpus=corpus, queries=queries, qrels=qrels, missing=missing)


def corpus_hash(data: BeirData) -> str:
    return sha256_parts(
        piece
        for doc_id, (title, text) in data.corpus.items()
        for part in (doc_id, title, text)
        for piece in (part, "\x00")
    )


def index_key(data: BeirData, embedding_model: str, chunk_config: ChunkConfig) -> str:
    config = (
        f"{embedding_model}|{chunk_config.key(default_counter())}|schema={SCHEMA_VERSION}|hnsw={sorted(HNSW.items())}"
    )
    return sha256_hex(f"{corpus_hash(data)}|{config}")[:20]


def build_index(
    data: BeirData,
    directory: Path | None,
    embedder: Embedder,
    chunk_config: ChunkConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> IndexStore:
    """Open the cached index in ``directory`` if it is complete, else (re)build it there."""
    chunk_config = chunk_config or ChunkConfig()
    key = index_key(data, cache_tag(embedder), chunk_config)
    if directory is not None and directory.exists():
        try:
            store = IndexStore("eval", directory, create=False)
            if store.manifest.get_meta("eval_key") == key:
                recover(store)
                return store
            store.destroy()
        except Exception:
            import shutil

            shutil.rmtree(directory, ignore_errors=True)
    store = IndexStore("eval", directory)
    counter = default_counter()
    chunk_key = chunk_config.key(counter)
    batch = Batch()
    done = 0
    with writing(store) as writer:
        for doc_id, (title, text) in data.corpus.items():
            if text.strip() or title.strip():
                body = text if text.strip() else title
                document = Document(content_type="text/plain", segments=(Segment(body, 0),), title=title or None)
                chunks = chunk_document(
                    document, doc_id, embedding_model=embedder.model_id, config=chunk_config, counter=counter
                )
                record = FileRecord(
                    source_path=doc_id,
                    root="beir",
                    content_hash=sha256_hex(f"{title}\x00{text}"),
                    size=len(text),
                    content_type="text/plain",
                    last_modified=None,
                    title=title or None,
                    config_key=chunk_key,
                )
                batch.files.append((record, chunks))
            done += 1
            if batch.full():
                flush(writer, embedder, batch)
                if progress is not None:
                    progress(done, len(data.corpus))
        if batch:
            flush(writer, embedder, batch)
    backend, quantization = backend_of(embedder)
    store.manifest.set_meta(
        eval_key=key,
        embedding_model=embedder.model_id,
        embedding_backend=backend,
        embedding_quantization=quantization,
        chunk_config=chunk_key,
    )
    if progress is not None:
        progress(len(data.corpus), len(data.corpus))
    return store


def _doc_ranking(chunk_ids: list[str], doc_of: dict[str, str], depth: int) -> list[str]:
    seen: dict[str, None] = {}
    for chunk_id in chunk_ids:
        doc = doc_of.get(chunk_id)
        if doc is not None and doc not in seen:
            seen[doc] = None
            if len(seen) >= depth:
                break
    return list(seen)


def score_ranking(ranking: list[str], relevant: dict[str, int]) -> dict[str, float]:
    """nDCG@10, Recall@10/100, MRR@10 and P@10 of one ranked list of document ids."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranking[:10]))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum(gain / math.log2(i + 2) for i, gain in enumerate(ideal))
    hits10 = sum(1 for doc in ranking[:10] if doc in relevant)
    hits100 = sum(1 for doc in ranking[:100] if doc in relevant)
    mrr = next((1.0 / (i + 1) for i, doc in enumerate(ranking[:10]) if doc in relevant), 0.0)
    return {
        "ndcg@10": dcg / idcg if idcg > 0 else 0.0,
        "recall@10": hits10 / len(relevant),
        "recall@100": hits100 / len(relevant),
        "mrr@10": mrr,
        "p@10": hits10 / 10,
    }


def run_queries(
    store: IndexStore,
    data: BeirData,
    embedder: Embedder,
    fusion: FusionSettings | None = None,
    top_n: int = 200,
) -> dict[str, Any]:
    """Mean metrics per method: ``{"queries": N, "methods": {"bm25": {...}, ...}, "ann_recall@100": R}``
    (``dense``: the exact cosine ranking; see the module docstring)."""
    fusion = fusion or FusionSettings()
    doc_of = dict(store.manifest.query("SELECT chunk_id, source_path FROM chunks"))
    qids = list(data.queries)
    vectors = embedder.embed([data.queries[qid] for qid in qids])
    exact = ExactDense(store)
    totals = {method: dict.fromkeys(METRICS, 0.0) for method in METHODS}
    ann_found = 0.0
    for qid, vector in zip(qids, vectors, strict=True):
        bm25 = store.bm25(data.queries[qid], top_n)
        dense = exact.search(vector, top_n)
        truth = {chunk_id for chunk_id, _ in dense[:DEPTH]}
        if truth:
            approximate = {chunk_id for chunk_id, _ in store.dense(vector, DEPTH)}
            ann_found += len(truth & approximate) / len(truth)
        hybrid = [f.chunk_id for f in fuse(bm25, dense, fusion)]
        for method, ids in (("bm25", [c for c, _ in bm25]), ("dense", [c for c, _ in dense]), ("hybrid", hybrid)):
            scores = score_ranking(_doc_ranking(ids, doc_of, DEPTH), data.qrels[qid])
            for metric, value in scores.items():
                totals[method][metric] += value
    count = len(qids)
    return {
        "queries": count,
        "methods": {
            method: {metric: round(value / count, PRECISION) for metric, value in values.items()}
            for method, values in totals.items()
        },
        "ann_recall@100": round(ann_found / count, PRECISION),
    }


class ExactDense:
    """Exact cosine search over every vector of an index (its vectors are unit length)."""

    def __init__(self, store: IndexStore) -> None:
        import numpy as np

        ids: list[str] = []
        rows: list[Any] = []
        total = store.manifest.counts()[1]
        with store.reading():
            for offset in range(0, total, 5000):
                part = store.vectors.get(limit=5000, offset=offset, include=["embeddings"])
                ids.extend(str(i) for i in part["ids"])
                rows.extend(part["embeddings"] if part["embeddings"] is not None else [])
        order = sorted(range(len(ids)), key=ids.__getitem__)
        self.ids = [ids[i] for i in order]
        self.matrix = np.asarray([rows[i] for i in order], dtype=np.float64).reshape(len(order), -1)

    def search(self, vector: list[float], top_n: int) -> list[tuple[str, float]]:
        """(chunk id, cosine) of the ``top_n`` nearest, best first, ties by chunk id."""
        import numpy as np

        if not self.ids:
            return []
        scores = self.matrix @ np.asarray(vector, dtype=np.float64)
        rounded = np.round(scores, 9)  # below float32 precision: the same order whatever the BLAS
        best = np.argsort(-rounded, kind="stable")[:top_n]  # ids are sorted: ties keep chunk-id order
        return [(self.ids[int(i)], float(rounded[i])) for i in best]


def default_cache_dir() -> Path:
    from services.settings.config import aries_home

    return aries_home() / "cache" / "eval"


def evaluate(
    dataset: Path,
    *,
    queries_file: Path | None = None,
    qrels_file: Path | None = None,
    limit_docs: int | None = None,
    cache_dir: Path | None = None,
    settings: RetrievalSettings | None = None,
    embedder: Embedder | None = None,
    chunk_config: ChunkConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Build or reuse the index for ``dataset`` and return the metrics (``--json`` shape):
    ``{"queries", "methods", "documents", "missing_judged", "timings"}``."""
    settings = settings or RetrievalSettings.from_env()
    embedder = embedder or create_embedder(settings)
    chunk_config = chunk_config or ChunkConfig()
    began = time.perf_counter()
    data = load_beir(dataset, queries_file, qrels_file)
    if limit_docs is not None:
        data = select_subset(data, limit_docs)
    loaded = time.perf_counter()
    directory: Path | None = None
    if settings.backend != "memory":
        root = cache_dir if cache_dir is not None else default_cache_dir()
        directory = root / index_key(data, cache_tag(embedder), chunk_config)
    store = build_index(data, directory, embedder, chunk_config, progress)
    indexed = time.perf_counter()
    try:
        result = run_queries(store, data, embedder, settings.fusion, top_n=max(settings.top_n, 2 * DEPTH))
    finally:
        store.close()
    done = time.perf_counter()
    result["documents"] = len(data.corpus)
    result["missing_judged"] = data.missing_report()
    result["timings"] = {
        "load_s": round(loaded - began, 3),
        "index_s": round(indexed - loaded, 3),
        "queries_s": round(done - indexed, 3),
    }
    return result
