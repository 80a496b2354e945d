"""Do the three parts of an index agree?  Every manifest chunk id in Tantivy and in Chroma, nothing more."""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tantivy
    from chromadb.api.models.Collection import Collection

SAMPLE = 5
"""Ids listed per kind of disagreement (the counts are always complete)."""


@dataclass(frozen=True)
class Consistency:
    """The outcome of comparing an index's manifest with its Tantivy and Chroma stores."""

    index: str
    manifest: int
    """Chunks in the manifest (the source of truth)."""
    tantivy: int
    """Documents in Tantivy (a chunk id indexed twice counts twice)."""
    chroma: int
    journal: int
    """Entries of an unfinished write (0 unless a writer is at work or was interrupted)."""
    pending: int = 0
    """Chunks searchable by keyword whose vectors are not written yet: a state, not a disagreement."""
    missing_tantivy: list[str] = field(default_factory=list)
    missing_chroma: list[str] = field(default_factory=list)
    extra_tantivy: list[str] = field(default_factory=list)
    extra_chroma: list[str] = field(default_factory=list)
    duplicates_tantivy: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    """Full number of ids of each list above (the lists hold at most :data:`SAMPLE`)."""

    @property
    def ok(self) -> bool:
        return not any(self.counts.values()) and self.manifest == self.tantivy

    def vectors_note(self) -> str:
        """``; vectors: 43 % (…)`` while vectors are pending, else nothing."""
        if not self.pending:
            return ""
        from services.retrieval.store_vectors import vectors_share

        share = vectors_share(self.manifest - self.pending, self.manifest)
        return (
            f"; {share} ({self.pending} chunks keyword-only until their vectors are written: "
            "the next rag index add continues)"
        )

    def summary(self) -> str:
        if self.ok:
            if self.pending:
                return (
                    f"index {self.index!r}: consistent ({self.manifest} chunks in the manifest and Tantivy, "
                    f"{self.chroma} vectors in Chroma){self.vectors_note()}"
                )
            return f"index {self.index!r}: consistent ({self.manifest} chunks in the manifest, Tantivy and Chroma)"
        problems = [f"{count} {kind.replace('_', ' in ', 1)}" for kind, count in self.counts.items() if count]
        return (
            f"index {self.index!r}: NOT consistent: manifest {self.manifest}, Tantivy {self.tantivy}, "
            f"Chroma {self.chroma} chunks; " + ", ".join(problems) + self.vectors_note()
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def tantivy_ids(index: tantivy.Index) -> list[str]:
    """Every chunk id stored in Tantivy (repeated if a chunk is there twice)."""
    import tantivy

    searcher = index.searcher()
    total = searcher.num_docs
    if total == 0:
        return []
    result = searcher.search(tantivy.Query.all_query(), limit=total, count=False)
    return [str(searcher.doc(address)["chunk_id"][0]) for _, address in result.hits]


def chroma_ids(collection: Collection, page: int = 5000) -> list[str]:
    ids: list[str] = []
    offset = 0
    while True:
        reply = collection.get(include=[], limit=page, offset=offset)
        ids.extend(str(i) for i in reply["ids"])
        if len(reply["ids"]) < page:
            return ids
        offset += page


def check_stores(
    name: str,
    manifest_ids: Sequence[str],
    index: tantivy.Index,
    collection: Collection,
    journal: int,
    pending: Set[str] = frozenset(),
) -> Consistency:
    """Compare; a ``pending`` chunk (vector not written yet) may be missing from Chroma."""
    manifest = set(manifest_ids)
    lexical = tantivy_ids(index)
    lexical_set = set(lexical)
    dense = set(chroma_ids(collection))
    seen: set[str] = set()
    duplicates = sorted({i for i in lexical if i in seen or seen.add(i)})  # type: ignore[func-returns-value]
    kinds = {
        "missing_tantivy": sorted(manifest - lexical_set),
        "missing_chroma": sorted(manifest - dense - pending),
        "extra_tantivy": sorted(lexical_set - manifest),
        "extra_chroma": sorted(dense - manifest),
        "duplicates_tantivy": duplicates,
    }
    return Consistency(
        index=name,
        manifest=len(manifest),
        tantivy=len(lexical),
        chroma=len(dense),
        journal=journal,
        pending=len(pending & manifest),
        counts={kind: len(ids) for kind, ids in kinds.items()} | {"journal": journal},
        **{kind: ids[:SAMPLE] for kind, ids in kinds.items()},
    )
