"""Answers that must satisfy a profile's ``output_schema``: parse, validate, say what failed.

The answer is the model's whole text; one surrounding Markdown code fence (```json … ```) is
tolerated, nothing else. A failure is one line naming the failing path (``$.findings[0].citations``)
and the reason, shown to the operator and sent back to the model for its one retry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"\A\s*```(?:json)?\s*\n(?P<body>.*)\n\s*```\s*\Z", re.DOTALL)
MAX_RETRIES = 1


@dataclass(frozen=True)
class SchemaCheck:
    value: Any = None
    error: str | None = None  # one line: "at $.path: reason"
    path: str = "$"

    @property
    def ok(self) -> bool:
        return self.error is None


def json_path(parts: Any) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def check_answer(text: str, schema: dict[str, Any]) -> SchemaCheck:
    """``text`` parsed as JSON and validated against ``schema`` (a checked JSON Schema)."""
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for

    match = _FENCE.match(text)
    body = match.group("body") if match else text
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return SchemaCheck(error=f"at $: the answer is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})")
    validator = validator_for(schema)(schema)
    error = best_match(validator.iter_errors(value))
    if error is None:
        return SchemaCheck(value=value)
    path = json_path(error.absolute_path)
    message = " ".join(error.message.split())
    if len(message) > 300:
        message = message[:300] + "…"
    return SchemaCheck(value=value, error=f"at {path}: {message}", path=path)


def retry_instruction(error: str) -> str:
    return (
        f"Your answer does not satisfy the required JSON Schema: {error}. Answer again with only one JSON "
        "object that satisfies the schema, and nothing else."
    )


__all__ = ["MAX_RETRIES", "SchemaCheck", "check_answer", "json_path", "retry_instruction"]
