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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from services.context.errors import ContextError
from services.files.atomic import atomic_write_text

if TYPE_CHECKING:
    from services.models.base import ModelProvider
from services.context.memory_types import (
    ENTRY_LINE,
    Memory,
    SessionMessage,
    finalize,
)


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
    from services.context.memory_rules import memories_of

    return finalize(memory for message in messages for memory in memories_of(message))


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


class CorruptMemoryFile(ContextError):
    """A memory file that is not UTF-8 text (edited by hand, damaged): fix or remove it."""

    code = "corrupt_memory_file"


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptMemoryFile(f"{path}: not UTF-8 text at byte {exc.start}", path=str(path)) from None


def check_memory_files(root: Path, memories: Sequence[Memory]) -> None:
    """Raise ``CorruptMemoryFile`` now if a file these memories go to cannot be read."""
    for relpath in sorted({m.relpath() for m in memories}):
        if (Path(root) / relpath).is_file():
            _read_text(Path(root) / relpath)


def write_memories(root: Path, memories: Sequence[Memory]) -> list[Path]:
    """Add ``memories`` to their files under the context ``root``; the files they belong to, sorted.

    Idempotent: an entry whose id is already in its file is skipped, and a file with nothing new is
    not rewritten.  The caller serialises writers (``session_commit.memory_lock``).
    """
    groups: dict[Path, list[Memory]] = {}
    for memory in memories:
        groups.setdefault(Path(root) / memory.relpath(), []).append(memory)
    for path, group in groups.items():
        text = _read_text(path) if path.is_file() else _header(group[0].scope, group[0].category)
        present = set(ENTRY_LINE.findall(text))
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
    for line in _read_text(path).splitlines():
        match = ENTRY_LINE.match(line)
        if match is None:
            continue
        rest = line[match.end() :]
        text, _, source = rest.rpartition(" (source: ")
        result.entries.append(MemoryEntry(match.group(1), text or rest, source.rstrip(")")))
    return result


__all__ = [
    "CorruptMemoryFile",
    "MemoryEntry",
    "MemoryFile",
    "check_memory_files",
    "extract_offline",
    "extract_with_model",
    "model_extractor",
    "read_memory_file",
    "write_memories",
]
