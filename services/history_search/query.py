"""Searching the conversation index: a query, filters, and hits with a highlighted snippet.

The query is Tantivy's query language over the text (words, ``"a phrase"``, ``+must -not``,
``word*``); the filters — role, tool, a date, one conversation — are exact and do not change the
scores. Hits are sorted by score, then by conversation, place in it and document, so that the same
index gives the same list however Tantivy cut it into segments (a rebuild included); a tie across
the ``limit`` is fetched whole before the cut.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from services.errors import InvalidInput
from services.history_search.documents import INDEXED_ROLES, epoch_seconds
from services.history_search.store import Coverage, HistoryIndex, SearchIndexError, is_damage

if TYPE_CHECKING:
    import tantivy

SNIPPET_CHARS = 160
DEFAULT_LIMIT = 20
DEFAULT_BUDGET_S = 0.5
"""How long a search spends catching up before it answers from what is indexed (marked partial)."""


@dataclass(frozen=True)
class Filters:
    role: str | None = None  # user | assistant | tool
    tool: str | None = None  # a tool id, or a run of its parts: fs, fs:read, builtin:fs:read
    since: str | None = None  # an ISO date or date and time (UTC when no offset is given)
    conversation: str | None = None  # one conversation's id (earlier turns brought back: issue 30)
    through_turn: int | None = None  # only turns 1..N (with ``conversation``: the turns left out)


@dataclass(frozen=True)
class Hit:
    conversation_id: str
    message_id: str
    timestamp: str
    turn: int
    role: str
    kind: str  # message | call | result | file
    tool: str  # the tool id (call, result) or the attached file's path (file)
    score: float
    snippet: str
    highlights: list[tuple[int, int]] = field(default_factory=list)  # character ranges in snippet
    rewound: bool = False  # the turn was put away by a rewind (readable, not in force: /rewind N brings it back)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["highlights"] = [list(span) for span in self.highlights]
        return data


@dataclass(frozen=True)
class SearchResult:
    query: str
    hits: list[Hit]
    coverage: Coverage

    @property
    def partial(self) -> bool:
        return self.coverage.partial

    @property
    def rebuilt(self) -> str:
        """Why the index was found damaged and rebuilt from the transcripts by this search ('': it was not)."""
        return self.coverage.rebuilt

    def notice(self) -> str:
        """The one line to show when the index was rebuilt ('' when it was not)."""
        if not self.rebuilt:
            return ""
        return f"The conversation search index was rebuilt from the transcripts: {self.rebuilt}."

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "partial": self.partial,
            "rebuilt": self.rebuilt,
            "indexed": self.coverage.indexed,
            "conversations": self.coverage.total,
            "hits": [hit.to_dict() for hit in self.hits],
        }


_FILTER = re.compile(r'"[^"]*"?|(?<!\S)(?:(role|tool|since):|--(role|tool|since)(?:=|\s+))(\S+)')


def split_filters(line: str) -> tuple[str, Filters]:
    """A query line typed in the TUI → ``(query, filters)``: ``role:R``, ``tool:T`` and ``since:DATE``
    (or ``--role R``, ``--tool T``, ``--since DATE``) anywhere outside quotes are filters, the rest
    is the query (``"a phrase"`` kept whole). The last of a repeated filter counts."""
    found: dict[str, str] = {}

    def take(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name is None:  # a quoted phrase: part of the query as it is
            return match.group(0)
        found[name] = match.group(3)
        return ""

    text = " ".join(_FILTER.sub(take, line).split())
    filters = Filters(role=found.get("role"), tool=found.get("tool"), since=found.get("since"))
    return text, filters


def unsplit(text: str, filters: Filters) -> str:
    """The query line that :func:`split_filters` reads back as ``(text, filters)``."""
    named = [("role", filters.role), ("tool", filters.tool), ("since", filters.since)]
    return " ".join([text, *(f"{name}:{value}" for name, value in named if value)]).strip()


def since_epoch(text: str) -> int:
    """``2026-11-20`` or ``2026-11-20T08:00`` (UTC unless an offset is given) → epoch seconds."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(f"since {text!r} is not a date (YYYY-MM-DD, or YYYY-MM-DDTHH:MM)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return epoch_seconds(moment.isoformat())


def search(
    index: HistoryIndex,
    text: str,
    filters: Filters | None = None,
    *,
    limit: int = DEFAULT_LIMIT,
    budget_s: float | None = DEFAULT_BUDGET_S,
    wait_s: float = 0.0,
) -> SearchResult:
    """The best ``limit`` hits for ``text`` after catching the index up (for at most ``budget_s``;
    waiting up to ``wait_s`` for another process's catch-up)."""
    filters = filters or Filters()
    if not text.strip():
        raise InvalidInput("the search needs words to look for")
    if filters.role is not None and filters.role not in INDEXED_ROLES:
        raise InvalidInput(f"role must be one of {', '.join(INDEXED_ROLES)}, not {filters.role!r}")
    if limit < 1:
        raise InvalidInput("--limit must be at least 1")
    since = since_epoch(filters.since) if filters.since else None
    try:
        return _answer(index, text, filters, since, limit, index.catch_up(budget_s=budget_s, wait_s=wait_s))
    except BaseException as exc:  # a damaged segment: rebuilt from the transcripts, asked again
        if not is_damage(exc):
            raise
        reason = f"a segment cannot be read ({_first_line(exc)})"
    coverage = index.rebuild(reason)
    try:
        return _answer(index, text, filters, since, limit, coverage)
    except BaseException as exc:
        if not is_damage(exc):
            raise
        raise SearchIndexError(f"the conversation search index cannot be read after a rebuild: {exc}") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _answer(
    index: HistoryIndex, text: str, filters: Filters, since: int | None, limit: int, coverage: Coverage
) -> SearchResult:
    opened = index.searcher()
    if opened is None:
        return SearchResult(text, [], coverage)
    tantivy_index, searcher = opened
    text_query = _parse(tantivy_index, text)
    query = _filtered(tantivy_index.schema, text_query, filters, since)
    import tantivy

    generator = tantivy.SnippetGenerator.create(searcher, text_query, tantivy_index.schema, "text")
    generator.set_max_num_chars(SNIPPET_CHARS)
    hits = [_hit(generator, doc, score) for score, doc in _ranked(searcher, query, limit)]
    return SearchResult(text, _mark_rewound(index, hits), coverage)


def _mark_rewound(index: HistoryIndex, hits: list[Hit]) -> list[Hit]:
    """Each hit of a turn a rewind put away says so. The index holds every turn (a rewind of the
    rewind brings them back): whether a turn is in force is read from its transcript's timeline at
    search time, once per conversation hit."""
    from services.conversation.timeline import timeline_of
    from services.workspace.transcripts import SUFFIX, read_transcript

    away: dict[str, frozenset[int]] = {}
    for conversation in sorted({hit.conversation_id for hit in hits if hit.turn}):
        try:
            entries = read_transcript(index.transcripts_dir / f"{conversation}{SUFFIX}").entries
        except (OSError, ValueError):  # gone or unreadable since it was indexed: nothing to say of it
            continue
        away[conversation] = timeline_of(entries).away
    return [replace(hit, rewound=True) if hit.turn in away.get(hit.conversation_id, ()) else hit for hit in hits]


def _parse(index: tantivy.Index, text: str) -> tantivy.Query:
    try:
        return index.parse_query(text, ["text"])
    except ValueError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else "syntax error"
        raise InvalidInput(f"cannot read the query {text!r}: {reason}") from None


def _filtered(schema: tantivy.Schema, query: tantivy.Query, filters: Filters, since: int | None) -> tantivy.Query:
    import tantivy

    clauses = [(tantivy.Occur.Must, query)]
    exact = {"role": filters.role, "conversation": filters.conversation}
    for name, value in exact.items():
        if value is not None:
            term = tantivy.Query.term_query(schema, name, value)
            clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(term, 0.0)))
    if filters.tool is not None:  # whole parts of the id: fs → builtin:fs:read, never builtin:fsx
        parts = tantivy.Query.regex_query(schema, "tool", f"(.*:)?{re.escape(filters.tool)}(:.*)?")
        clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(parts, 0.0)))
    ranges = [("epoch", since, None), ("turn", 1 if filters.through_turn else None, filters.through_turn)]
    for name, low, high in ranges:
        if low is not None or high is not None:
            span = tantivy.Query.range_query(schema, name, tantivy.FieldType.Integer, low, high)
            clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(span, 0.0)))
    return tantivy.Query.boolean_query(clauses) if len(clauses) > 1 else query


def _ranked(searcher: tantivy.Searcher, query: tantivy.Query, limit: int) -> list[tuple[float, tantivy.Document]]:
    """The best ``limit`` (score, document), ties ordered by conversation, seq and key; a tie that
    crosses the cut is fetched whole first (the limit doubles until the score after it is lower)."""
    fetch = limit + 1
    while True:
        hits = searcher.search(query, limit=fetch, count=False).hits
        if len(hits) < fetch or hits[-1][0] < hits[limit - 1][0]:
            break
        fetch *= 2

    found = [(float(score), searcher.doc(address)) for score, address in hits]

    def order(hit: tuple[float, tantivy.Document]) -> tuple[float, str, int, str]:
        doc = hit[1]
        return (-hit[0], str(doc["conversation"][0]), int(doc["seq"][0]), str(doc["key"][0]))

    return sorted(found, key=order)[:limit]


def _hit(generator: tantivy.SnippetGenerator, doc: tantivy.Document, score: float) -> Hit:
    snippet = generator.snippet_from_doc(doc)
    fragment = snippet.fragment()
    spans: list[tuple[int, int]] = []
    if fragment:
        raw = fragment.encode("utf-8")
        for r in snippet.highlighted():
            start, end = len(raw[: r.start].decode("utf-8", "ignore")), len(raw[: r.end].decode("utf-8", "ignore"))
            if end > start:
                spans.append((start, end))
    else:  # nothing in the text itself matched (a query on another field): its start
        fragment = str(doc["text"][0])[:SNIPPET_CHARS]

    return Hit(
        conversation_id=str(doc["conversation"][0]),
        message_id=str(doc["entry"][0]),
        timestamp=str(doc["timestamp"][0]),
        turn=int(doc["turn"][0]),
        role=str(doc["role"][0]),
        kind=str(doc["kind"][0]),
        tool=str(doc["tool"][0]),
        score=round(score, 6),
        snippet=fragment,
        highlights=sorted(spans),
    )


__all__ = ["DEFAULT_LIMIT", "Filters", "Hit", "SearchResult", "search", "since_epoch", "split_filters", "unsplit"]
