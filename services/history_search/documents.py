"""What one transcript entry becomes in the conversation search index: its documents.

One document per message (``user``, ``assistant``), per tool call (``call``: the tool id and its
arguments) and per tool result (``result``: the summary and the output), and per file attached to
a message (``file``: the attached text, the path kept). Notices and system entries (retrieval
sets, context reports, UI listings) are the workbench talking, not the conversation: they are not
indexed. Every text goes through :func:`services.history_search.redaction.redact_secrets` first (the bridge's
secret detectors, the same as prompt history), so a key or a password in a transcript is neither
findable nor shown in a hit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from services.text.attached import attached_files, replace_attached

INDEXED_ROLES = ("user", "assistant", "tool")
KINDS = ("message", "call", "result", "file")
MAX_TEXT_CHARS = 64_000
"""Text kept per document (a whole attached book is not what a search hit shows)."""

# The block services.assistant.attachments.attach writes into a sent message (same pattern, kept
# here because that package imports the conversation's: tests/history_search checks they agree).


@dataclass(frozen=True)
class SearchDocument:
    """One indexed document; ``key`` is unique in the index (``<message id>`` + ``#call`` …)."""

    key: str
    entry: str  # the transcript entry's message id
    conversation_id: str
    seq: int  # the entry's place in its transcript
    turn: int  # 1-based; 0 for an entry outside any turn
    role: str
    kind: str
    tool: str  # the tool id (call, result), the attached path (file), else ""
    timestamp: str
    epoch: int  # the timestamp in whole seconds (the date filter)
    text: str


def turn_number(turn_id: object) -> int:
    """``<conversation>-t0007`` → 7; 0 for anything else."""
    tail = str(turn_id or "").rsplit("-t", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def epoch_seconds(timestamp: str) -> int:
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return 0
    return int(moment.timestamp())


def _seq(message_id: str) -> int:
    tail = message_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _texts(entry: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(kind, tool, text)`` pieces of an entry, before redaction."""
    role = entry.get("role")
    content = str(entry.get("content", ""))
    if role == "tool":
        tool = str(entry.get("tool_name", ""))
        call = f"{tool} {_json_text(entry.get('input'))}".strip()
        result = "\n".join(t for t in (content, _json_text(entry.get("output"))) if t)
        return [("call", tool, call), ("result", tool, result)]
    pieces = [("message", "", replace_attached(content, lambda file: f"[attached {file.path}]"))]
    pieces.extend(("file", file.path, file.text) for file in attached_files(content))
    return pieces


def documents_for(entry: dict[str, Any], redact: Any) -> list[SearchDocument]:
    """The documents of one transcript entry (none for a notice or a system entry); ``redact`` is
    the secret redactor (``redact_secrets``), passed in so that callers load it once."""
    role = str(entry.get("role", ""))
    message_id = str(entry.get("message_id", ""))
    if role not in INDEXED_ROLES or not message_id:
        return []
    timestamp = str(entry.get("timestamp", ""))
    docs = []
    files = 0
    for kind, tool, text in _texts(entry):
        if kind == "file":
            files += 1
            key = f"{message_id}#file{files}"
        else:
            key = message_id if kind == "message" else f"{message_id}#{kind}"
        if not text.strip():
            continue
        docs.append(
            SearchDocument(
                key=key,
                entry=message_id,
                conversation_id=str(entry.get("conversation_id", "")),
                seq=_seq(message_id),
                turn=turn_number(entry.get("turn_id")),
                role=role,
                kind=kind,
                tool=tool,
                timestamp=timestamp,
                epoch=epoch_seconds(timestamp),
                text=redact(text[:MAX_TEXT_CHARS]),
            )
        )
    return docs


__all__ = ["INDEXED_ROLES", "KINDS", "SearchDocument", "documents_for", "epoch_seconds", "turn_number"]
