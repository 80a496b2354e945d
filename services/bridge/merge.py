"""Cloud replies in the transcript and in an index, with their provenance, removable as a set.

- :func:`record_reply`: the reply as an ``assistant`` transcript entry with ``provenance: cloud``
  and a ``cloud`` field (request id, model, hashes, redaction counts).
- :func:`merge_reply`: the reply written (atomically) to ``<workspace>/cloud/<request id>.md`` — the
  redacted question that was sent, the reply, its provenance — and that folder indexed into the
  dedicated index ``cloud`` with the engine's public ``index_add`` (incremental: only the new file
  is embedded).  In the index each reply's source path is ``<request id>.md`` and its handles
  are ``cloud:<chunk>``; ``aries rag index list`` lists the index, queries can target it like any
  other.
- :func:`forget_cloud`: drops the ``cloud`` index and deletes the folder — every cloud reply at once
  (``aries rag index drop cloud`` drops the index alone); :func:`forget_reply` removes one.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Protocol

from services.bridge.client import CloudReply
from services.conversation import AssistantAnswer, Conversation
from services.errors import InvalidInput
from services.files.atomic import atomic_write_text

CLOUD_INDEX = "cloud"
CLOUD_DIR = "cloud"


class IndexingEngine(Protocol):
    """The part of :class:`services.retrieval.engine.RetrievalEngine` the merge uses."""

    def index_add(self, path: str, name: str | None = None) -> Any: ...

    def index_drop(self, name: str) -> None: ...

    def index_list(self) -> list[Any]: ...


def record_reply(conversation: Conversation, reply: CloudReply, *, turn_id: str | None = None) -> dict[str, Any]:
    """Write the reply to the transcript as a cloud-tagged assistant answer; returns the entry."""
    event = AssistantAnswer(
        text=reply.text,
        provider="cloud",
        provenance="cloud",
        model=reply.model,
        usage=dict(reply.usage) or None,
        cloud=reply.provenance_entry(),
        turn_id=turn_id,
    )
    return conversation.record(event)


def reply_document(reply: CloudReply) -> str:
    """The Markdown kept for an indexed reply (what was sent, what came back, where from)."""
    counts = ", ".join(f"{kind} {n}" for kind, n in reply.redactions.items()) or "none"
    return (
        f"# Cloud reply {reply.request_id}\n\n"
        f"provenance: cloud; model: {reply.model}; reply {reply.reply_sha256}; redactions: {counts}\n\n"
        f"## Question (as sent, after redaction)\n\n{reply.sent}\n\n## Reply\n\n{reply.text}\n"
    )


def _folder(workspace_root: Path) -> Path:
    return Path(workspace_root) / CLOUD_DIR


def _reply_path(workspace_root: Path, request_id: str) -> Path:
    if not request_id.replace("-", "").isalnum():
        raise InvalidInput(f"not a cloud request id: {request_id!r}")
    return _folder(workspace_root) / f"{request_id}.md"


def merge_reply(engine: IndexingEngine, workspace_root: Path, reply: CloudReply) -> Path:
    """Keep ``reply`` under the workspace and (re)index the cloud folder into ``cloud``; returns the file."""
    path = _reply_path(workspace_root, reply.request_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, reply_document(reply))
    engine.index_add(str(path.parent), CLOUD_INDEX)
    return path


def cloud_replies(workspace_root: Path) -> list[str]:
    """The request ids of the replies kept in the workspace, sorted."""
    folder = _folder(workspace_root)
    return sorted(p.stem for p in folder.glob("*.md")) if folder.is_dir() else []


def forget_reply(engine: IndexingEngine, workspace_root: Path, request_id: str) -> None:
    """Remove one reply: its file, then re-index the folder (files gone are dropped from the index)."""
    path = _reply_path(workspace_root, request_id)
    path.unlink(missing_ok=True)
    if cloud_replies(workspace_root):
        engine.index_add(str(path.parent), CLOUD_INDEX)
    else:
        forget_cloud(engine, workspace_root)


def forget_cloud(engine: IndexingEngine, workspace_root: Path) -> int:
    """Drop the ``cloud`` index and every kept reply; returns how many replies were removed."""
    removed = len(cloud_replies(workspace_root))
    if any(getattr(info, "name", None) == CLOUD_INDEX for info in engine.index_list()):
        engine.index_drop(CLOUD_INDEX)
    shutil.rmtree(_folder(workspace_root), ignore_errors=True)
    return removed


__all__ = [
    "CLOUD_DIR",
    "CLOUD_INDEX",
    "IndexingEngine",
    "cloud_replies",
    "forget_cloud",
    "forget_reply",
    "merge_reply",
    "record_reply",
    "reply_document",
]
