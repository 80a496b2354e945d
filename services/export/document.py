"""A conversation as a document: what an export says, read from the transcript, the audit store and
the indexes, before any format decides how it looks (:mod:`services.export.markdown`,
:mod:`services.export.html`).

Every turn in order, each entry as the transcript holds it: the operator's message, the retrieval
(by handle and source), each tool call with its arguments, its result (cut at ``RESULT_CHARS``), the
decision, the rule and who approved it (the audit store's row where it has one, else the
transcript's), the answer with its citations resolved to source, page/section and the chunk's text as
the turn saw it (recorded with the turn's retrieval entry; for a turn recorded before that, looked up
by handle in the index — the handle names the text's hash — and said so; a chunk no longer there is
said to be gone, never replaced), and the notices.

Every text from the transcript, the store or an index is made safe here, once, for every format:
secrets the bridge's detectors find (keys, tokens, passwords, private keys — not paths or host names)
become ``[REDACTED:<kind>]`` (:func:`services.history_search.redaction.redact_secrets`, the
same as prompt history and conversation search), then control, escape and bidi characters become
visible escapes (:func:`services.text.textsafe.neutralize`). A renderer only escapes for its format.

Nothing here reads a clock, a locale or the environment: the same records give the same document.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.text.textsafe import neutralize
from services.workspace.transcripts import SUFFIX, read_transcript

if TYPE_CHECKING:
    from services.workspace.manager import Workspace

FORMAT_VERSION = 1
"""The export's layout version, written in every export (a reader of old exports can tell)."""
RESULT_CHARS = 4_000
"""Characters of a tool's result shown (the whole result stays in the audit store)."""


@dataclass(frozen=True)
class Field:
    """One ``label: value`` line (both single-line, made safe)."""

    label: str
    value: str


@dataclass(frozen=True)
class Body:
    """A block of text shown as it is (made safe): the message, a call's arguments, its result."""

    label: str  # "" for an entry's own text
    text: str
    language: str = "text"  # text | json


@dataclass(frozen=True)
class Citation:
    """A handle an answer cited, resolved: where it is from and the text the turn saw."""

    number: int
    handle: str
    source: str  # the document and page/section ("" when unknown)
    state: str  # recorded | looked_up | missing | no_index | unreadable
    note: str  # one sentence: where the text comes from, or why there is none
    text: str | None


@dataclass(frozen=True)
class Entry:
    """One transcript entry as the document shows it."""

    kind: str  # user | assistant | tool | retrieval | notice
    heading: str  # Aries' own words
    detail: str = ""  # from the records (a tool id, a notice's level and title): made safe, not markup
    fields: tuple[Field, ...] = ()
    bodies: tuple[Body, ...] = ()
    citations: tuple[Citation, ...] = ()


@dataclass(frozen=True)
class Part:
    """A turn (``number`` ≥ 1), or entries outside any turn (``number`` 0: a CLI tool call, a notice)."""

    number: int
    heading: str
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class ExportDocument:
    conversation_id: str
    title: str
    fields: tuple[Field, ...]
    notes: tuple[str, ...]
    parts: tuple[Part, ...]


STATES = {
    "recorded": "as the turn saw it (recorded with the turn)",
    "looked_up": (
        "looked up in index {index} when exported: this turn was recorded before passages were kept with it; "
        "the handle names its text's hash, so this is the text the turn saw"
    ),
    "missing": (
        "no longer in index {index} (its file changed or was removed since); this turn was recorded before "
        "passages were kept with it, so the text it saw is not shown"
    ),
    "no_index": "index {index} no longer exists; this turn was recorded before passages were kept with it",
    "unreadable": "index {index} could not be read ({why}); the text the turn saw is not shown",
}
NOTE = (
    "Exported by Aries (export format {version}) from the transcript{audit}. Secrets the secret detectors "
    "found (keys, tokens, passwords) are shown as [REDACTED:kind]; control, escape and bidi characters from "
    "the conversation are shown as visible escapes such as \\x1b and <U+202E>."
)


class Safe:
    """The one way a text from the records enters the document: secrets redacted, then controls shown."""

    def __init__(self) -> None:
        from services.history_search.redaction import redact_secrets  # detect-secrets: on first use

        self._redact: Callable[[str], str] = redact_secrets

    def text(self, value: object) -> str:
        return neutralize(self._redact(str(value)))

    def line(self, value: object) -> str:
        return neutralize(self._redact(str(value)), single_line=True)

    def json(self, value: object) -> str:
        return self.text(json_text(value))


def json_text(value: object) -> str:
    """Stable, readable JSON: sorted keys, two-space indent, non-ASCII kept."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2, default=str)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def where(page: object, section: object) -> str:
    parts = []
    if isinstance(page, int):
        parts.append(f"p. {page}")
    if section:
        parts.append(f"§ {section}")
    return " ".join(parts)


# -- looking things up ----------------------------------------------------------------------------
@dataclass
class Sources:
    """What the records outside the transcript say: the audit rows of its calls, the indexes' chunks."""

    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    audit_problem: str | None = None
    passages: dict[str, dict[str, Any]] = field(default_factory=dict)  # handle → passage as recorded
    looked_up: dict[str, tuple[str, dict[str, Any] | None, str]] = field(default_factory=dict)


def _audit(workspace: Workspace, entries: Sequence[dict[str, Any]], sources: Sources) -> None:
    from services.audit.log import read_decisions
    from services.errors import AriesError

    calls = [str(e["call_id"]) for e in entries if e.get("role") == "tool" and e.get("call_id")]
    try:
        sources.decisions = read_decisions(workspace.paths.audit_db, calls)
    except AriesError as exc:
        sources.audit_problem = exc.message


def _recorded(entries: Iterable[dict[str, Any]], sources: Sources) -> None:
    for entry in entries:
        if entry.get("kind") == "retrieval" and isinstance(entry.get("passages"), list):
            for passage in entry["passages"]:
                if isinstance(passage, dict) and passage.get("handle") and isinstance(passage.get("text"), str):
                    sources.passages.setdefault(str(passage["handle"]), passage)


def _look_up(workspace: Workspace, handles: Iterable[str], sources: Sources) -> None:
    """The cited handles the transcript has no text for, looked up read-only in their index's manifest."""
    from services.retrieval.store_manifest import Manifest
    from services.sqlite.readonly import UnreadableWal, connect_readonly

    by_index: dict[str, list[str]] = {}
    for handle in handles:
        index, _, chunk = handle.partition(":")
        by_index.setdefault(index, []).append(chunk)
    indexes = {paths.name: paths for paths in workspace.paths.index_folders()}
    for index, chunks in sorted(by_index.items()):
        paths = indexes.get(index)
        if paths is None or not paths.manifest.is_file():
            sources.looked_up.update({f"{index}:{c}": ("no_index", None, "") for c in chunks})
            continue
        try:
            db = connect_readonly(paths.manifest, timeout=5.0)
            try:
                found = Manifest(db).get_chunks(chunks)
            finally:
                db.close()
        except (sqlite3.Error, OSError, UnreadableWal) as exc:  # a damaged or unreadable manifest: said
            why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            sources.looked_up.update({f"{index}:{c}": ("unreadable", None, why) for c in chunks})
            continue
        for chunk in chunks:
            stored = found.get(chunk)
            if stored is None:
                sources.looked_up[f"{index}:{chunk}"] = ("missing", None, "")
            else:
                data = {"source_path": stored.chunk.source_path, "page": stored.chunk.page}
                data.update(section=stored.chunk.section, text=stored.chunk.text)
                sources.looked_up[f"{index}:{chunk}"] = ("looked_up", data, "")


# -- the entries -----------------------------------------------------------------------------------
def _marks(entries: list[dict[str, Any]]) -> dict[str, str]:
    """The turns a rewind put away (exported as written, and said so) and the pinned ones."""
    from services.conversation.timeline import timeline_of, turn_number

    timeline = timeline_of(entries)
    live, pinned = set(timeline.lineage), set(timeline.pinned)
    marks = {turn: "rewound away" for turn in timeline.turns if turn not in live}
    marks.update({turn: "pinned" for turn in timeline.lineage if turn_number(turn) in pinned})
    return marks


class Builder:
    def __init__(self, safe: Safe, sources: Sources, marks: dict[str, str] | None = None) -> None:
        self.safe = safe
        self.sources = sources
        self.marks = marks or {}  # turn id → "pinned" or "rewound away" (the conversation's timeline)

    def entry(self, raw: dict[str, Any]) -> Entry | None:
        role = raw.get("role")
        if role == "user":
            mark = self.safe.line(self.marks.get(str(raw.get("turn_id")), ""))
            return Entry("user", "Operator", mark, self._when(raw), (Body("", self.safe.text(raw.get("content", ""))),))
        if role == "assistant":
            return self.answer(raw)
        if role == "tool":
            return self.tool(raw)
        if role == "system" and raw.get("kind") == "retrieval":
            return self.retrieval(raw)
        title = raw.get("title") or ("context window" if raw.get("kind") == "context" else None)
        level = str(raw.get("level") or ("system" if role == "system" else "info"))
        detail = self.safe.line(f"{level}: {title}" if title else level)
        return Entry("notice", "Notice", detail, self._when(raw), (Body("", self.safe.text(raw.get("content", ""))),))

    def _when(self, raw: dict[str, Any]) -> tuple[Field, ...]:
        return (Field("Time", self.safe.line(raw.get("timestamp", ""))),)

    def answer(self, raw: dict[str, Any]) -> Entry:
        fields = list(self._when(raw))
        fields.append(Field("Model", self.safe.line(raw.get("model") or raw.get("provider") or "?")))
        if raw.get("provenance") == "cloud":
            cloud = _dict(raw.get("cloud"))
            fields.append(Field("Provenance", "cloud" + self.safe.line(f" (request {cloud.get('request_id')})")))
        usage = _dict(raw.get("usage"))
        if "prompt_tokens" in usage or "completion_tokens" in usage:
            tokens = f"{usage.get('prompt_tokens', 0)} prompt, {usage.get('completion_tokens', 0)} completion"
            fields.append(Field("Tokens", self.safe.line(tokens)))
        handles = [str(h) for h in raw.get("citations") or [] if isinstance(h, str)]
        citations = tuple(self.citation(n, handle) for n, handle in enumerate(dict.fromkeys(handles), start=1))
        heading = "Assistant" + (" (cloud)" if raw.get("provenance") == "cloud" else "")
        body = (Body("", self.safe.text(raw.get("content", ""))),)
        return Entry("assistant", heading, "", tuple(fields), body, citations)

    def citation(self, number: int, handle: str) -> Citation:
        index = handle.partition(":")[0]
        recorded = self.sources.passages.get(handle)
        data: dict[str, Any] | None = recorded
        if recorded is not None:
            state, why = "recorded", ""
        else:
            state, data, why = self.sources.looked_up.get(handle, ("missing", None, ""))
        note = STATES[state].format(index=self.safe.line(index), why=self.safe.line(why))
        source = ""
        text = None
        if data is not None:
            place = where(data.get("page"), data.get("section"))
            source = self.safe.line(" ".join(p for p in (str(data.get("source_path") or ""), place) if p))
            text = self.safe.text(data.get("text", ""))
        return Citation(number, self.safe.line(handle), source, state, note, text)

    def retrieval(self, raw: dict[str, Any]) -> Entry:
        fields = [*self._when(raw), Field("Index", self.safe.line(raw.get("index") or "none"))]
        fields.append(Field("Query", self.safe.line(raw.get("query", ""))))
        recorded = {str(p.get("handle")): p for p in raw.get("passages") or [] if isinstance(p, dict)}
        lines = []
        for handle in raw.get("handles") or []:
            passage = recorded.get(str(handle)) or {}
            place = where(passage.get("page"), passage.get("section"))
            origin = " ".join(p for p in (str(passage.get("source_path") or ""), place) if p)
            lines.append(f"{handle}  {origin}".rstrip())
        body = "\n".join(lines) if lines else str(raw.get("content", ""))
        count = len(raw.get("handles") or [])
        return Entry("retrieval", "Retrieval", f"{count} passage(s)", tuple(fields), (Body("", self.safe.text(body)),))

    def tool(self, raw: dict[str, Any]) -> Entry:
        output = _dict(raw.get("output"))
        decision = _dict(_dict(output.get("meta")).get("decision"))
        error = output["error"] if isinstance(output.get("error"), dict) else None
        row = self.sources.decisions.get(str(raw.get("call_id") or ""))
        fields = list(self._when(raw))
        status = "ok" if raw.get("status") == "success" else "failed"
        if row is not None and row.get("status") == "denied" or decision.get("action") == "deny":
            status = "denied"
        fields.append(Field("Status", status))
        fields += self._decision(decision, error, row)
        for label, key in (("Source", "source"), ("Call id", "call_id")):
            if raw.get(key):
                fields.append(Field(label, self.safe.line(raw[key])))
        artifacts = [a for a in raw.get("artifacts") or [] if isinstance(a, dict)]
        if artifacts:
            names = ", ".join(f"{a.get('name')} ({a.get('role')}, {a.get('id')})" for a in artifacts)
            fields.append(Field("Artifacts", self.safe.line(names)))
        fields.append(Field("Summary", self.safe.line(raw.get("content", ""))))
        bodies = [Body("Arguments", self.safe.json(raw.get("input")), "json")]
        bodies.append(self._result(output, error))
        return Entry("tool", "Tool call", self.safe.line(raw.get("tool_name", "?")), tuple(fields), tuple(bodies))

    def _decision(
        self, decision: dict[str, Any], error: dict[str, Any] | None, row: dict[str, Any] | None
    ) -> list[Field]:
        """Decision, rule, who approved: the audit store's row, else what the transcript recorded."""
        details = _dict((error or {}).get("details"))
        action = (row or {}).get("decision") or decision.get("action")
        rule = (row or {}).get("rule_id") or decision.get("rule") or details.get("rule")
        approved = (row or {}).get("approved_by") if row is not None else decision.get("approved_by")
        tier = (row or {}).get("tier") or decision.get("tier")
        fields = [Field("Decision", self.safe.line(action or "not recorded"))]
        fields.append(Field("Rule", self.safe.line(rule or "not recorded")))
        fields.append(Field("Approved by", self.safe.line(approved or "nobody (no approval was given)")))
        if tier:
            fields.append(Field("Tier", self.safe.line(tier)))
        if row is not None and row.get("reason"):
            fields.append(Field("Reason", self.safe.line(row["reason"])))
        recorded = "the audit store" if row is not None else "the transcript (no audit row found)"
        fields.append(Field("Decision from", recorded))
        return fields

    def _result(self, output: dict[str, Any], error: dict[str, Any] | None) -> Body:
        if error is not None:
            text = f"{error.get('type', 'Error')}: {error.get('message', '')}"
            return Body("Error", self.safe.text(text))
        data = json_text(output.get("data"))
        if len(data) > RESULT_CHARS:
            data = data[:RESULT_CHARS] + f"\n… (cut: {len(data) - RESULT_CHARS} more characters; the whole result "
            data += "is in the audit store)"
        return Body("Result", self.safe.text(data), "json")


# -- the document ----------------------------------------------------------------------------------
def _parts(builder: Builder, entries: Sequence[dict[str, Any]]) -> tuple[Part, ...]:
    """Consecutive entries of one turn make a part (entries outside any turn make their own)."""
    from services.history_search.documents import turn_number

    parts: list[Part] = []
    current: str | None = None
    shown: list[Entry] = []

    def close() -> None:
        if shown:
            number = turn_number(current) if current else 0
            heading = f"Turn {number}" if number else "Outside a turn"
            parts.append(Part(number, heading, tuple(shown)))

    for raw in entries:
        turn = str(raw["turn_id"]) if raw.get("turn_id") else None
        if turn != current:
            close()
            current, shown = turn, []
        entry = builder.entry(raw)
        if entry is not None:
            shown.append(entry)
    close()
    return tuple(parts)


def build(workspace: Workspace, conversation_id: str) -> ExportDocument:
    """The document of conversation ``conversation_id`` (an id, as :func:`services.conversation.history.resolve`
    gives it) of ``workspace``."""
    path = workspace.transcripts_dir / f"{conversation_id}{SUFFIX}"
    result = read_transcript(path)
    entries = result.entries
    safe = Safe()
    sources = Sources()
    _audit(workspace, entries, sources)
    _recorded(entries, sources)
    cited = {
        str(h)
        for e in entries
        if e.get("role") == "assistant"
        for h in e.get("citations") or []
        if isinstance(h, str) and ":" in h
    }
    _look_up(workspace, sorted(cited - set(sources.passages)), sources)
    parts = _parts(Builder(safe, sources, _marks(entries)), entries)
    notes = [NOTE.format(version=FORMAT_VERSION, audit=" and the audit store" if sources.decisions else "")]
    if sources.audit_problem:
        notes.append(
            safe.line(
                f"The audit store could not be read ({sources.audit_problem}): decisions shown are the transcript's."
            )
        )
    for problem in result.problems:
        notes.append(safe.line(f"Transcript line {problem.line} could not be read ({problem.reason}): not shown."))
    title = f"Conversation {safe.line(conversation_id)}"
    return ExportDocument(conversation_id, title, _header(safe, workspace, entries, parts), tuple(notes), parts)


def _header(
    safe: Safe, workspace: Workspace, entries: Sequence[dict[str, Any]], parts: Sequence[Part]
) -> tuple[Field, ...]:
    fields = [Field("Workspace", safe.line(workspace.name))]
    if entries:
        fields.append(Field("Started", safe.line(entries[0].get("timestamp", ""))))
        fields.append(Field("Last entry", safe.line(entries[-1].get("timestamp", ""))))
    fields.append(Field("Turns", str(len({part.number for part in parts if part.number}))))
    fork = next((e["forked_from"] for e in entries if isinstance(e.get("forked_from"), dict)), None)
    if fork is not None:
        origin = f"{fork.get('conversation_id', '?')} after {fork.get('turn_id', '?')}"
        fields.append(Field("Forked from", safe.line(origin)))
    return tuple(fields)


__all__ = ["FORMAT_VERSION", "Body", "Citation", "Entry", "ExportDocument", "Field", "Part", "build"]
