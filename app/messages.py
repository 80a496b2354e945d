"""Messages posted between the App, screens and panes: small dataclasses, nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class WorkspaceChanged(Message):
    """The App opened another workspace; panes reload from it."""

    name: str


@dataclass
class ConversationEntry(Message):
    """The session's conversation wrote an entry (posted from whichever thread wrote it)."""

    entry: dict[str, Any]
    conversation_id: str


@dataclass
class ApprovalsChanged(Message):
    """A call joined or left the session's approval queue."""


@dataclass
class TurnEvent(Message):
    """Something the turn loop reported (a streamed token, a tool call, the end of the turn)."""

    event: Any
