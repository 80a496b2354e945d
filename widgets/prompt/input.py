"""The prompt: one line for messages and slash commands. Tab completes a command; Tab again cycles.

Up and Down walk the workspace's prompt history (``services.history_search.prompt_history``: read in a thread the
first time the prompt is used — a key typed, Up pressed — never at start-up, so an idle workbench
does not pay for its parser; each sent line recorded, secrets redacted, by a thread worker that
posts the new history back): Up from the line being written keeps it as a draft (an Up pressed
before the history was read is carried out when it arrives), Down past the newest brings it back.

Tab completes only while the text is a slash command (``/ra`` → ``/rag ``; ``/rag in`` → ``/rag
index ``; an ambiguous word first grows to the candidates' common prefix, then each further Tab
cycles through them). With any other text, or none, Tab keeps its usual meaning (next widget).
The candidates are announced with a ``PromptInput.Candidates`` message (the screen shows them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from textual import events, on
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.suggester import Suggester
from textual.widgets import Input

from widgets.signals import SessionSignals, follow_sessions

Completer = Callable[[str], tuple[str, list[str]]]
CHIP_LINES = 5
CHIP_CHARS = 1_000


class _SlashSuggester(Suggester):
    """Suggests a slash command's name as it is typed. The names are asked for when the first ``/`` is
    typed: the grammar they come from is not worth importing before the first frame."""

    def __init__(self, names: Callable[[], list[str]]) -> None:
        super().__init__(case_sensitive=False)
        self._names = names
        self._names_casefolded: list[tuple[str, str]] | None = None

    async def get_suggestion(self, value: str) -> str | None:  # ``value`` comes casefolded
        if not value.startswith("/"):
            return None
        if self._names_casefolded is None:
            self._names_casefolded = [(name.casefold(), name) for name in self._names()]
        return next((name for folded, name in self._names_casefolded if folded.startswith(value)), None)


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
            tooltip="Complete the slash command, its argument or an @path; press again to cycle through the candidates",
        ),
        Binding(
            "ctrl+j,shift+enter",
            "expand",
            "Newline",
            show=False,
            id="prompt.multiline",
            tooltip="A newline: the message continues in the multi-line editor (pasted chips expanded)",
        ),
        Binding(
            "up",
            "history(-1)",
            "Previous prompt",
            show=False,
            id="prompt.history.previous",
            tooltip="The previous prompt sent in this workspace (the line being written is kept)",
        ),
        Binding(
            "down",
            "history(1)",
            "Next prompt",
            show=False,
            id="prompt.history.next",
            tooltip="The next prompt in this workspace's history; past the newest, the line being written",
        ),
    ]

    @dataclass
    class Expand(Message):
        """Open the multi-line editor with ``text`` (chips expanded)."""

        text: str

    @dataclass
    class Forward(Message):
        """A key that reached the prompt after it asked for the editor, before the editor had the
        focus (keys typed or pasted quickly, under tmux): the screen hands it to the editor."""

        key: str
        character: str | None

    @dataclass
    class HistoryLoaded(Message):
        """The workspace's prompt history (oldest first), read or just recorded by a thread worker."""

        prompts: list[str]
        root: Path | None = None  # the workspace whose history it is

    @dataclass
    class Candidates(Message):
        """The completions of the word being typed (empty: hide them); ``current`` is the one shown."""

        candidates: list[str] = field(default_factory=list)
        current: int | None = None

    def __init__(
        self,
        commands: Callable[[], list[str]],
        *,
        completer: Completer | None = None,
        id: str | None = None,  # noqa: A002
    ) -> None:
        super().__init__(
            placeholder="Message the assistant, or /command (try /help).  Tab completes a command.",
            suggester=_SlashSuggester(commands),
            id=id,
        )
        self.completer: Completer = completer or _no_completion
        self._cycle: tuple[str, list[str], int] | None = None  # (prefix, candidates, index shown)
        self._cycle_value: str | None = None  # the value the last Tab produced
        self._announced = False
        self._root: Path | None = None  # the workspace shown (its history file is under it)
        self.history: list[str] = []
        self._history_root: Path | None = None  # whose history is being read (or was)
        self._history_arrived: Path | None = None  # whose history arrived
        self._pending_step: int | None = None  # an Up/Down pressed before the history arrived
        self._recall: int | None = None  # the history index shown, None while writing
        self._draft = ""
        self.pastes: dict[str, str] = {}  # chip -> the text pasted
        self.expanding = False  # the editor was asked for: keys go on to it (Forward)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "complete":  # a slash command, or an @path: otherwise Tab falls through to focus-next
            cycling = self._cycle is not None and self.value == self._cycle_value  # after "@notes-a.txt "
            return self.value.startswith("/") or cycling or self.value.rsplit(" ", 1)[-1].startswith("@")
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
        if len(candidates) == 1:  # a folder (``docs/``) is completed further: no space after it
            self._set(f"{prefix}{candidates[0]}" + ("" if candidates[0].endswith("/") else " "))
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

    # -- multi-line text and pasted chips ------------------------------------------------------------
    def expanded(self, value: str | None = None) -> str:
        """``value`` (the prompt's by default) with every chip replaced by the text it stands for."""
        text = self.value if value is None else value
        for chip, pasted in self.pastes.items():
            text = text.replace(chip, pasted)
        return text

    def _on_paste(self, event: events.Paste) -> None:
        text = event.text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        if lines > CHIP_LINES or len(text) > CHIP_CHARS:
            event.stop()
            event.prevent_default()
            size = f"{lines} lines" if lines > 1 else f"{len(text):,} characters"
            chip = f"[pasted {size} #{len(self.pastes) + 1}]"
            self.pastes[chip] = text
            self.insert_text_at_cursor(chip)
        elif "\n" in text.strip("\n"):
            event.stop()
            event.prevent_default()
            before, after = self.value[: self.cursor_position], self.value[self.cursor_position :]
            self.expanding = True
            self.post_message(self.Expand(self.expanded(before + text + after)))
        # else: one line, which Input's own handler (called after this one) inserts

    def action_expand(self) -> None:
        if self.expanding:  # a second newline before the editor has the focus
            self.post_message(self.Forward("ctrl+j", None))
            return
        self.expanding = True
        self.post_message(self.Expand(self.expanded() + "\n"))

    async def _on_key(self, event: events.Key) -> None:
        """Keys in the order they came: a newline here (not as a priority binding, which would run
        before the keys queued ahead of it), and, once the editor is asked for, every key for it. The
        first key also starts reading the prompt history: the operator is here and may want it."""
        self._read_history()
        if self.expanding:  # the editor takes over: this key is its (Input's own handler skipped)
            event.stop()
            event.prevent_default()
            self.post_message(self.Forward(event.key, event.character if event.is_printable else None))
        elif event.key in ("ctrl+j", "shift+enter"):
            event.stop()
            event.prevent_default()
            self.action_expand()
        elif event.key == "enter":  # here, in order: as a binding it would run once the key had bubbled
            event.stop()  # up to the App, after the keys typed behind it (type-ahead while a turn streams)
            event.prevent_default()
            await self.action_submit()

    async def action_submit(self) -> None:
        """Enter: what is sent is the text with every pasted chip expanded; the prompt is emptied at
        once, so that what is typed next is the next line."""
        self.post_message(self.Submitted(self, self.expanded(), None))
        self.value = ""

    def submit_text(self, text: str) -> None:
        """Submit ``text`` (the multi-line editor's) as if typed here. Call it with ``call_later``: a
        message is stopped before the App when its sender is the screen it bubbles through."""
        self.post_message(self.Submitted(self, text, None))

    # -- prompt history --------------------------------------------------------------------------
    def on_mount(self) -> None:
        follow_sessions(self, self._session_opened)  # the history follows the active session

    def _session_opened(self, signals: SessionSignals) -> None:
        """A workspace shown: its history is read when the prompt is first used (its file format is a
        pydantic model: importing pydantic costs ~100 ms and ~9 MB that an idle workbench need not pay)."""
        self._root, self.history, self._recall = Path(signals.session.workspace.root), [], None
        self._history_root = self._history_arrived = None
        if self._pending_step is not None:  # Up pressed before the workspace was shown
            self._read_history()

    def _read_history(self) -> None:
        """Start reading the shown workspace's history, once per workspace."""
        if self._root is not None and self._history_root != self._root:
            self._history_root = self._root
            self._in_thread(self._root, None)

    def _in_thread(self, root: Path, record: str | None) -> None:
        """Read (``record`` None) or add to the history of ``root`` in a thread; the result comes back
        as ``HistoryLoaded``."""

        def work() -> None:
            from services.history_search.prompt_history import PromptHistory

            store = PromptHistory.for_root(root)
            self.post_message(self.HistoryLoaded(store.prompts() if record is None else store.record(record), root))

        self.run_worker(work, thread=True, group="prompt-history", exit_on_error=False)

    @on(HistoryLoaded)
    def _history_loaded(self, message: HistoryLoaded) -> None:
        message.stop()
        if message.root == self._root:  # not a workspace shown before this one
            self.history, self._recall, self._history_arrived = message.prompts, None, message.root
            step, self._pending_step = self._pending_step, None
            if step is not None:
                self.action_history(step)

    @on(Input.Submitted)
    def _record(self, event: Input.Submitted) -> None:
        """Remember what was sent (the App handles the text itself, as the message bubbles on)."""
        text, root = event.value.strip(), self._root
        self._recall, self._draft, self.pastes = None, "", {}
        if not text or root is None:
            return
        self.history = [*(p for p in self.history if p != text), text]  # at once; the stored (redacted) list follows
        self._in_thread(root, text)

    def action_history(self, step: int) -> None:
        if self._history_arrived != self._root:  # not read yet: carried out when it arrives
            self._pending_step = step
            self._read_history()
            return
        if not self.history:
            return
        if self._recall is None:
            if step > 0:
                return
            self._draft, index = self.value, len(self.history) - 1
        else:
            index = self._recall + step
        if index < 0:
            self.app.bell()
            return
        if index >= len(self.history):
            self._recall = None
            self._set(self._draft)
            return
        self._recall = index
        self._set(self._one_line(self.history[index]))

    def _one_line(self, text: str) -> str:
        """A multi-line prompt recalled here is a chip (Enter sends it whole, Ctrl+J expands it)."""
        if "\n" not in text:
            return text
        first = text.split("\n", 1)[0][:40]
        chip = f"[{text.count(chr(10)) + 1} lines: {first}…]"
        self.pastes[chip] = text
        return chip

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.value != self._cycle_value:
            self._cycle = None
            self._cycle_value = None
            if self._announced:
                self._announce([])
