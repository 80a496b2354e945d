"""The prompt: one line for messages and slash commands. Tab completes a command; Tab again cycles.

Tab completes only while the text is a slash command (``/ra`` → ``/rag ``; ``/rag in`` → ``/rag
index ``; an ambiguous word first grows to the candidates' common prefix, then each further Tab
cycles through them). With any other text, or none, Tab keeps its usual meaning (next widget).
The candidates are announced with a ``PromptInput.Candidates`` message (the screen shows them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.suggester import SuggestFromList
from textual.widgets import Input

Completer = Callable[[str], tuple[str, list[str]]]


def _no_completion(line: str) -> tuple[str, list[str]]:
    return line, []


class PromptInput(Input):
    DEFAULT_CSS = """
    PromptInput { margin: 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "tab",
            "complete",
            "Complete",
            show=False,
            id="prompt.complete",
            tooltip="Complete the slash command or sub-command; press again to cycle through the candidates",
        ),
    ]

    @dataclass
    class Candidates(Message):
        """The completions of the word being typed (empty: hide them); ``current`` is the one shown."""

        candidates: list[str] = field(default_factory=list)
        current: int | None = None

    def __init__(
        self,
        commands: list[str],
        *,
        completer: Completer | None = None,
        id: str | None = None,  # noqa: A002
    ) -> None:
        super().__init__(
            placeholder="Message the assistant, or /command (try /help).  Tab completes a command.",
            suggester=SuggestFromList(commands, case_sensitive=False),
            id=id,
        )
        self.completer: Completer = completer or _no_completion
        self._cycle: tuple[str, list[str], int] | None = None  # (prefix, candidates, index shown)
        self._cycle_value: str | None = None  # the value the last Tab produced
        self._announced = False

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "complete":
            return self.value.startswith("/")  # otherwise Tab falls through to focus-next
        return super().check_action(action, parameters)

    def _set(self, value: str) -> None:
        self._cycle_value = value
        self.value = value
        self.cursor_position = len(value)

    def _announce(self, candidates: list[str], current: int | None = None) -> None:
        self._announced = bool(candidates)
        self.post_message(self.Candidates(list(candidates), current))

    def action_complete(self) -> None:
        if self._cycle is not None and self.value == self._cycle_value:
            prefix, candidates, index = self._cycle
            index = (index + 1) % len(candidates)
            self._cycle = (prefix, candidates, index)
            self._set(f"{prefix}{candidates[index]} ")
            self._announce(candidates, index)
            return
        self._cycle = None
        prefix, candidates = self.completer(self.value)
        if not candidates:
            self.app.bell()
            return
        partial = self.value[len(prefix) :]
        if len(candidates) == 1:
            self._set(f"{prefix}{candidates[0]} ")
            self._announce([])
            return
        common = os.path.commonprefix(candidates)
        if len(common) > len(partial):
            self._set(f"{prefix}{common}")
            self._cycle = (prefix, candidates, -1)  # the next Tab shows the first candidate
            self._announce(candidates)
            return
        self._cycle = (prefix, candidates, 0)
        self._set(f"{prefix}{candidates[0]} ")
        self._announce(candidates, 0)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.value != self._cycle_value:
            self._cycle = None
            self._cycle_value = None
            if self._announced:
                self._announce([])
