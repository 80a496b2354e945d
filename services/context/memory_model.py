"""Model-assisted memory extraction: ask a provider for JSON, validate it, fail loudly.

The messages are sent in order, in batches whose prompt stays within ``token_budget`` approximate
tokens (4 characters a token); a single message too long for the budget is cut and marked.  Each
batch is one request in the provider's structured-output mode (``ModelRequest.output_schema``),
temperature 0 and seed 0.  The answer must be ``{"memories": [{"category", "text", "message"}]}``
where ``message`` is the index of a message of that batch (its role gives the scope).  Anything
else — a provider error, a tool call, a truncated reply, text that is not that JSON — raises
:class:`~services.context.memory.MemoryExtractionFailed`; there is no silent fallback to the
offline rules (the caller chooses them explicitly).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any, cast

from services.context.memory_types import (
    CATEGORIES,
    ROLE_SCOPE,
    Category,
    Memory,
    MemoryExtractionFailed,
    MemorySource,
    SessionMessage,
    finalize,
)
from services.models.base import (
    ChatMessage,
    Done,
    ModelOptions,
    ModelProvider,
    ModelRequest,
    ProviderError,
    TextDelta,
    ToolCallEvent,
)

MAX_REQUESTS = 8
REPLY_MAX_TOKENS = 2048
TRUNCATED = " […truncated]"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["memories"],
    "properties": {
        "memories": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["category", "text", "message"],
                "properties": {
                    "category": {"type": "string", "enum": list(CATEGORIES)},
                    "text": {"type": "string"},
                    "message": {"type": "integer"},
                },
            },
        }
    },
}
INSTRUCTIONS = (
    "You extract long-term memory from a conversation. Each message is shown as [index] role: text. "
    'Return only a JSON object {"memories": [{"category": ..., "text": ..., "message": index}]}. '
    "category is one of preferences (likes, dislikes, how things should always or never be done), "
    "facts (stable facts about the user, the project or tool results), decisions (choices made) and "
    "tasks (things still to do). text is one short self-contained sentence. message is the index of "
    'the message it comes from. Return {"memories": []} when there is nothing worth keeping.'
)


def approx_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _render(message: SessionMessage, limit_chars: int | None = None) -> str:
    who = f"{message.role} ({message.tool_name})" if message.tool_name else message.role
    content = message.content
    if limit_chars is not None and len(content) > limit_chars:
        content = content[: max(0, limit_chars - len(TRUNCATED))] + TRUNCATED
    return f"[{message.index}] {who}: {content}"


def batches(messages: Sequence[SessionMessage], token_budget: int) -> list[list[tuple[SessionMessage, str]]]:
    """Consecutive messages grouped so that each prompt fits ``token_budget`` approximate tokens."""
    room = token_budget - approx_tokens(INSTRUCTIONS)
    if room < 32:
        raise MemoryExtractionFailed(
            f"token budget {token_budget} is too small: the instructions alone take "
            f"{approx_tokens(INSTRUCTIONS)} tokens (give at least {approx_tokens(INSTRUCTIONS) + 32})"
        )
    result: list[list[tuple[SessionMessage, str]]] = []
    current: list[tuple[SessionMessage, str]] = []
    used = 0
    for message in messages:
        block = _render(message)
        cost = approx_tokens(block) + 1
        if cost > room:
            block = _render(message, limit_chars=max(0, (room - 1) * 4 - len(_render(message, 0))))
            cost = approx_tokens(block) + 1
        if current and used + cost > room:
            result.append(current)
            current, used = [], 0
        current.append((message, block))
        used += cost
    if current:
        result.append(current)
    if len(result) > MAX_REQUESTS:
        raise MemoryExtractionFailed(
            f"the session needs {len(result)} extraction requests within a budget of {token_budget} tokens "
            f"(at most {MAX_REQUESTS}); raise the budget or use offline extraction"
        )
    return result


async def _ask(provider: ModelProvider, prompt: str) -> str:
    request = ModelRequest(
        messages=[ChatMessage("system", INSTRUCTIONS), ChatMessage("user", prompt)],
        options=ModelOptions(temperature=0.0, seed=0, max_tokens=REPLY_MAX_TOKENS),
        output_schema=SCHEMA,
    )
    who = f"{provider.name}:{provider.model}"
    parts: list[str] = []
    stream = provider.stream(request)
    try:
        async with contextlib.aclosing(stream):
            async for event in stream:
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, ToolCallEvent):
                    raise MemoryExtractionFailed(f"memory extraction by {who} failed: the model called a tool")
                elif isinstance(event, Done) and event.finish_reason == "length":
                    raise MemoryExtractionFailed(f"memory extraction by {who} failed: the reply was cut at its length")
    except ProviderError as exc:
        raise MemoryExtractionFailed(f"memory extraction by {who} failed: {exc.message}") from exc
    return "".join(parts)


def _strip_fence(text: str) -> str:
    text = text.strip()
    if text.startswith("```") and text.endswith("```") and "\n" in text:
        return text[text.index("\n") + 1 : -3].strip()
    return text


def parse_reply(text: str, batch: Sequence[SessionMessage], who: str) -> list[Memory]:
    """Validate one reply against the schema and the batch; raise ``MemoryExtractionFailed``."""

    def fail(reason: str) -> MemoryExtractionFailed:
        return MemoryExtractionFailed(f"memory extraction by {who} failed: {reason}")

    try:
        data = json.loads(_strip_fence(text))
    except json.JSONDecodeError as exc:
        raise fail(f"the reply is not JSON ({exc.msg} at position {exc.pos})") from None
    items = data.get("memories") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise fail('the reply is not an object with a "memories" list')
    by_index = {message.index: message for message in batch}
    found: list[Memory] = []
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise fail(f"memory {number} is not an object")
        category, text_value, index = item.get("category"), item.get("text"), item.get("message")
        if category not in CATEGORIES:
            raise fail(f"memory {number} has category {category!r}; expected one of {', '.join(CATEGORIES)}")
        if not isinstance(text_value, str) or not text_value.strip():
            raise fail(f"memory {number} has no text")
        if isinstance(index, bool) or not isinstance(index, int) or index not in by_index:
            raise fail(f"memory {number} cites message {index!r}, which is not in the conversation")
        message = by_index[index]
        scope = ROLE_SCOPE.get(message.role, "agent")
        found.append(Memory(cast(Category, category), text_value, MemorySource(message.session_id, index), scope))
    return found


async def extract_with_model(
    messages: Sequence[SessionMessage], provider: ModelProvider, *, token_budget: int
) -> list[Memory]:
    """Memories the model finds in ``messages`` (validated, deduplicated, bounded like offline ones)."""
    who = f"{provider.name}:{provider.model}"
    found: list[Memory] = []
    for batch in batches(messages, token_budget):
        reply = await _ask(provider, "\n\n".join(block for _, block in batch))
        found.extend(parse_reply(reply, [message for message, _ in batch], who))
    return finalize(found)


__all__ = ["INSTRUCTIONS", "MAX_REQUESTS", "SCHEMA", "approx_tokens", "batches", "extract_with_model", "parse_reply"]
