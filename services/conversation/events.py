"""Typed conversation events and their transcript form.

Every event knows its ``role`` in the NDJSON transcript and turns itself into the entry's extra
fields (``to_fields``); the writer adds ``timestamp``, ``conversation_id`` and ``message_id``.
Turn bookkeeping is common to all: ``turn_id`` (one operator message and everything it caused),
``step`` (position inside the turn), and for tool calls ``tool_call_id`` (the model's id for the
call, when a model asked) and ``call_id`` (the audit store's row).

Roles: ``user``, ``assistant``, ``tool`` (one per tool call, after the gateway decided and ran
it), ``system`` (retrieval sets and other facts the model is given), ``notice`` (what the UI
tells the operator: mode changes, errors, listings — never sent to a model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.models.window_budget import ContextBreakdown


@dataclass(frozen=True, kw_only=True)
class _Event:
    turn_id: str | None = None
    step: int | None = None

    role = "system"

    @property
    def content(self) -> str:
        raise NotImplementedError

    def _common(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if self.turn_id is not None:
            fields["turn_id"] = self.turn_id
        if self.step is not None:
            fields["step"] = self.step
        return fields

    def to_fields(self) -> dict[str, Any]:
        return self._common()


@dataclass(frozen=True, kw_only=True)
class UserMessage(_Event):
    text: str
    role = "user"

    @property
    def content(self) -> str:
        return self.text


@dataclass(frozen=True, kw_only=True)
class AssistantAnswer(_Event):
    text: str
    provider: str
    provenance: str = "local"
    model: str | None = None
    citations: list[str] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    cloud: dict[str, Any] | None = None  # provenance "cloud": request id, model, hashes, redaction counts
    checks: dict[str, Any] | None = None  # the citation checks (services.assistant.citation_turn.CitationChecks)
    role = "assistant"

    @property
    def content(self) -> str:
        return self.text

    def to_fields(self) -> dict[str, Any]:
        fields = {**self._common(), "provider": self.provider, "provenance": self.provenance}
        if self.model:
            fields["model"] = self.model
        fields["citations"] = list(self.citations)
        if self.usage is not None:
            fields["usage"] = self.usage
        if self.cloud is not None:
            fields["cloud"] = self.cloud
        if self.checks is not None:
            fields["checks"] = self.checks
        return fields


@dataclass(frozen=True, kw_only=True)
class RetrievalSet(_Event):
    """The chunks injected for a turn (or shown for ``/rag query``), by handle.

    ``passages`` are those chunks as the turn saw them (``{"handle", "source_path", "page",
    "section", "text"}``, see :func:`passage_record`), written as ``passages`` so that an export can
    show what an answer cited even after the index changed; an entry written before they were
    recorded has none (the export looks the handle up and says so)."""

    query: str
    index: str | None
    handles: list[str]
    threshold: float | None = None
    retrieval_id: str | None = None
    passages: list[dict[str, Any]] = field(default_factory=list)
    role = "system"

    @property
    def content(self) -> str:
        if self.index is None:
            return "retrieval: no index is in use"
        if not self.handles:
            return f"retrieval: nothing in index {self.index} for this message"
        return f"retrieval: {len(self.handles)} chunks from index {self.index}: " + ", ".join(self.handles)

    def to_fields(self) -> dict[str, Any]:
        fields = {**self._common(), "kind": "retrieval", "query": self.query, "index": self.index}
        fields["handles"] = list(self.handles)
        if self.threshold is not None:
            fields["threshold"] = self.threshold
        if self.retrieval_id is not None:
            fields["retrieval_id"] = self.retrieval_id
        if self.passages:
            fields["passages"] = [dict(passage) for passage in self.passages]
        return fields


PASSAGE_FIELDS = ("handle", "source_path", "page", "section", "text")


def passage_record(hit: dict[str, Any]) -> dict[str, Any]:
    """What a retrieval entry keeps of one hit: where it is from and its text, as the turn saw it."""
    return {name: hit.get(name) for name in PASSAGE_FIELDS}


@dataclass(frozen=True, kw_only=True)
class ToolCallRecord(_Event):
    """One tool call as the gateway decided, ran and audited it."""

    tool_id: str
    input: Any
    output: dict[str, Any]
    ok: bool
    duration_ms: float
    call_id: str | None
    summary: str
    tool_call_id: str | None = None
    source: str | None = None
    # Links to what the call stored in the artifact registry (web bodies, extracted text, file
    # snapshots and diffs): ``{"role", "id", "name", "hash", ...}``, as on the audit row.
    artifacts: list[dict[str, Any]] | None = None
    # Read from the model's text rather than a native tool call (written only when true: an entry
    # without it, as every older transcript's, is a native call or not a model's).
    from_text: bool = False
    role = "tool"

    @property
    def content(self) -> str:
        return self.summary

    def to_fields(self) -> dict[str, Any]:
        fields = {
            **self._common(),
            "tool_name": self.tool_id,
            "input": self.input,
            "output": self.output,
            "status": "success" if self.ok else "fail",
            "duration_ms": self.duration_ms,
            "call_id": self.call_id,
        }
        if self.tool_call_id is not None:
            fields["tool_call_id"] = self.tool_call_id
        if self.source is not None:
            fields["source"] = self.source
        if self.artifacts:
            fields["artifacts"] = self.artifacts
        if self.from_text:
            fields["from_text"] = True
        return fields


@dataclass(frozen=True, kw_only=True)
class Notice(_Event):
    """What the workbench tells the operator (a mode change, a listing, an error). Not model input."""

    text: str
    level: str = "info"  # info | warning | error
    title: str | None = None
    role = "notice"

    @property
    def content(self) -> str:
        return self.text

    def to_fields(self) -> dict[str, Any]:
        fields = {**self._common(), "level": self.level}
        if self.title:
            fields["title"] = self.title
        return fields


@dataclass(frozen=True, kw_only=True)
class ContextReport(_Event):
    """What one model request left out to fit the model's context window (a notice: never model input).

    ``left_out_turns`` are the earlier turns not sent (always the oldest ones: written as ``{"count",
    "first", "last"}``), ``left_out_passages``
    the retrieved passages not sent (whole, by handle), ``left_out_tools`` the tool schemas not
    offered; ``window`` and ``window_source`` (config, learned, provider, default) say against what,
    ``prompt_tokens`` is the request as estimated, ``reason`` why it was fitted again (a server's
    overflow error), ``breakdown`` the request part by part (written as ``breakdown``; an older entry
    has none), ``brought_back`` the handles (``turn:<conversation>:<n>``) of the left-out turns sent
    back beside the passages (written only when there are any)."""

    window: int
    window_source: str
    prompt_tokens: int
    reserve: int
    left_out_turns: list[str] = field(default_factory=list)
    left_out_passages: list[str] = field(default_factory=list)
    left_out_tools: list[str] = field(default_factory=list)
    reason: str | None = None
    breakdown: ContextBreakdown | None = None
    brought_back: list[str] = field(default_factory=list)
    role = "notice"

    @property
    def content(self) -> str:
        parts = []
        turns = self.left_out_turns
        if turns:
            span = turns[0].rsplit("-", 1)[-1] + (f"–{turns[-1].rsplit('-', 1)[-1]}" if len(turns) > 1 else "")
            parts.append(f"the {len(turns)} oldest turn(s) ({span})")
        if self.left_out_passages:
            parts.append(f"{len(self.left_out_passages)} passage(s) ({', '.join(self.left_out_passages)})")
        if self.left_out_tools:
            parts.append(f"the schemas of {len(self.left_out_tools)} tool(s) (no tool offered)")
        what = " and ".join(parts) if parts else "nothing"
        head = f"{self.reason} " if self.reason else ""
        back = ""
        if self.brought_back:
            numbers = ", ".join(handle.rsplit(":", 1)[-1] for handle in self.brought_back)
            back = f" Brought back as relevant to this message: turn(s) {numbers} ({', '.join(self.brought_back)})."
        return (
            f"{head}To fit the context window of {self.window} tokens ({self.window_source}; {self.reserve} kept for "
            f"the answer, about {self.prompt_tokens} sent), left out: {what}.{back}"
        )

    def to_fields(self) -> dict[str, Any]:
        fields = {**self._common(), "level": "warning", "title": "context window", "kind": "context"}
        turns = self.left_out_turns
        fields.update(
            window=self.window,
            window_source=self.window_source,
            prompt_tokens=self.prompt_tokens,
            reserve=self.reserve,
            left_out={
                # always the oldest turns: a range, so that the line does not grow with the conversation
                "turns": {"count": len(turns), "first": turns[0], "last": turns[-1]} if turns else None,
                "passages": list(self.left_out_passages),
                "tools": list(self.left_out_tools),
            },
        )
        if self.reason:
            fields["reason"] = self.reason
        if self.brought_back:
            fields["brought_back"] = list(self.brought_back)
        if self.breakdown is not None:
            fields["breakdown"] = self.breakdown.to_dict()
        return fields


@dataclass(frozen=True, kw_only=True)
class TimelineMark(_Event):
    """A pin, unpin, checkpoint or rewind (a notice: never model input); ``fields`` are the entry's
    own (``kind``, ``format`` and what :mod:`services.conversation.timeline` reads back)."""

    text: str
    fields: dict[str, Any]
    role = "notice"

    @property
    def content(self) -> str:
        return self.text

    def to_fields(self) -> dict[str, Any]:
        return {**self._common(), "level": "info", "title": str(self.fields.get("kind")), **self.fields}


@dataclass(frozen=True, kw_only=True)
class Compaction(_Event):
    """``/compact`` (issue 30 item 2): a model's summary of earlier turns (``action`` ``summary``), the
    operator's edit of it (``edit``: a new entry, the one it replaces kept), or the undo of the last
    of these (``undo``, naming it in ``undoes``). Written as ``{"kind": "compaction", ...}``; the turns
    it summarises (``first_turn``..``last_turn``) stay in the transcript as they were.
    :mod:`services.assistant.compaction` reads them back (which summary is in force)."""

    action: str  # summary | edit | undo
    compaction_id: str
    summary: str = ""
    first_turn: int = 0
    last_turn: int = 0
    model: str | None = None
    undoes: str | None = None
    role = "system"

    @property
    def content(self) -> str:
        if self.action == "undo":
            return f"summary {self.undoes} undone (/compact show: what is in force now)"
        by = "edited by the operator" if self.action == "edit" else f"written by {self.model or 'the model'}"
        head = f"summary {self.compaction_id} of turns {self.first_turn}–{self.last_turn}, {by}"
        note = "/compact show · edit · undo; sent to the model as data when those turns are left out"
        return f"{head} ({note})\n\n{self.summary}"

    def to_fields(self) -> dict[str, Any]:
        from services.workspace.transcript_format import stamp

        fields = {**self._common(), **stamp("compaction"), "action": self.action, "compaction_id": self.compaction_id}
        if self.action == "undo":
            fields["undoes"] = self.undoes
            return fields
        fields.update(summary=self.summary, turns={"first": self.first_turn, "last": self.last_turn})
        if self.model:
            fields["model"] = self.model
        return fields


ConversationEvent = (
    UserMessage | AssistantAnswer | RetrievalSet | ToolCallRecord | Notice | ContextReport | TimelineMark | Compaction
)
