"""Plain data shared by the loaders, the chunker, the engine and its callers (TUI, CLI)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from services.retrieval.errors import LIMIT_CODES


@dataclass(frozen=True)
class Segment:
    """A run of a document's text with one page or section; chunks never cross segments."""

    text: str
    start: int
    """Offset of ``text`` in the document's extracted text."""
    page: int | None = None
    section: str | None = None


@dataclass(frozen=True)
class Document:
    """What a loader extracted from one file."""

    content_type: str
    segments: tuple[Segment, ...]
    title: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "content_type": self.content_type,
            "title": self.title,
            "segments": [[s.text, s.start, s.page, s.section] for s in self.segments],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Document:
        segments = tuple(Segment(str(t), int(st), p, sec) for t, st, p, sec in data["segments"])
        return cls(content_type=str(data["content_type"]), segments=segments, title=data.get("title"))


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    source_path: str
    ordinal: int
    text: str
    context: str
    """Document title and section path: a BM25 field and the prefix of the embedded text."""
    start_offset: int
    end_offset: int
    page: int | None
    section: str | None
    hash: str
    embedding_model: str

    @property
    def embed_text(self) -> str:
        return f"{self.context}\n{self.text}" if self.context else self.text


@dataclass(frozen=True)
class FileIssue:
    """One file that was not indexed (``errors``) or deliberately passed over (``skipped``)."""

    path: str
    code: str
    error: str
    message: str


@dataclass
class IngestReport:
    index: str
    root: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    errors: list[FileIssue] = field(default_factory=list)
    skipped: list[FileIssue] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """Indexed files among ``errors`` whose previous chunks stay searchable (marked failed in the index)."""
    vectors_rebuilt: int = 0
    """Vectors re-embedded from the manifest first because the vector store was damaged or missing."""
    chunks_added: int = 0
    chunks_removed: int = 0
    vectors_written: int = 0
    """Vectors written behind the keywords (this ingest's chunks, and any an earlier one left pending)."""
    vectors_pending: int = 0
    """Chunks still without vectors at the end (cancelled): keyword-searchable; the next add continues."""
    vectors_elsewhere: bool = False
    """Another Aries was writing this index's vectors: it writes those of this ingest too."""
    keywords_s: float | None = None
    """Seconds until every file of this ingest was searchable by keyword (the vectors came after)."""
    cancelled: bool = False
    activated: bool = False
    """True when this add made the index the workspace's active one (there was none)."""
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Every field, plus ``status`` (``ok``, ``incomplete``, ``cancelled``) and ``exit_code``."""
        return {**asdict(self), "status": self.status, "exit_code": self.exit_code}

    @property
    def not_indexed(self) -> list[FileIssue]:
        """Files that should have been indexed and were not: failed, or skipped over a limit."""
        return [*self.errors, *(issue for issue in self.skipped if issue.code in LIMIT_CODES)]

    @property
    def status(self) -> str:
        if self.cancelled:
            return "cancelled"
        return "incomplete" if self.not_indexed else "ok"

    @property
    def exit_code(self) -> int:
        """``aries rag index add``: 0 every supported file indexed (or unchanged); 3 some files
        failed or were skipped over a limit (each is listed with its reason); 130 cancelled."""
        return {"ok": 0, "incomplete": 3, "cancelled": 130}[self.status]

    def _kept(self, path: str) -> str:
        return " (its previous chunks are kept)" if path in self.kept else ""

    def file_lines(self, limit: int | None = None) -> list[str]:
        """One line per added, updated, removed, failed and skipped file (the reason after a colon).

        ``limit``: at most this many lines per kind, then ``… and N more``.  The lines carry file
        names and messages as they are: neutralise them before they reach a terminal.
        """
        kinds: list[tuple[str, list[str]]] = [
            ("added", list(self.added)),
            ("updated", list(self.updated)),
            ("removed", list(self.removed)),
            ("failed", [f"{i.path}: [{i.code}] {i.message}{self._kept(i.path)}" for i in self.errors]),
            ("skipped", [f"{i.path}: [{i.code}] {i.message}{self._kept(i.path)}" for i in self.skipped]),
        ]
        lines: list[str] = []
        for kind, entries in kinds:
            shown = entries if limit is None else entries[:limit]
            lines.extend(f"  {kind:<8} {entry}" for entry in shown)
            if len(entries) > len(shown):
                lines.append(f"  {kind:<8} … and {len(entries) - len(shown)} more")
        return lines

    def summary(self) -> str:
        parts = [
            f"{len(self.added)} added",
            f"{len(self.updated)} updated",
            f"{len(self.unchanged)} unchanged",
            f"{len(self.removed)} removed",
            f"{len(self.errors)} failed",
        ]
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        text = f"index {self.index!r}: " + ", ".join(parts) + f" ({self.chunks_added} chunks written)"
        if self.vectors_pending:
            who = "another Aries is writing them now" if self.vectors_elsewhere else "the next rag index add continues"
            text += (
                f"; {self.vectors_pending} chunks searchable by keyword only until their vectors are written ({who})"
            )
        return text + (" — cancelled" if self.cancelled else "")


@dataclass(frozen=True)
class ProgressEvent:
    stage: str
    """``scan``, ``file`` (a file was read and chunked), ``commit`` (a batch is searchable by keyword),
    ``keywords`` (every file is), ``vectors`` (``done`` of ``total`` chunks have vectors), ``done``;
    ``wait`` (another writer), ``repair``."""
    done: int
    total: int
    path: str | None = None


@dataclass(frozen=True)
class Hit:
    rank: int
    handle: str
    chunk_id: str
    index: str
    source_path: str
    page: int | None
    section: str | None
    score: float
    """The fused score (what ``rank`` orders by)."""
    bm25_rank: int | None
    bm25_score: float | None
    dense_rank: int | None
    dense_score: float | None
    text: str
    keyword_score: float | None = None
    """The share (0…1) of the query's keyword weight this passage holds (see :mod:`services.retrieval.relevance`)."""

    def to_dict(self, *, with_text: bool = True) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _HIT_FIELDS}  # flat values: no deep copy (asdict's cost)
        if not with_text:
            data.pop("text")
        return data


_HIT_FIELDS = tuple(f.name for f in fields(Hit))


@dataclass(frozen=True)
class QueryResult:
    query: str
    index: str
    embedding_model: str
    k: int
    top_n: int
    fusion: dict[str, Any]
    hits: list[Hit]
    elapsed_ms: float
    audit_id: int | None = None
    mode: str = "hybrid"
    """``hybrid``, or ``keyword`` when the vector store is damaged or missing (see ``warnings``)."""
    warnings: list[str] = field(default_factory=list)
    threshold: dict[str, Any] | None = None
    """The relevance threshold in force (``min_score``, ``min_keyword``, ``min_bm25``; ``kept``: the
    handles that pass)."""
    audited: bool = True
    """False where the workspace cannot be written: no audit row (``audit_id`` None), and the first
    such query of an engine says so in ``warnings``."""
    embedding_backend: str = ""
    """How the query was embedded (``onnx-int8``, ``onnx``, ``torch``, ``hash``, …): under *auto*,
    the backend of the index's own vector space."""
    query_vector: tuple[str, list[float]] | None = field(default=None, repr=False, compare=False)
    """The query's vector and its space (:func:`~services.retrieval.embedders.vector_space`), None when
    the answer is keyword-only: reused by whoever needs the same text's vector (earlier turns brought
    back), so that a message is encoded once. Not part of :meth:`to_dict`."""
    dense_share: float = 1.0
    """The share (0…1) of the index's chunks the dense search covered: below 1 while vectors are
    still being written behind the keywords (BM25 always covers every chunk)."""

    @property
    def dense_note(self) -> str | None:
        """``dense: 43 % of this index`` while the vectors are filling in (a hybrid answer), else None."""
        if self.mode != "hybrid" or self.dense_share >= 1.0:
            return None
        return f"dense: {int(self.dense_share * 100)} % of this index"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("query_vector", None)
        data["hits"] = [hit.to_dict() for hit in self.hits]
        return data


@dataclass(frozen=True)
class ChunkView:
    """Everything known about one chunk: what ``show <handle>`` prints."""

    handle: str
    index: str
    chunk_id: str
    text: str
    context: str
    source_path: str
    root: str
    content_type: str
    last_modified: str | None
    page: int | None
    section: str | None
    start_offset: int
    end_offset: int
    hash: str
    embedding_model: str
    ordinal: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class IndexStatus(StrEnum):
    """The state of an index as its listing shows it (the value is what the listings and the JSON say).

    While its vectors are missing, damaged or unavailable, an index answers from its keyword store
    only; :meth:`advice` says so, and how to get hybrid answers back, in one line."""

    OK = "ok"
    VECTORS_MISSING = "vectors missing"
    VECTORS_DAMAGED = "vectors damaged"
    VECTORS_UNAVAILABLE = "vectors unavailable"
    """An embedded vector store that cannot be opened where the index folder cannot be written."""
    UNREADABLE = "unreadable"
    UNCHECKED = "unchecked"
    """Listed without opening its stores (``index_list(check=False)``)."""

    @classmethod
    def of_vectors(cls, health: str) -> IndexStatus:
        """The status of an index whose vector store's health is ``health`` (``ok``, ``missing``, …)."""
        return cls.OK if health == "ok" else cls(f"vectors {health}")

    @property
    def keyword_only(self) -> bool:
        """Queries of the index are answered from the keyword store only."""
        return self in (IndexStatus.VECTORS_MISSING, IndexStatus.VECTORS_DAMAGED, IndexStatus.VECTORS_UNAVAILABLE)

    def advice(self, index: str, *, command: str = "aries rag") -> str | None:
        """What queries do meanwhile and the way out, for index ``index`` in this state (None when the
        state needs none); ``command`` starts the repair command (``/rag`` in the TUI)."""
        if self is IndexStatus.VECTORS_UNAVAILABLE:  # a folder that cannot be written: nothing to repair
            return "keyword-only while the index folder cannot be written"
        if self.keyword_only:
            return repair_advice(index, command=command)
        return None


def repair_advice(index: str, *, command: str = "aries rag") -> str:
    """The one line for an index whose vectors are missing or damaged."""
    return f"keyword-only until repaired: {command} index repair {index}"


@dataclass(frozen=True)
class IndexInfo:
    name: str
    active: bool
    backend: str
    embedding_model: str | None
    files: int
    chunks: int
    roots: list[str]
    created_at: str | None
    updated_at: str | None
    status: IndexStatus = IndexStatus.OK
    status_detail: str | None = None
    failed: list[dict[str, str]] = field(default_factory=list)
    """Files whose last load failed (``path``, ``code``, ``message``, ``failed_at``); their old chunks are kept."""
    embedding_backend: str | None = None
    """The backend this engine reads and updates the index with (under *auto*: its space's own)."""
    built_backend: str | None = None
    """The backend recorded when the index was built (``torch`` for one from before backends were recorded)."""
    vectors_pending: int = 0
    """Chunks searchable by keyword whose vectors are not written yet (a state, not damage)."""

    @property
    def vectors_note(self) -> str | None:
        """``vectors: 43 %`` while vectors are pending, else None."""
        if not self.vectors_pending or not self.chunks:
            return None
        from services.retrieval.store_vectors import vectors_share

        return vectors_share(self.chunks - self.vectors_pending, self.chunks)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RetrievalRecord:
    """One row of the ``retrievals`` audit table."""

    id: int
    ts: str
    query: str
    index: str
    embedding_model: str
    params: dict[str, Any]
    hits: list[dict[str, Any]]
    workspace: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
