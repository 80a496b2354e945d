"""The help screen: the slash commands (from the dispatch table) and the keys."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from widgets.commands import COMMANDS, CommandSpec
from widgets.keybar import key_label
from widgets.safe import plain


def commands_table(specs: Iterable[CommandSpec] = COMMANDS) -> Table:
    """Usage on one line, what it does beneath: long usages never squeeze the descriptions. The usage
    is the spec's own (generated from its forms, like completion and the parsed object)."""
    table = Table(title="Commands", title_justify="left", expand=True, show_edge=False, show_header=False)
    table.add_column("command")
    for command in specs:
        table.add_row(Text.assemble(plain(command.usage, "bold cyan"), "\n    ", plain(command.summary)))
    return table


def keys_table(bindings: list[tuple[str, str, str]], title: str = "Keys") -> Table:
    """``(keys, description, tooltip)`` rows; keys as Textual spells them, shown in ``key_label``'s notation."""
    table = Table(title=title, title_justify="left", expand=True, show_edge=False)
    table.add_column("key", style="bold yellow", no_wrap=True)
    table.add_column("action", no_wrap=True)
    table.add_column("what it does")
    for key, description, tooltip in bindings:
        table.add_row(plain(key_label(key), single_line=True), plain(description, single_line=True), plain(tooltip))
    return table


def modal_keys() -> list[tuple[str, list[tuple[str, str, str]]]]:
    """The keys of the prompt, the panes and the modals the workbench opens, each section generated
    from the bindings of the widgets it names (a row added by hand only where a key is not a binding:
    an option list's Enter, the ``@`` of a path)."""
    from screens.approval import ApprovalScreen  # with the help, not at start-up (it brings pygments)
    from screens.chunk_viewer import ChunkViewer
    from screens.history_search import HistorySearchScreen
    from screens.main import MainScreen
    from screens.trust import TrustScreen
    from screens.workspace_switcher import WorkspaceSwitcher
    from services.assistant.citations import VERDICT_HELP
    from widgets.prompt.editor import PromptEditor
    from widgets.prompt.input import PromptInput
    from widgets.transcript.citation_marks import SentenceMarkRow
    from widgets.transcript.find import FindInput
    from widgets.transcript.pane import TranscriptPane
    from widgets.transcript.streaming import CitationLink
    from widgets.transcript.tool_call import ToolCallBlock

    def rows(*owners: list[BindingType]) -> list[tuple[str, str, str]]:
        return [(b.key, b.description, b.tooltip) for bindings in owners for b in bindings if isinstance(b, Binding)]

    mention = ("@", "Attach a file", "@path in a message attaches that file; Tab completes the path")
    history_open = ("enter", "Open", "Open the hit's conversation at its turn")
    marks = ("✓ ~ ✗ ? !", "Citation marks", VERDICT_HELP)
    return [
        (
            "Prompt (one line; Ctrl+J: the multi-line editor)",
            [*rows(PromptInput.BINDINGS, PromptEditor.BINDINGS), mention],
        ),
        (
            "Transcript (F2)",
            [
                *rows(TranscriptPane.BINDINGS, CitationLink.BINDINGS, SentenceMarkRow.BINDINGS, ToolCallBlock.BINDINGS),
                marks,
            ],
        ),
        ("Find bar (Ctrl+F)", rows(FindInput.BINDINGS, MainScreen.BINDINGS)),
        ("Approval modal (Enter on a call in the Approvals pane)", rows(ApprovalScreen.BINDINGS)),
        ("Chunk viewer (Enter on a chunk in the Context pane, or /rag show HANDLE)", rows(ChunkViewer.BINDINGS)),
        ("Workspace switcher (Ctrl+O)", rows(WorkspaceSwitcher.BINDINGS)),
        (
            '/history search hits (filters in the query line: role:R tool:T since:DATE, "a phrase")',
            [history_open, *rows(HistorySearchScreen.BINDINGS)],
        ),
        ("Trust review (a workspace's own settings)", rows(TrustScreen.BINDINGS)),
    ]


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "help.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f1", "dismiss", "Close", id="help.close", tooltip="Close the help"),
    ]

    def __init__(self, bindings: list[tuple[str, str, str]], specs: Iterable[CommandSpec] = COMMANDS) -> None:
        super().__init__()
        self.bindings = bindings
        self.specs = list(specs)  # the App's registry: run-time commands are listed with the built-ins

    def compose(self) -> Any:
        with Vertical(id="help"):
            with VerticalScroll(id="help-body"):
                yield Static(commands_table(self.specs), id="help-commands")
                yield Static(keys_table(self.bindings), id="help-keys")
                for number, (title, rows) in enumerate(modal_keys()):
                    yield Static(keys_table(rows, title), id=f"help-modal-keys-{number}")
            yield Static("↑ ↓ PgUp PgDn scroll  ·  Esc closes this help", id="help-footer", markup=False)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
