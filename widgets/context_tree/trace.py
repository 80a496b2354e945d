"""``TraceView``: one find/search trace as the operator reads it.

A trace is the dict the retrieval service persists (shape agreed between ctx-search and ctx-tui)::

    {"id", "query",
     "start_points": [{"uri", "score", "level"}],
     "steps": [{"uri", "depth", "score", "kept": [...]}],
     "budget": {"max_ms", "max_nodes", "max_depth", "used_ms", "nodes", "depth"},
     "stop_reason",
     "hits": [{"uri", "score", "level", "snippet"}]}

Missing keys are shown as "–", never an error: the view must open on a partial trace (a search
stopped early). Every value is neutralised; nothing from the trace is read as markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from widgets.safe import clip, plain

DASH = "–"


def _score(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return DASH
    if isinstance(value, int | float):
        return f"{float(value):.3f}"
    return clip(value, 12)


def _value(value: Any) -> str:
    if value is None or value == "":
        return DASH
    return clip(value, 80)


def _rows(trace: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    rows = trace.get(key)
    if not isinstance(rows, Sequence) or isinstance(rows, str):
        return []
    return [row for row in rows if isinstance(row, Mapping)]


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", expand=True, show_edge=False)
    for column in columns:
        table.add_column(column, no_wrap=column != "snippet" and column != "uri")
    return table


def budget_text(budget: Any) -> Text:
    """``12 of 60 ms · 40 of 200 nodes · depth 3 of 4``."""
    if not isinstance(budget, Mapping):
        return plain(f"budget {DASH}", "dim")
    pairs = (("used_ms", "max_ms", "ms"), ("nodes", "max_nodes", "nodes"), ("depth", "max_depth", "depth"))
    parts = []
    for used, limit, unit in pairs:
        used_v, limit_v = budget.get(used), budget.get(limit)
        if unit == "depth":
            parts.append(f"depth {_value(used_v)} of {_value(limit_v)}")
        else:
            parts.append(f"{_value(used_v)} of {_value(limit_v)} {unit}")
    return plain("budget: " + " · ".join(parts), single_line=True)


def render_trace(trace: Mapping[str, Any]) -> Group:
    """The trace as a Rich renderable: header, start points, steps, hits."""
    head = Text.assemble(
        plain("Trace ", "bold"),
        plain(_value(trace.get("id")), "bold", single_line=True),
        "  ",
        plain(f"query: {_value(trace.get('query'))}", single_line=True),
    )
    stop = plain(f"stop reason: {_value(trace.get('stop_reason'))}", "bold yellow", single_line=True)
    starts = _table("Start points", "uri", "level", "score")
    for row in _rows(trace, "start_points"):
        starts.add_row(plain(_value(row.get("uri"))), plain(_value(row.get("level"))), _score(row.get("score")))
    steps = _table("Steps", "#", "uri", "depth", "score", "kept")
    for number, row in enumerate(_rows(trace, "steps"), 1):
        kept = row.get("kept")
        kept_n = str(len(kept)) if isinstance(kept, Sequence) and not isinstance(kept, str) else DASH
        steps.add_row(
            str(number),
            plain(_value(row.get("uri"))),
            plain(_value(row.get("depth"))),
            _score(row.get("score")),
            kept_n,
        )
    hits = _table("Hits", "#", "uri", "level", "score", "snippet")
    for number, row in enumerate(_rows(trace, "hits"), 1):
        hits.add_row(
            str(number),
            plain(_value(row.get("uri"))),
            plain(_value(row.get("level"))),
            _score(row.get("score")),
            plain(clip(row.get("snippet") or "", 120)),
        )
    return Group(head, budget_text(trace.get("budget")), stop, Text(""), starts, Text(""), steps, Text(""), hits)


class TraceView(VerticalScroll):
    """A scrolling view of one trace: ``TraceView(trace)`` or ``.show(trace)`` later."""

    DEFAULT_CSS = """
    TraceView { padding: 0 1; }
    """

    def __init__(self, trace: Mapping[str, Any] | None = None, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._trace = trace

    def compose(self) -> Any:
        yield Static(plain("No trace yet.", "dim"), id="trace-body")

    def on_mount(self) -> None:
        if self._trace is not None:
            self.show(self._trace)

    def show(self, trace: Mapping[str, Any]) -> None:
        self._trace = trace
        self.query_one("#trace-body", Static).update(render_trace(trace))
