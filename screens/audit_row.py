"""One audit row in full: the decision, the rule, who approved, the times and hashes, the arguments
and the result — opened with ``a`` on a tool-call block in the transcript."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from widgets.safe import plain

FIRST = ("call_id", "run_id", "tool_name", "source", "tier", "decision", "rule_id", "approved_by", "status")


def row_text(record: dict[str, Any]) -> Text:
    """The row as ``field  value`` lines, the decision first; JSON values indented."""
    lines = Text()
    for key in [*FIRST, *sorted(k for k in record if k not in FIRST)]:
        value = record.get(key)
        if value is None or value == "":
            continue
        shown = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
        lines.append(f"{key}\n", style="bold")
        lines.append_text(plain(shown))
        lines.append("\n")
    return lines


class AuditRowScreen(ModalScreen[None]):
    CSS_PATH = "chunk_viewer.tcss"  # the same frame as the chunk viewer
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close", id="audit.close", tooltip="Close the audit row"),
    ]

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__()
        self.record = record

    def compose(self) -> Any:
        with Vertical(id="chunk"):
            title = Text.assemble("Audit row ", plain(str(self.record.get("call_id", "")), single_line=True))
            yield Static(title, id="chunk-title")
            with VerticalScroll(id="chunk-body"):
                yield Static(row_text(self.record), id="chunk-text")
            yield Static("↑ ↓ PgUp PgDn scroll  ·  Esc closes", id="chunk-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#chunk-body").focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
