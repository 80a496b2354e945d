"""The Tantivy side of an index: schema, analysis, stop words, documents and BM25 search."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from services.retrieval.models import Chunk
from services.workspace.paths import TANTIVY_DIR

if TYPE_CHECKING:
    import tantivy

WRITER_HEAP = 64 * 1024 * 1024
BM25_WINDOW = 1
"""Neighbouring chunks on each side that a chunk's ``window`` field also holds."""
FIELD_BOOSTS = {"text": 0.2, "window": 1.0, "context": 0.5}
"""BM25 is summed over the fields with these weights (``text`` ranks the chunk among its neighbours)."""
LEXICAL_FORMAT = f"3:en_stem:text+window{BM25_WINDOW}+context:chunk_key"
"""Changes whenever the Tantivy schema or what goes into it changes; a mismatch triggers a rebuild
(3: the ``chunk_key`` fast field)."""


def query_analyzer() -> tantivy.TextAnalyzer:
    """The same analysis as Tantivy's built-in ``en_stem``: simple, remove_long(40), lowercase, stem."""
    import tantivy

    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


_STOPWORDS: frozenset[str] | None = None


def stopwords() -> frozenset[str]:
    """English stop words, stemmed like the index (dropped from queries only)."""
    global _STOPWORDS
    if _STOPWORDS is None:
        import tantivy

        plain = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.lowercase()).build()
        stop = (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.stopword("english"))
            .build()
        )
        probe = (
            "a an and are as at be but by for if in into is it no not of on or such that the their then there "
            "these they this to was will with"
        )
        kept = set(stop.analyze(probe))
        removed = [word for word in plain.analyze(probe) if word not in kept]
        analyzer = query_analyzer()
        _STOPWORDS = frozenset(token for word in removed for token in analyzer.analyze(word))
    return _STOPWORDS


_QUESTION_TERMS: frozenset[str] | None = None


def question_terms() -> frozenset[str]:
    """:data:`services.retrieval.relevance.QUESTION_WORDS`, analysed like the index."""
    global _QUESTION_TERMS
    if _QUESTION_TERMS is None:
        from services.retrieval.relevance import QUESTION_WORDS

        _QUESTION_TERMS = frozenset(query_analyzer().analyze(QUESTION_WORDS))
    return _QUESTION_TERMS


def tantivy_schema() -> tantivy.Schema:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("chunk_id", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_unsigned_field("chunk_key", fast=True)
    builder.add_text_field("context", stored=False, tokenizer_name="en_stem", index_option="freq")
    builder.add_text_field("text", stored=False, tokenizer_name="en_stem", index_option="freq")
    builder.add_text_field("window", stored=False, tokenizer_name="en_stem", index_option="freq")
    return builder.build()


def chunk_key(chunk_id: str) -> int | None:
    """The chunk id (16 hex digits: :func:`~services.retrieval.chunking.chunk_id_for`) as the u64
    of the ``chunk_key`` fast field; None for an id of another shape (found through the stored field)."""
    if len(chunk_id) != 16:
        return None
    try:
        key = int(chunk_id, 16)
    except ValueError:
        return None
    return key if f"{key:016x}" == chunk_id else None


def add_lexical(writer: tantivy.IndexWriter, chunks: Sequence[Chunk]) -> None:
    """Add one file's chunks (in order) to Tantivy: own text, neighbourhood window, context."""
    import tantivy

    for position, chunk in enumerate(chunks):
        document = tantivy.Document()
        document.add_text("chunk_id", chunk.chunk_id)
        key = chunk_key(chunk.chunk_id)
        if key is not None:
            document.add_unsigned("chunk_key", key)
        document.add_text("context", chunk.context)
        document.add_text("text", chunk.text)
        window = chunks[max(0, position - BM25_WINDOW) : position + BM25_WINDOW + 1]
        document.add_text("window", "\n".join(c.text for c in window))
        writer.add_document(document)


def bm25_search(index: tantivy.Index, terms: list[str], top_n: int) -> list[tuple[str, float]]:
    """(chunk id, summed BM25 score) of the best ``top_n`` documents for the analysed ``terms``,
    best first; equal scores in chunk id order.

    Tantivy orders equal scores by document address, which depends on how the index is cut into
    segments (the ingest's batches, its merges, a rebuild); the chunk id does not.  A tie across
    the ``top_n`` cut is fetched whole (the limit doubles until the score after the cut is lower).
    """
    import tantivy

    schema = index.schema
    clauses = []
    for term in terms:
        for field, boost in FIELD_BOOSTS.items():
            if boost > 0:
                query = tantivy.Query.term_query(schema, field, term)
                if boost != 1.0:
                    query = tantivy.Query.boost_query(query, boost)
                clauses.append((tantivy.Occur.Should, query))
    query = tantivy.Query.boolean_query(clauses)
    # No reload() here (0.36 ms a query at 100k documents): this process's writer reloads after
    # each batch, and another process's write moves the manifest's generation, so the store
    # opens the index again before the next query (IndexStore._fresh).
    searcher = index.searcher()
    limit = top_n + 1
    while True:
        hits = searcher.search(query, limit=limit, count=False).hits
        if len(hits) < limit or hits[-1][0] < hits[top_n - 1][0]:
            break
        limit *= 2
    # The chunk ids come from the ``chunk_key`` column (one array read) rather than from the
    # stored documents (a compressed block read and decoded per hit).
    keys = searcher.fast_field_values("chunk_key", [address for _, address in hits])
    best: dict[str, float] = {}
    for (score, address), key in zip(hits, keys, strict=True):
        chunk_id = f"{key:016x}" if isinstance(key, int) else str(searcher.doc(address)["chunk_id"][0])
        best.setdefault(chunk_id, float(score))
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:top_n]


def fill_lexical(index: tantivy.Index, chunks: Iterable[Chunk], name: str) -> None:
    """Write ``chunks`` (ordered by file; an iterator is read once) into an empty Tantivy index
    (no embedding needed)."""
    from services.retrieval.errors import IndexBusy

    pending = iter(chunks)
    first = next(pending, None)
    if first is None:
        return
    try:
        writer = index.writer(heap_size=WRITER_HEAP, num_threads=1)
    except ValueError as exc:
        raise IndexBusy(f"index {name!r} is being written by another process: {exc}") from exc
    file_chunks: list[Chunk] = [first]
    for chunk in pending:
        if file_chunks[-1].source_path != chunk.source_path:
            add_lexical(writer, file_chunks)
            file_chunks = []
        file_chunks.append(chunk)
    add_lexical(writer, file_chunks)
    writer.commit()
    writer.wait_merging_threads()
    index.reload()


def open_lexical(
    name: str, directory: Path | None, current: bool, chunks: Callable[[], Iterable[Chunk]], *, read_only: bool
) -> tuple[tantivy.Index, bool]:
    """The Tantivy index in ``directory/tantivy`` (in RAM when ``directory`` is None), opened when
    it is ``current`` (of :data:`LEXICAL_FORMAT`) and readable, else rebuilt from ``chunks()``; and
    whether it was rebuilt on disk (the caller records the format).

    Tantivy takes a lock file to open an index; where the folder cannot be written (``read_only``)
    that fails, and the index is rebuilt in memory instead: the same chunks, so the same BM25 answers.
    """
    import tantivy

    if directory is None:
        return tantivy.Index(tantivy_schema()), False
    path = directory / TANTIVY_DIR
    if current and path.is_dir():
        try:
            return tantivy.Index(tantivy_schema(), path=str(path), reuse=True), False
        except ValueError:
            pass  # unreadable (or its lock file cannot be made): rebuilt below from the manifest
    if read_only:
        index = tantivy.Index(tantivy_schema())
        fill_lexical(index, chunks(), name)
        return index, False
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    index = tantivy.Index(tantivy_schema(), path=str(path), reuse=False)
    fill_lexical(index, chunks(), name)
    return index, True


def term_holders(index: tantivy.Index, terms: Iterable[str], limit: int) -> dict[str, frozenset[str] | None]:
    """For each analysed term, the chunk ids whose context or own text hold it (what
    :meth:`IndexStore.terms` of ``context + text`` would find); None for a term held by more than
    ``limit`` chunks (not looked up: the caller assumes any chunk may hold it)."""
    import tantivy

    schema = index.schema
    searcher = index.searcher()
    holders: dict[str, frozenset[str] | None] = {}
    for term in terms:
        count = int(searcher.doc_freq("text", term)) + int(searcher.doc_freq("context", term))
        if count > limit:
            holders[term] = None
            continue
        if count == 0:
            holders[term] = frozenset()
            continue
        either = [
            (tantivy.Occur.Should, tantivy.Query.term_query(schema, field, term)) for field in ("context", "text")
        ]
        hits = searcher.search(tantivy.Query.boolean_query(either), limit=count, count=False).hits
        keys = searcher.fast_field_values("chunk_key", [address for _, address in hits])
        holders[term] = frozenset(
            f"{key:016x}" if isinstance(key, int) else str(searcher.doc(address)["chunk_id"][0])
            for (_, address), key in zip(hits, keys, strict=True)
        )
    return holders
