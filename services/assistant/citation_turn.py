"""A turn's answer checked against the passages given to the model in that turn, and the record of it.

:func:`check_turn` runs at the end of a turn (``TurnLoop._finish``): the answer against the turn's
passages (``handle → text``, the hits and the earlier turns brought back), by
:func:`services.assistant.citations.check_answer` — no model call. With ``encode`` and ``vectors_of``
(the workspace's embedder already in use and the index's stored vectors) the cited sentences are
encoded in one batch as well; without them the check is overlap only.

:class:`CitationChecks` is the form the transcript keeps with the answer (``checks`` on the
assistant entry, format version 1): each sentence that is not plain prose, by its offsets in the
answer, its verdict and its citations (verdict, scores, the supporting span's offsets in the chunk).
An entry written before it has none, and :func:`read_checks` gives ``None`` for it (or for a value
it cannot read): the answer is shown without marks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from services.assistant.citations import (
    CitationReport,
    Encode,
    VectorsOf,
    check_answer,
)

CHECKS_VERSION = 1
RecordedVerdict = Literal["supported", "weak", "unsupported", "invented", "uncited"]


class CitedMark(BaseModel):
    """One cited handle of a sentence: its verdict, the scores and the supporting span in the chunk."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    handle: str
    verdict: RecordedVerdict
    overlap: float | None = None
    cosine: float | None = None
    span: tuple[int, int] | None = None


class SentenceMark(BaseModel):
    """One sentence of the answer (``start:end`` in its text) and its verdict."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    start: int
    end: int
    verdict: RecordedVerdict
    citations: list[CitedMark] = []

    def best(self) -> CitedMark | None:
        """The citation that gave the sentence its verdict (the first with that verdict)."""
        return next(
            (c for c in self.citations if c.verdict == self.verdict), self.citations[0] if self.citations else None
        )


class CitationChecks(BaseModel):
    """The checks of one answer as the transcript keeps them (``checks`` on the assistant entry)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    version: int = CHECKS_VERSION
    method: str
    counts: dict[str, int] = {}
    invented: list[str] = []
    sentences: list[SentenceMark] = []

    def for_handle(self, handle: str) -> CitedMark | None:
        """The best check of ``handle`` over the answer's sentences (supported first), with its span."""
        order = ("supported", "weak", "unsupported", "invented")
        marks = [c for s in self.sentences for c in s.citations if c.handle == handle]
        return min(marks, key=lambda c: order.index(c.verdict)) if marks else None


def given_chunks(passages: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """``handle → text`` of the passages given to the model (the first text of a handle wins)."""
    chunks: dict[str, str] = {}
    for passage in passages:
        handle, text = passage.get("handle"), passage.get("text")
        if isinstance(handle, str) and handle and isinstance(text, str):
            chunks.setdefault(handle, text)
    return chunks


def check_turn(
    answer: str,
    passages: Iterable[Mapping[str, Any]],
    *,
    encode: Encode | None = None,
    vectors_of: VectorsOf | None = None,
) -> CitationReport:
    """The answer's sentences checked against the turn's passages (see the module docstring)."""
    return check_answer(answer, given_chunks(passages), encode=encode, vectors_of=vectors_of)


def checks_record(report: CitationReport) -> dict[str, Any] | None:
    """The transcript's ``checks`` for ``report``: the sentences that are not plain prose; ``None``
    when every sentence is plain (an answer with no citation and no fact to cite)."""
    marked = [sentence for sentence in report.sentences if sentence.verdict != "plain"]
    if not marked:
        return None
    checks = CitationChecks(
        method=report.method,
        counts=dict(report.counts),
        invented=list(report.invented),
        sentences=[
            SentenceMark(
                start=sentence.start,
                end=sentence.end,
                verdict=sentence.verdict,  # type: ignore[arg-type]  # "plain" is filtered out above
                citations=[CitedMark(**check.as_json()) for check in sentence.checks],
            )
            for sentence in marked
        ],
    )
    return checks.model_dump(mode="json")


def read_checks(value: Any) -> CitationChecks | None:
    """The checks recorded with an answer, or ``None`` (none recorded: an older entry; or unreadable)."""
    if not isinstance(value, dict):
        return None
    try:
        checks = CitationChecks.model_validate(value)
    except ValidationError:
        return None
    return checks if checks.version <= CHECKS_VERSION else None
