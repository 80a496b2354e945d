"""Long-term memory: categorized entries extracted from session messages, kept as Markdown files.

Categories are ``preferences``, ``facts``, ``decisions`` and ``tasks``; each lives in two scopes:

- ``user``: what the operator said (``user`` and ``system`` messages) — their preferences, facts
  about them and their project, decisions they made, their tasks;
- ``agent``: what the assistant and its tools produced (``assistant`` and ``tool`` messages) —
  decisions the assistant made ("I'll use …"), facts tools reported (``key: value`` lines), tasks
  the assistant took on.

On disk (under the context root) each pair is one file, ``<scope>/memories/<category>.md``
(``axiom://user/memories/preferences.md`` …).  An entry is one line,
``- [m-<16 hex>] <text> (source: <session id>#<message index>)``; the id is a hash of the category
and the normalized text, so committing the same content again adds nothing.  Files are only ever
appended to (new entries after the existing text, in extraction order) and rewritten atomically, so
hand edits survive and the same commits give the same bytes.

Two extractors: :func:`extract_offline` (deterministic rules: cue phrases, no model) and
:func:`extract_with_model` (a :class:`~services.models.base.ModelProvider` asked for JSON under a
token budget; any failure is one :class:`MemoryExtractionFailed`, never a silent fallback).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from services.atomic import atomic_write_text
from services.errors import AriesError

if TYPE_CHECKING:
    from services.models.base import ModelProvider

Category = Literal["preferences", "facts", "decisions", "tasks"]
Scope = Literal["user", "agent"]
CATEGORIES: tuple[Category, ...] = ("preferences", "facts", "decisions", "tasks")
SCOPES: tuple[Scope, ...] = ("user", "agent")
ROLE_SCOPE: dict[str, Scope] = {"user": "user", "system": "user", "assistant": "agent", "tool": "agent"}
MAX_MEMORIES = 50  # per extraction
MAX_MEMORY_CHARS = 280  # per entry; longer text is cut at a word boundary and ends with "…"
MIN_MEMORY_CHARS = 6
MEMORY_DIR = "memories"
_ENTRY = re.compile(r"^- \[(m-[0-9a-f]{16})\] ", re.MULTILINE)


class ContextError(AriesError):
    """Placeholder until ``services/context/errors.py`` (ctx-core) lands; then import it from there."""

    code = "context_error"


class MemoryExtractionFailed(ContextError):
    """The model could not extract memories: it failed, or its answer was not the JSON asked for."""

    code = "memory_extraction_failed"


@dataclass(frozen=True)
class SessionMessage:
    """One message of a session as stored (one NDJSON line); ``index`` counts from 0 per session."""

    session_id: str
    index: int
    role: str
    content: str
    timestamp: str
    tool_name: str | None = None
    meta: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "session_id": self.session_id,
            "index": self.index,
            "role": self.role,
            "content": self.content,
            "timestamp": self.timestamp,
        }
        if self.tool_name is not None:
            record["tool_name"] = self.tool_name
        if self.meta is not None:
            record["meta"] = self.meta
        return record


@dataclass(frozen=True)
class MemorySource:
    session_id: str
    message_index: int

    def __str__(self) -> str:
        return f"{self.session_id}#{self.message_index}"


@dataclass(frozen=True)
class Memory:
    category: Category
    text: str
    source: MemorySource
    scope: Scope

    @property
    def id(self) -> str:
        return memory_id(self.category, self.text)

    def relpath(self) -> Path:
        """Where the entry lives, relative to the context root."""
        return Path(self.scope) / MEMORY_DIR / f"{self.category}.md"

    def line(self) -> str:
        return f"- [{self.id}] {self.text} (source: {self.source})"

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "text": self.text,
            "scope": self.scope,
            "session_id": self.source.session_id,
            "message_index": self.source.message_index,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Memory:
        category, scope = data["category"], data["scope"]
        if category not in CATEGORIES or scope not in SCOPES:
            raise ValueError(f"bad memory record {data!r}")
        source = MemorySource(str(data["session_id"]), int(data["message_index"]))
        return cls(cast(Category, category), str(data["text"]), source, cast(Scope, scope))


def normalize(text: str) -> str:
    """The comparison form of a memory's text: NFKC, case-folded, one space, no end punctuation."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split()).rstrip(" .!;:,")


def memory_id(category: str, text: str) -> str:
    digest = hashlib.sha256(f"{category}\n{normalize(text)}".encode()).hexdigest()
    return f"m-{digest[:16]}"


def clean_text(text: str) -> str:
    """One line, no control characters, at most ``MAX_MEMORY_CHARS`` characters."""
    chars = (" " if unicodedata.category(c).startswith("C") or c in "\u2028\u2029" else c for c in text)
    line = " ".join("".join(chars).split())
    if len(line) > MAX_MEMORY_CHARS:
        cut = line[: MAX_MEMORY_CHARS - 1]
        if " " in cut[MAX_MEMORY_CHARS // 2 :]:
            cut = cut[: cut.rindex(" ")]
        line = cut.rstrip() + "…"
    return line


def finalize(candidates: Iterable[Memory]) -> list[Memory]:
    """Clean, drop the too-short, dedupe by (scope, category, normalized text), bound the count."""
    seen: set[tuple[str, str]] = set()
    result: list[Memory] = []
    for memory in candidates:
        text = clean_text(memory.text)
        if len(text) < MIN_MEMORY_CHARS:
            continue
        cleaned = Memory(memory.category, text, memory.source, memory.scope)
        key = (cleaned.scope, cleaned.id)
        if key in seen:
            continue
        seen.add(key)
        result.append(cleaned)
        if len(result) >= MAX_MEMORIES:
            break
    return result


# -- offline extraction ----------------------------------------------------------------------------
def _phrases(*words: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(words) + r")\b", re.IGNORECASE)


_TASK_PREFIX = re.compile(r"^(?:[-*+]\s*\[ \]\s*|(?:TODO|FIXME)\b[:\s-]*|action item:\s*)", re.IGNORECASE)
_TASK = _phrases(
    r"TODO", r"remind me to", r"don'?t forget to", r"do not forget to", r"i need to", r"we need to",
    r"we still need to", r"i have to", r"we have to", r"we must", r"action item",
)  # fmt: skip
_DECISION = _phrases(
    r"we(?:'ve| have)? decided", r"i(?:'ve| have)? decided", r"decided to", r"let'?s go with",
    r"let us go with", r"we(?:'ll| will) go with", r"we agreed", r"the decision is", r"we chose",
    r"i chose", r"i(?:'ll| will) use", r"we(?:'ll| will) use", r"going with", r"settled on",
)  # fmt: skip
_PREFERENCE = _phrases(
    r"i prefer", r"i'?d prefer", r"i would prefer", r"i'?d rather", r"i would rather", r"i like",
    r"i love", r"i don'?t like", r"i do not like", r"i dislike", r"i hate", r"always", r"never",
    r"please don'?t", r"please do not",
)  # fmt: skip
_FACT = _phrases(
    r"remember that", r"note that", r"keep in mind", r"for the record", r"fyi", r"my [\w' -]{1,40}? (?:is|are|was)",
    r"our [\w' -]{1,40}? (?:is|are|was)", r"i am an?", r"i'?m an?", r"i work", r"i live",
)  # fmt: skip
_BULLET = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_IMPERATIVE = re.compile(
    r"^(?:add|book|buy|call|check|email|finish|fix|implement|migrate|refactor|remove|rename|review|"
    r"schedule|send|submit|update|upgrade|write|deploy|document|test)\b",
    re.IGNORECASE,
)
_KEY_VALUE = re.compile(r"^([A-Za-z][\w .-]{0,39}?)\s*[:=]\s+(\S.{0,159})$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")
TOOL_FACTS_PER_MESSAGE = 3
TOOL_FACT_MAX_LINES = 40


def _lines(content: str) -> list[str]:
    """Non-empty lines outside fenced code blocks."""
    lines: list[str] = []
    fenced = False
    for raw in content.splitlines():
        stripped = raw.strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fenced = not fenced
            continue
        if stripped and not fenced:
            lines.append(stripped)
    return lines


def _classify(sentence: str, *, bullet: bool, role: str) -> tuple[Category, str] | None:
    if sentence.endswith("?"):
        return None
    task_prefix = _TASK_PREFIX.match(sentence)
    if task_prefix is not None:
        rest = sentence[task_prefix.end() :]
        return "tasks", rest[:1].upper() + rest[1:]
    if _TASK.search(sentence):
        return "tasks", sentence
    if bullet and role in ("user", "system") and _IMPERATIVE.match(sentence):
        return "tasks", sentence
    if _DECISION.search(sentence):
        return "decisions", sentence
    if _PREFERENCE.search(sentence):
        return "preferences", sentence
    if _FACT.search(sentence):
        return "facts", sentence
    return None


def _from_message(message: SessionMessage) -> list[Memory]:
    scope = ROLE_SCOPE.get(message.role)
    if scope is None:
        return []
    source = MemorySource(message.session_id, message.index)
    found: list[Memory] = []
    lines = _lines(message.content)
    for line in lines:
        bullet = _BULLET.match(line)
        checkbox = line.startswith(("- [ ]", "* [ ]", "+ [ ]"))
        body = line if checkbox or bullet is None else line[bullet.end() :]
        for sentence in _SENTENCE_END.split(body) if not checkbox else [body]:
            hit = _classify(sentence.strip(), bullet=bullet is not None, role=message.role)
            if hit is not None:
                found.append(Memory(hit[0], hit[1], source, scope))
    if message.role == "tool" and len(lines) <= TOOL_FACT_MAX_LINES:
        tool = message.tool_name or "tool"
        facts = [m for line in lines if (m := _KEY_VALUE.match(line)) is not None][:TOOL_FACTS_PER_MESSAGE]
        found.extend(Memory("facts", f"{tool}: {m.group(1)}: {m.group(2)}", source, scope) for m in facts)
    return found


def extract_offline(messages: Sequence[SessionMessage]) -> list[Memory]:
    """Rule-based extraction: same messages → same memories, in message order.

    A sentence (outside code fences, not a question) is a *task* when it is a ``- [ ]`` item,
    starts with or contains ``TODO``/``FIXME``, says "remind me to", "I/we need to", "don't forget
    to"…, or is a bullet starting with an imperative verb (user and system messages only); else a
    *decision* ("we decided", "let's go with", "I'll use"…); else a *preference* ("I prefer",
    "I'd rather", "always", "never"…); else a *fact* ("remember that", "note that", "my … is",
    "I am a"…).  A short tool output (at most 40 lines) adds up to 3 facts from ``key: value``
    lines.  Deduplicated by normalized text, at most ``MAX_MEMORIES`` of ``MAX_MEMORY_CHARS``.
    """
    return finalize(memory for message in messages for memory in _from_message(message))


# -- model extraction (services/context/memory_model.py) -----------------------------------------
async def extract_with_model(
    messages: Sequence[SessionMessage], provider: ModelProvider, *, token_budget: int
) -> list[Memory]:
    """Ask ``provider`` for the memories (JSON, validated); any failure is ``MemoryExtractionFailed``."""
    from services.context.memory_model import extract_with_model as run

    return await run(messages, provider, token_budget=token_budget)


def model_extractor(
    provider: ModelProvider, *, token_budget: int
) -> Callable[[Sequence[SessionMessage]], list[Memory]]:
    """An ``extractor`` for ``ContextSession.commit`` that runs :func:`extract_with_model`.

    It runs its own event loop (``asyncio.run``) and closes the provider's HTTP session at its end:
    call ``commit`` from a thread (a worker), not from a coroutine.
    """

    async def run(messages: Sequence[SessionMessage]) -> list[Memory]:
        try:
            return await extract_with_model(messages, provider, token_budget=token_budget)
        finally:
            await provider.aclose()  # its HTTP session belongs to this event loop, which ends here

    def extract(messages: Sequence[SessionMessage]) -> list[Memory]:
        return asyncio.run(run(messages))

    return extract


# -- memory files ----------------------------------------------------------------------------------
def _header(scope: str, category: str) -> str:
    return (
        f"# {category.capitalize()} ({scope})\n\n"
        f"Long-term memory written by session commits: one entry per line, "
        f"`- [id] text (source: session#message)`.\n\n"
    )


def existing_ids(path: Path) -> set[str]:
    if not path.is_file():
        return set()
    return set(_ENTRY.findall(path.read_text(encoding="utf-8")))


def write_memories(root: Path, memories: Sequence[Memory]) -> list[Path]:
    """Add ``memories`` to their files under the context ``root``; the files they belong to, sorted.

    Idempotent: an entry whose id is already in its file is skipped, and a file with nothing new is
    not rewritten.  The caller serialises writers (see ``sessions.memory_lock``).
    """
    groups: dict[Path, list[Memory]] = {}
    for memory in memories:
        groups.setdefault(Path(root) / memory.relpath(), []).append(memory)
    for path, group in groups.items():
        text = path.read_text(encoding="utf-8") if path.is_file() else _header(group[0].scope, group[0].category)
        present = set(_ENTRY.findall(text))
        new_lines: list[str] = []
        for memory in group:
            if memory.id not in present:
                present.add(memory.id)
                new_lines.append(memory.line() + "\n")
        if not new_lines and path.is_file():
            continue
        if text and not text.endswith("\n"):
            text += "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text + "".join(new_lines))
    return sorted(groups)


@dataclass
class MemoryEntry:
    id: str
    text: str
    source: str


@dataclass
class MemoryFile:
    path: Path
    entries: list[MemoryEntry] = field(default_factory=list)


def read_memory_file(path: Path) -> MemoryFile:
    """The entries of one memory file (lines that are not entries are ignored)."""
    result = MemoryFile(path)
    if not path.is_file():
        return result
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _ENTRY.match(line)
        if match is None:
            continue
        rest = line[match.end() :]
        text, _, source = rest.rpartition(" (source: ")
        result.entries.append(MemoryEntry(match.group(1), text or rest, source.rstrip(")")))
    return result


__all__ = [
    "CATEGORIES",
    "MAX_MEMORIES",
    "MAX_MEMORY_CHARS",
    "ROLE_SCOPE",
    "SCOPES",
    "Category",
    "ContextError",
    "Memory",
    "MemoryEntry",
    "MemoryExtractionFailed",
    "MemoryFile",
    "MemorySource",
    "Scope",
    "SessionMessage",
    "extract_offline",
    "extract_with_model",
    "model_extractor",
    "memory_id",
    "normalize",
    "read_memory_file",
    "write_memories",
]
