"""Read-only replay of a stored conversation: pick one, see it as it was; nothing runs.

The transcript is rendered by the same widgets as the live one, from the file alone. ``a`` on a
tool-call block opens its audit row (the App handles the block's message, as in the live pane).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from widgets.safe import plain
from widgets.transcript.pane import TranscriptPane


class ReplayScreen(Screen[None]):
    CSS_PATH = "replay.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close", id="replay.close", tooltip="Back to the workbench"),
        Binding("tab", "switch_focus", "Switch", id="replay.focus", tooltip="Move between the list and the transcript"),
    ]

    def __init__(self, summaries: list[dict[str, Any]], workspace: str) -> None:
        super().__init__()
        self.summaries = summaries
        self.workspace = workspace

    def compose(self) -> Any:
        title = plain(f"Replay (read-only) · workspace {self.workspace} · nothing is executed", single_line=True)
        yield Static(title, id="replay-title")
        with Horizontal(id="replay-body"):
            with Vertical(id="replay-list-box") as box:
                box.border_title = "Conversations"
                options = [self._option(s) for s in reversed(self.summaries)]  # newest first
                yield OptionList(*options, id="replay-list")
            yield TranscriptPane(id="replay-transcript")
        keys = "↑ ↓ choose · Enter shows it · Tab switches · a on a tool call: its audit row · Esc closes"
        yield Static(keys, id="replay-keys", markup=False)

    @staticmethod
    def _option(summary: dict[str, Any]) -> Option:
        when = str(summary.get("started_at") or "")[:16].replace("T", " ")
        line = Text.assemble(
            plain(f"{when}  {summary['entries']} entries, {summary['tool_calls']} tool calls", single_line=True),
            "\n  ",
            plain(str(summary.get("first_message") or "(no message)")[:60], single_line=True),
        )
        return Option(line, id=str(summary["path"]))

    def on_mount(self) -> None:
        listing = self.query_one("#replay-list", OptionList)
        if self.summaries:
            listing.highlighted = 0
            self._show(str(listing.get_option_at_index(0).id))
        listing.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._show(str(event.option.id))
        self.query_one("#replay-transcript").focus()

    def _show(self, path: str) -> None:
        from services.workspace.transcripts import read_transcript

        entries = read_transcript(Path(path)).entries
        self.query_one("#replay-transcript", TranscriptPane).load(entries, subtitle=Path(path).stem)

    def action_switch_focus(self) -> None:
        listing = self.query_one("#replay-list")
        (self.query_one("#replay-transcript") if listing.has_focus else listing).focus()

    def action_close(self) -> None:
        self.dismiss(None)
