"""The input of ``aries ask``: a question, plain text on stdin, or the spec's request JSON on stdin.

The request JSON (researcher-rag-bridge spec) is validated with ``jsonschema`` against
``schemas/ask-request.schema.json``, which ships with Aries. Anything that does not fit is an
:class:`~services.errors.InvalidInput` (exit code 2) with one line naming the field, e.g.
``request JSON: settings.k: 0 is less than the minimum of 1``.

Stdin is JSON when its first non-blank character is ``{``; anything else is the question as
plain text (so ``echo "what is BM25?" | aries ask --stdin`` works).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from services.errors import InvalidInput

SCHEMA_DIR = Path(__file__).with_name("schemas")
REQUEST_SCHEMA = "ask-request.schema.json"
RESPONSE_SCHEMA = "ask-response.schema.json"
INGEST_SCHEMA = "ingest-result.schema.json"
ERROR_SCHEMA = "error.schema.json"
MAX_INPUT_BYTES = 1_000_000


@dataclass(frozen=True)
class AskRequest:
    query: str
    id: str | None = None
    mode: str = "ask"
    tags: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    k: int | None = None
    cloud_allowed: bool = False
    from_json: bool = False


@cache
def load_schema(name: str) -> dict[str, Any]:
    """One of the shipped JSON Schemas (``services/pipe/schemas/NAME``)."""
    data = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def schema_errors(data: Any, name: str) -> list[str]:
    """Every way ``data`` fails the shipped schema ``name``, one line each (``path: message``),
    in a stable order; empty when it is valid."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(load_schema(name))
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    return [f"{_path(e.absolute_path)}: {_short(e.message)}" for e in errors]


def validate(data: Any, name: str, what: str) -> None:
    """Raise :class:`InvalidInput` with the first problem when ``data`` does not fit schema ``name``."""
    problems = schema_errors(data, name)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InvalidInput(f"{what}: {problems[0]}{more}", problems=problems)


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _short(message: str, limit: int = 160) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 1] + "…"


def parse_request_json(text: str) -> AskRequest:
    """The spec's request JSON → :class:`AskRequest` (InvalidInput on bad JSON or a bad field)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise InvalidInput(f"request JSON: not valid JSON ({exc.msg} at {where})") from None
    validate(data, REQUEST_SCHEMA, "request JSON")
    if data.get("mode", "ask") != "ask":
        raise InvalidInput('request JSON: mode "ingest" is not answered by aries ask; use: aries ingest PATH')
    context = data.get("context") or {}
    settings = data.get("settings") or {}
    return AskRequest(
        query=str(data["query"]),
        id=data.get("id"),
        mode="ask",
        tags=list(context.get("tags") or []),
        files=list(context.get("files") or []),
        k=settings.get("k"),
        cloud_allowed=bool(settings.get("cloud_allowed", False)),
        from_json=True,
    )


def parse_input(question: str | None, stdin_text: str | None) -> AskRequest:
    """The request from the command line: ``question`` (an argument) or ``stdin_text`` (JSON or plain
    text). Exactly one must be given and it must hold a question."""
    if question is not None and stdin_text is not None:
        raise InvalidInput("give the question as an argument or on stdin (--stdin), not both")
    if stdin_text is not None:
        if len(stdin_text.encode("utf-8", "replace")) > MAX_INPUT_BYTES:
            raise InvalidInput(f"stdin holds more than {MAX_INPUT_BYTES} bytes; a question is shorter than that")
        if stdin_text.lstrip().startswith("{"):
            return parse_request_json(stdin_text)
        question = stdin_text
    if question is None or not question.strip():
        raise InvalidInput("no question: give it as an argument, or pipe it (or a request JSON) with --stdin")
    if "\x00" in question:
        raise InvalidInput("the question contains a NUL byte")
    return AskRequest(query=question.strip())


__all__ = [
    "ERROR_SCHEMA",
    "INGEST_SCHEMA",
    "REQUEST_SCHEMA",
    "RESPONSE_SCHEMA",
    "AskRequest",
    "load_schema",
    "parse_input",
    "parse_request_json",
    "schema_errors",
    "validate",
]
