"""The memory types, shared by the extractors: categories, scopes, messages, entries, ids.

See :mod:`services.context.memory` for the files and the extractors."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from services.context.errors import ContextError
from services.hashing import sha256_hex

if TYPE_CHECKING:
    pass

Category = Literal["preferences", "facts", "decisions", "tasks"]
Scope = Literal["user", "agent"]
CATEGORIES: tuple[Category, ...] = ("preferences", "facts", "decisions", "tasks")
SCOPES: tuple[Scope, ...] = ("user", "agent")
ROLE_SCOPE: dict[str, Scope] = {"user": "user", "system": "user", "assistant": "agent", "tool": "agent"}
MAX_MEMORIES = 50  # per extraction
MAX_MEMORY_CHARS = 280  # per entry; longer text is cut at a word boundary and ends with "…"
MIN_MEMORY_CHARS = 6
MEMORY_DIR = "memories"
ENTRY_LINE = re.compile(r"^- \[(m-[0-9a-f]{16})\] ", re.MULTILINE)  # how a line :meth:`Memory.line` wrote starts


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
    digest = sha256_hex(f"{category}\n{normalize(text)}")
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


# -- offline extraction (services/context/memory_rules.py) ----------------------------------------
