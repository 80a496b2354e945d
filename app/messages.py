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
class TranscriptAppended(Message):
    """A new entry was written to the active transcript."""

    entry: dict[str, Any]


@dataclass
class ArtifactsChanged(Message):
    """The artifact registry of the active workspace changed."""
