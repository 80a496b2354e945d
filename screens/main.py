"""The main screen: transcript and prompt on the left; Context, Approvals, Artifacts on the right."""

from __future__ import annotations

from typing import Any

from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Header

from app.commands import suggestions
from widgets.approvals.pane import ApprovalsPane
from widgets.artifacts.pane import ArtifactsPane
from widgets.context.pane import ContextPane
from widgets.keybar import KeyBar
from widgets.prompt.input import PromptInput
from widgets.transcript.pane import TranscriptPane


class MainScreen(Screen[None]):
    CSS_PATH = "main.tcss"

    class Ready(Message):
        """The panes are mounted: the App fills them from the active workspace."""

    def compose(self) -> Any:
        yield Header(icon="♈")
        with Horizontal(id="workbench"):
            with Vertical(id="conversation"):
                yield TranscriptPane(id="transcript")
                yield PromptInput(suggestions(), id="prompt")
            with Vertical(id="side"):
                yield ContextPane(id="context")
                yield ApprovalsPane(id="approvals")
                yield ArtifactsPane(id="artifacts")
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.query_one(PromptInput).focus()
        self.post_message(self.Ready())
