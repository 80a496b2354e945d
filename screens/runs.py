"""Plan runs of the workspace and the timeline of the one highlighted (read-only)."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from widgets.safe import plain


class RunsScreen(Screen[None]):
    CSS_PATH = "runs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close", id="runs.close", tooltip="Back to the workbench"),
    ]

    def __init__(self, runs: list[dict[str, Any]], timelines: dict[str, list[dict[str, Any]]], workspace: str) -> None:
        super().__init__()
        self.runs = runs
        self.timelines = timelines
        self.workspace = workspace

    def compose(self) -> Any:
        yield Static(plain(f"Plan runs · workspace {self.workspace}", single_line=True), id="runs-title")
        yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="runs-timeline", cursor_type="row")
        keys = "↑ ↓ choose a run (its timeline below) · aries report RUN_ID prints it · Esc closes"
        yield Static(keys, id="runs-keys", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#runs-table", DataTable)
        table.add_columns("run", "started", "mode", "status", "steps", "plan", "replay of")
        for run in self.runs:
            cells = [
                run["run_id"],
                str(run["created_at"])[:19].replace("T", " "),
                run["mode"],
                run["status"],
                str(run["steps"]),
                str(run["plan_source"]),
                str(run.get("replay_of") or ""),
            ]
            table.add_row(*(plain(c, single_line=True) for c in cells), key=run["run_id"])
        timeline = self.query_one("#runs-timeline", DataTable)
        timeline.add_columns("step", "time", "tool", "decision (rule)", "ms", "output sha256", "error")
        if self.runs:
            self._timeline(self.runs[0]["run_id"])
        table.focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "runs-table" and event.row_key.value is not None:
            self._timeline(str(event.row_key.value))

    def _timeline(self, run_id: str) -> None:
        timeline = self.query_one("#runs-timeline", DataTable)
        timeline.clear()
        timeline.border_title = f"timeline of {run_id}"
        for step in self.timelines.get(run_id, []):
            cells = [
                str(step.get("step_index")),
                str(step.get("started_at") or "")[11:23],
                str(step.get("tool_name")),
                f"{step.get('decision')} ({step.get('rule_id')})",
                f"{step.get('duration_ms') or 0:.0f}",
                str(step.get("output_hash") or "-").removeprefix("sha256:")[:12],
                str((step.get("error") or {}).get("message") or "")[:60],
            ]
            timeline.add_row(*(plain(c, single_line=True) for c in cells))

    def action_close(self) -> None:
        self.dismiss(None)
