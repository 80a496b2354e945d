"""The prompt: one line for messages and slash commands, with command completion."""

from __future__ import annotations

from textual.suggester import SuggestFromList
from textual.widgets import Input


class PromptInput(Input):
    DEFAULT_CSS = """
    PromptInput { margin: 0; }
    """

    def __init__(self, commands: list[str], *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(
            placeholder="Message the assistant, or /command (try /help).  Tab completes a command.",
            suggester=SuggestFromList(commands, case_sensitive=False),
            id=id,
        )
