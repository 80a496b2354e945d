"""A modal holding one :class:`widgets.context_tree.trace.TraceView` (``ContextController.show_trace``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from widgets.context_tree.trace import TraceView


class ContextTraceScreen(ModalScreen[None]):
    CSS_PATH = "context_trace.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close", id="context.trace.close", tooltip="Close the trace"),
    ]

    def __init__(self, trace: Mapping[str, Any]) -> None:
        super().__init__()
        self.trace = trace

    def compose(self) -> Any:
        with Vertical(id="context-trace"):
            yield TraceView(self.trace, id="context-trace-view")
            yield Static("↑ ↓ PgUp PgDn scroll  ·  Esc closes", id="context-trace-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one(TraceView).focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
