"""The offline extraction rules: cue phrases per category, sentence by sentence.

Deterministic and model-free; :func:`services.context.memory.extract_offline` applies them to a
list of messages and then cleans, deduplicates and bounds the result.
"""

from __future__ import annotations

import re

from services.context.memory_types import ROLE_SCOPE, Category, Memory, MemorySource, SessionMessage


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


def memories_of(message: SessionMessage) -> list[Memory]:
    """The candidate memories of one message (before cleaning, deduplication and bounds)."""
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


__all__ = ["memories_of"]
