"""The ``offline`` provider: today's extractive answer (:func:`services.models.answers.offline_answer`).

It needs no model and no network: it answers the last user message with the retrieved passages
(``ModelRequest.retrieved``) under their citation handles, clearly labelled.  The text is streamed
as a few deltas (one per paragraph) so that callers exercise the same path as with a real model;
it never calls tools and reports zero tokens and time.  Same request → same events.

Asked for structured output (``ModelRequest.output_schema``, e.g. the ``auditor`` profile), it
answers with one JSON object in the findings shape — ``{"summary": …, "findings": [{"claim":
passage, "severity": "info", "citations": [handle]}]}`` — one finding per relevant passage. It
cannot follow an arbitrary schema: the turn loop validates the answer and reports a mismatch.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator

from services.models.answers import PASSAGE_CHARS, Answer, offline_answer
from services.models.base import Done, ModelEvent, ModelRequest, TextDelta, Usage

OFFLINE_MODEL = "offline"


def last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content
    return ""


class OfflineProvider:
    """Answers from the retrieved passages; the default when no model is configured."""

    name = "offline"

    def __init__(self, model: str = OFFLINE_MODEL) -> None:
        self.model = model or OFFLINE_MODEL

    def answer(self, request: ModelRequest) -> Answer:
        """The whole answer at once (with its citations), as :func:`offline_answer` gives it."""
        return offline_answer(last_user_text(request), request.index, request.retrieved)

    def structured(self, request: ModelRequest) -> str:
        """The answer as one JSON object of findings, each citing its passage's handle."""
        answer = self.answer(request)
        by_handle = {str(hit.get("handle")): hit for hit in request.retrieved}
        findings = [
            {
                "claim": " ".join(str(by_handle[h].get("text") or "").split())[:PASSAGE_CHARS],
                "severity": "info",
                "citations": [h],
            }
            for h in answer.citations
            if h in by_handle
        ]
        summary = answer.text.split("\n", 1)[0]
        return json.dumps({"summary": summary, "findings": findings}, ensure_ascii=False, indent=2)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        text = self.structured(request) if request.output_schema is not None else self.answer(request).text
        parts = text.split("\n\n")
        for number, part in enumerate(parts):
            yield TextDelta(part if number == len(parts) - 1 else part + "\n\n")
        yield Usage(prompt_tokens=0, completion_tokens=0, total_ms=0)
        yield Done("stop")

    async def list_models(self) -> list[str]:
        return [OFFLINE_MODEL]

    async def aclose(self) -> None:
        return None


__all__ = ["OFFLINE_MODEL", "OfflineProvider", "last_user_text"]
