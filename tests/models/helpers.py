"""Small helpers for provider tests: collect a stream, build requests."""

from __future__ import annotations

import contextlib
from typing import Any

from services.models import ChatMessage, ModelEvent, ModelProvider, ModelRequest, TextDelta, ToolCallEvent


async def collect(provider: ModelProvider, request: ModelRequest) -> list[ModelEvent]:
    stream = provider.stream(request)
    async with contextlib.aclosing(stream):
        return [event async for event in stream]


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls_of(events: list[ModelEvent]) -> list[Any]:
    return [e.call for e in events if isinstance(e, ToolCallEvent)]


def ask(text: str = "What is in notes.txt?", **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=[ChatMessage("user", text)], **kwargs)
