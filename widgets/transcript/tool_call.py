"""A tool call in the transcript: a one-line header and its result, rendered by kind, expandable.

The header names the tool, its outcome (ok, or the error type), how it was decided (approved by the
operator, a rule or the mode; denied), its key argument and its duration. The body renders what the
tool returned: text as text (file reads, shell output), listings and search results as tables,
patches as a highlighted diff, fetched pages as title + URL + text, errors with type, message and
rule, an undo as the files it put back. Colours that carry meaning (a diff's lines, the outcome) come
from the theme in force (``widgets.toolinfo.meaning_style``), each with a symbol or a word, and follow a
change of theme. A long body is collapsed to its first lines; Enter, space or a click expands it in place
(scrollable) and collapses it again. Every string is neutralised and shown literally.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from services.tools.outputs import (
    FsApplyPatchOutput,
    FsListDirOutput,
    FsReadTextOutput,
    FsRestoreOutput,
    FsSearchTextOutput,
    FsWriteTextOutput,
    ShellPollOutput,
    ShellRunOutput,
    ShellStartOutput,
    WebExtractOutput,
    WebFetchOutput,
    WebSearchOutput,
    output_of,
)
from widgets.safe import clean, clip, plain
from widgets.toolinfo import key_argument_of, meaning_style, short_tool

COLLAPSED_LINES = 8
MAX_EXPANDED_CHARS = 200_000
KEY_ARG_WIDTH = 48


@dataclass(frozen=True)
class Body:
    """A rendered body and how much of it was left out at the given limit."""

    renderable: RenderableType
    total: int  # lines, rows or entries in the whole result
    unit: str = "lines"


Variables = Mapping[str, str] | None
"""The theme's variables (``App.theme_variables``), for the colours that carry meaning; None: fixed ones."""

Renderer = Callable[[Any, Mapping[str, Any], "int | None", Variables], Body]
"""A renderer takes its tool's output model (typed in each renderer), the call's arguments, the most
lines/rows to show (None: all) and the theme's variables."""


# -- helpers -------------------------------------------------------------------------------------
def _output_parts(entry: Mapping[str, Any]) -> tuple[Any, dict[str, Any] | None, dict[str, Any]]:
    """``(data, error, meta)`` of a transcript tool entry (older entries store the data directly)."""
    output = entry.get("output")
    if isinstance(output, Mapping) and "status" in output and ("data" in output or "error" in output):
        error = output.get("error")
        meta = output.get("meta")
        return output.get("data"), dict(error) if isinstance(error, Mapping) else None, dict(meta or {})
    return output, None, {}


def _lines_body(text: str, limit: int | None, style: str = "") -> Body:
    text = text[:MAX_EXPANDED_CHARS]
    lines = text.splitlines() or [""]
    shown = lines if limit is None else lines[:limit]
    return Body(plain("\n".join(shown), style), len(lines))


def _kv_table(rows: list[tuple[str, Any]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for key, value in rows:
        if value in (None, "", [], {}):
            continue
        if isinstance(value, list | dict):
            value = json.dumps(value, ensure_ascii=False, default=str)
        table.add_row(plain(key, single_line=True), plain(value))
    return table


def _size(value: Any) -> str:
    if not isinstance(value, int | float):
        return ""
    size = float(value)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""  # pragma: no cover


def _generic_lines(data: Any, indent: str = "") -> list[str]:
    """A readable, YAML-like listing of any JSON value: multi-line strings stay multi-line."""
    if isinstance(data, Mapping):
        lines: list[str] = []
        for key, value in data.items():
            if isinstance(value, Mapping | list) and value:
                lines.append(f"{indent}{key}:")
                lines.extend(_generic_lines(value, indent + "  "))
            elif isinstance(value, str) and "\n" in value:
                lines.append(f"{indent}{key}: |")
                lines.extend(f"{indent}  {line}" for line in value.splitlines())
            else:
                lines.append(f"{indent}{key}: {_scalar(value)}")
        return lines
    if isinstance(data, list):
        lines = []
        for item in data:
            if isinstance(item, Mapping | list) and item:
                sub = _generic_lines(item, indent + "  ")
                lines.append(f"{indent}- {sub[0].lstrip()}")
                lines.extend(sub[1:])
            else:
                lines.append(f"{indent}- {_scalar(item)}")
        return lines
    if isinstance(data, str):
        return data.splitlines() or [""]
    return [f"{indent}{_scalar(data)}"]


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


# -- renderers by kind ---------------------------------------------------------------------------
def render_generic(data: Any, args: Mapping[str, Any], limit: int | None) -> Body:
    if data is None:
        return Body(plain("(no data)", "dim"), 1)
    return _lines_body("\n".join(_generic_lines(data)), limit)


def render_raw(data: Any, limit: int | None) -> Body:
    """A recorded output that does not fit its tool's model (an older version's, one cut for size):
    its JSON as it is."""
    return _lines_body(json.dumps(data, ensure_ascii=False, indent=2, default=str), limit, "dim")


def render_read(
    data: FsReadTextOutput, args: Mapping[str, Any], limit: int | None, variables: Variables = None
) -> Body:
    return _lines_body(data.text, limit)


def render_listing(
    data: FsListDirOutput, args: Mapping[str, Any], limit: int | None, variables: Variables = None
) -> Body:
    entries = data.entries
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", expand=False)
    table.add_column("type", style="dim", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("path")
    for item in entries if limit is None else entries[:limit]:
        name = item.path or item.name
        is_dir = item.type == "dir"
        path = plain(name + ("/" if is_dir else ""), "bold blue" if is_dir else "", single_line=True)
        table.add_row(plain(item.type, single_line=True), "" if is_dir else _size(item.size), path)
    if data.hidden_by_policy:
        hidden = plain(f"{data.hidden_by_policy} hidden by policy", "dim")
        return Body(Group(table, hidden), len(entries), "entries")
    return Body(table, len(entries), "entries")


def render_search(
    data: FsSearchTextOutput, args: Mapping[str, Any], limit: int | None, variables: Variables = None
) -> Body:
    matches = data.matches
    if not matches:
        return Body(plain("no matches", "dim"), 1)
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("where", no_wrap=True, style="cyan")
    table.add_column("text")
    for match in matches if limit is None else matches[:limit]:
        table.add_row(plain(f"{match.path}:{match.line}", single_line=True), plain(match.text, single_line=True))
    return Body(table, len(matches), "matches")


def render_write(
    data: FsWriteTextOutput, args: Mapping[str, Any], limit: int | None, variables: Variables = None
) -> Body:
    verb = "created" if data.created else "wrote"
    line = plain(f"{verb} {data.path}  ({data.bytes_written} bytes)")
    text = str(args.get("text") or "")
    if not text:
        return Body(line, 1)
    body = _lines_body(text, limit, "dim")
    return Body(Group(line, body.renderable), body.total + 1)


def render_patch(
    data: FsApplyPatchOutput, args: Mapping[str, Any], limit: int | None, variables: Variables = None
) -> Body:
    table = Table.grid(padding=(0, 2))
    for item in data.files:
        table.add_row(
            plain(item.action, single_line=True),
            plain(item.path, single_line=True),
            Text(f"+{item.added}", style=meaning_style("added", variables)),
            Text(f"-{item.removed}", style=meaning_style("removed", variables)),
        )
    parts: list[RenderableType] = [plain("applied" if data.applied else "not applied (dry run)", "bold"), table]
    diff = str(args.get("patch") or args.get("diff") or "")
    lines = diff.splitlines()
    if lines:
        parts.append(diff_text(lines if limit is None else lines[:limit], variables))
    return Body(Group(*parts), len(lines) + len(parts))


def diff_text(lines: list[str], variables: Variables = None) -> Text:
    """Unified-diff lines with +/- and hunk headers coloured in the theme (neutralised, never markup);
    the ``+``/``-``/``@@`` each line starts with says the same without the colour."""
    text = Text()
    for number, line in enumerate(lines):
        style = ""
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = meaning_style("hunk", variables)
        elif line.startswith("+"):
            style = meaning_style("added", variables)
        elif line.startswith("-"):
            style = meaning_style("removed", variables)
        text.append(clean(line, single_line=True), style=style)
        if number < len(lines) - 1:
            text.append("\n")
    return text


ShellOutput = ShellRunOutput | ShellStartOutput | ShellPollOutput


def _shell_facts(data: ShellOutput) -> list[str]:
    facts: list[str] = []
    if isinstance(data, ShellPollOutput) and data.running:
        facts.append("running")
    if not isinstance(data, ShellStartOutput) and data.exit_code is not None:
        facts.append(f"exit {data.exit_code}")
    if data.process_id:
        facts.append(f"process {data.process_id}")
    if isinstance(data, ShellStartOutput) and data.pid:
        facts.append(f"pid {data.pid}")
    if isinstance(data, ShellPollOutput) and data.stalled:
        facts.append("stalled")
    return facts


def render_shell(data: ShellOutput, args: Mapping[str, Any], limit: int | None, variables: Variables = None) -> Body:
    if isinstance(data, ShellRunOutput):
        stdout, stderr = data.stdout, data.stderr
    elif isinstance(data, ShellPollOutput):
        stdout, stderr = data.stdout_tail, data.stderr_tail
    else:
        stdout = stderr = ""
    lines: list[Text] = [plain("  ·  ".join(_shell_facts(data)) or "done", "dim")]
    out_lines = stdout.splitlines()
    err_lines = stderr.splitlines()
    budget = limit
    for label, chunk, style in (("stdout", out_lines, ""), ("stderr", err_lines, meaning_style("stderr", variables))):
        if not chunk:
            continue
        shown = chunk if budget is None else chunk[: max(budget, 0)]
        if budget is not None:
            budget -= len(shown)
        if shown:
            lines.append(plain(f"{label}:", "bold"))
            lines.append(plain("\n".join(shown), style))
    if isinstance(data, ShellStartOutput):
        lines.append(plain(" ".join(data.argv), single_line=True))
    return Body(Group(*lines), len(out_lines) + len(err_lines) + 1)


def render_web_search(
    data: WebSearchOutput, args: Mapping[str, Any], limit: int | None, variables: Variables = None
) -> Body:
    results = data.results
    if not results:
        return Body(plain("no results", "dim"), 1)
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", show_lines=False)
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("result")
    for number, item in enumerate(results if limit is None else results[:limit], start=1):
        cell = Text.assemble(
            plain(item.title, "bold", single_line=True),
            "\n",
            plain(item.url, "cyan", single_line=True),
        )
        if item.snippet:
            cell.append("\n")
            cell.append_text(plain(item.snippet, "dim", single_line=True))
        table.add_row(str(number), cell)
    return Body(table, len(results), "results")


def render_web_page(
    data: WebFetchOutput | WebExtractOutput, args: Mapping[str, Any], limit: int | None, variables: Variables = None
) -> Body:
    url: str | None
    if isinstance(data, WebFetchOutput):
        title, url, text = "", data.final_url, data.preview
        facts = [data.content_type, f"artifact {data.artifact_id}" if data.artifact_id else "", _size(data.bytes)]
    else:
        title, url, text = data.title, data.source_url, data.text
        facts = [f"artifact {data.artifact_id}" if data.artifact_id else ""]
    head: list[RenderableType] = []
    if title:
        head.append(plain(title, "bold", single_line=True))
    head.append(plain(url or args.get("url") or "", "cyan", single_line=True))
    if any(facts):
        head.append(plain("  ·  ".join(f for f in facts if f), "dim", single_line=True))
    body = _lines_body(text, limit)
    return Body(Group(*head, body.renderable), body.total + len(head))


RESTORED = {"restored": "restored", "recreated": "recreated", "removed": "removed (it did not exist before)"}


def render_restore(
    data: FsRestoreOutput, args: Mapping[str, Any], limit: int | None, variables: Variables = None
) -> Body:
    """``/undo``: which call was undone and, one line each, what became of each file."""
    lines = [plain(f"undid call {data.call_id}", "bold", single_line=True)]
    files = data.files if limit is None else data.files[: max(limit - 1, 0)]
    for item in files:
        what = RESTORED.get(item.action, item.action)
        lines.append(Text.assemble(plain(f"  {what}  ", single_line=True), plain(item.path, "bold", single_line=True)))
    if not data.files:
        lines.append(plain("  no file needed restoring", "dim"))
    return Body(Group(*lines), len(data.files) + 1, "files")


RENDERERS: dict[str, Renderer] = {
    "builtin:fs:read_text": render_read,
    "builtin:fs:list_dir": render_listing,
    "builtin:fs:search_text": render_search,
    "builtin:fs:write_text": render_write,
    "builtin:fs:apply_patch": render_patch,
    "builtin:fs:restore": render_restore,
    "builtin:shell:run": render_shell,
    "builtin:shell:start": render_shell,
    "builtin:shell:poll": render_shell,
    "builtin:web:search": render_web_search,
    "builtin:web:fetch": render_web_page,
    "builtin:web:extract": render_web_page,
}
"""How the tools with a renderer of their own show their output: each takes the tool's output model
(:data:`services.tools.outputs.OUTPUT_MODELS`); every other tool's output is shown as a listing."""


def render_error(error: Mapping[str, Any], limit: int | None = None, variables: Variables = None) -> Body:
    details = error.get("details") if isinstance(error.get("details"), Mapping) else {}
    assert isinstance(details, Mapping)
    head = Text.assemble(
        plain(error.get("type", "Error"), meaning_style("failed", variables), single_line=True),
        ": ",
        plain(error.get("message", "")),
    )
    rows: list[tuple[str, Any]] = []
    if details.get("rule"):
        rows.append(("rule", details["rule"]))
    if details.get("policy_rule"):
        rows.append(("policy rule", details["policy_rule"]))
    if details.get("operator_reason"):
        rows.append(("reason", details["operator_reason"]))
    rows += [(key, value) for key, value in details.items() if key not in {"rule", "policy_rule", "operator_reason"}]
    if limit is not None:
        rows = rows[: max(limit - 1, 0)]
    return Body(Group(head, _kv_table(rows)) if rows else head, 1 + len(rows))


def render_body(entry: Mapping[str, Any], limit: int | None, variables: Variables = None) -> Body:
    """The result part of a transcript tool entry, at most ``limit`` lines/rows (None: all)."""
    data, error, _meta = _output_parts(entry)
    if error:
        return render_error(error, limit, variables)
    args = entry.get("input") if isinstance(entry.get("input"), Mapping) else {}
    assert isinstance(args, Mapping)
    tool_id = str(entry.get("tool_name", ""))
    if isinstance(data, Mapping) and set(data) == {"omitted"}:  # the data is not in the entry: say where
        return Body(plain(f"({data['omitted']})", "dim"), 1)
    renderer = RENDERERS.get(tool_id)
    if renderer is None:
        return render_generic(data, args, limit)
    output = output_of(tool_id, data)  # the recorded dict, parsed into the tool's output model once
    if output is None:
        return render_raw(data, limit)
    return renderer(output, args, limit, variables)


# -- the header ----------------------------------------------------------------------------------
def _duration(value: Any) -> str:
    if not isinstance(value, int | float):
        return ""
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.1f} s"


def decision_label(entry: Mapping[str, Any], variables: Variables = None) -> tuple[str, str]:
    """``(text, style)`` of the outcome: ``✓ ok``, ``✗ denied``, or ``✗`` and the error type."""
    ok, failed = meaning_style("ok", variables), meaning_style("failed", variables)
    _data, error, meta = _output_parts(entry)
    decision = meta.get("decision") if isinstance(meta.get("decision"), Mapping) else {}
    assert isinstance(decision, Mapping)
    if error:
        kind = clean(error.get("type", "error"), single_line=True)
        if kind == "PolicyDenied":
            details = error.get("details") or {}
            by = "operator" if "operator" in str(details.get("rule", "")) else "policy"
            if details.get("hook"):  # a before hook (services.tools.hooks)
                by = f"hook {clean(str(details['hook']), single_line=True)}"
            return f"✗ denied by {by}", failed
        return f"✗ {kind}", failed
    status = str(entry.get("status", ""))
    if status and status not in {"success", "ok"}:
        return f"✗ {clean(status, single_line=True)}", failed
    approved = decision.get("approved_by")
    if approved in {"operator_once", "operator_session"}:
        return f"✓ ok · approved {'once' if approved == 'operator_once' else 'for session'}", ok
    return "✓ ok", ok


def header_text(entry: Mapping[str, Any], *, expanded: bool | None, variables: Variables = None) -> Text:
    marker = " " if expanded is None else ("▾" if expanded else "▸")
    label, style = decision_label(entry, variables)
    args = entry.get("input") if entry.get("input") is not None else {}
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{marker} ", style="bold")
    text.append(short_tool(entry.get("tool_name", "?")), style="bold")
    if entry.get("from_text"):  # read from the model's text, not a native tool call
        text.append(" (from text)", style="italic")
    text.append("  ")
    text.append(label, style=style)
    key = key_argument_of(args)
    if key and key not in {"{}", "null"}:
        text.append("  ")
        text.append(clip(key, KEY_ARG_WIDTH), style="italic")
    duration = _duration(entry.get("duration_ms"))
    if duration:
        text.append(f"  {duration}", style="dim")
    stamp = str(entry.get("timestamp", ""))[11:19]
    if stamp:
        text.append(f"  {clean(stamp, single_line=True)}", style="dim")
    return text


ARTIFACT_ROLES = {"snapshot": "before", "after": "after", "diff": "diff", "body": "page", "results": "results"}


def artifacts_text(entry: Mapping[str, Any]) -> Text:
    """What this call kept in the artifact registry (snapshots, diffs, fetched bodies), by role and
    file: ``kept: notes/todo.md before · after · diff  (F5 Artifacts)``. Names come from the
    registry, which keeps identical content once under its first name, so the roles say what is what."""
    links = entry.get("artifacts")
    if not isinstance(links, list):
        return Text()
    groups: dict[str, list[str]] = {}
    for link in links:
        if not isinstance(link, Mapping):
            continue
        role = str(link.get("role", ""))
        label = ARTIFACT_ROLES.get(role, role or "artifact")
        where = link.get("path") or link.get("name") or ""
        groups.setdefault(clean(str(where), single_line=True), []).append(clean(label, single_line=True))
    if not groups:
        return Text()
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("kept: ", style="dim")
    text.append(";  ".join(f"{Path(where).name or where} {' · '.join(roles)}" for where, roles in groups.items()))
    text.append("  (F5 Artifacts)", style="dim")
    return text


def hooks_text(entry: Mapping[str, Any]) -> Text:
    """What the after hooks of this call did (``services.tools.hooks``): ``hooks: git-status gave the
    model 3 lines · lint failed``; empty when none ran (a before hook's denial is the header's)."""
    _data, _error, meta = _output_parts(entry)
    listed = meta.get("hooks")
    runs: list[Any] = listed if isinstance(listed, list) else []
    added = {str(c.get("hook")): c for c in meta.get("hook_context") or [] if isinstance(c, Mapping)}
    parts: list[tuple[str, str]] = []
    for run in runs:
        if not isinstance(run, Mapping) or run.get("when") != "after":
            continue
        name = clean(str(run.get("hook")), single_line=True)
        if run.get("outcome") == "failed":
            parts.append((f"{name} failed", "bold red"))
        elif name in added:
            count = len(str(added[name].get("text") or "").splitlines())
            parts.append((f"{name} gave the model {count} line{'s' if count != 1 else ''}", ""))
        else:
            parts.append((f"{name} ran", ""))
    if not parts:
        return Text()
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("hooks: ", style="dim")
    for index, (part, style) in enumerate(parts):
        text.append(" · " if index else "")
        text.append(part, style=style)
    return text


# -- the widget ----------------------------------------------------------------------------------
class ToolCallBlock(Vertical):
    """One transcript tool entry. ``expanded`` toggles between the first lines and the whole result."""

    can_focus = True
    DEFAULT_CSS = """
    ToolCallBlock { height: auto; margin: 0 0 1 0; padding: 0 1; border-left: wide $warning; }
    ToolCallBlock:focus { background: $boost; border-left: wide $accent; }
    ToolCallBlock > .tool-header { height: 1; }
    ToolCallBlock > .tool-body-scroll { height: auto; max-height: 30; }
    ToolCallBlock.-expanded > .tool-body-scroll { max-height: 70vh; }
    ToolCallBlock .tool-more { color: $text-muted; }
    ToolCallBlock > .tool-artifacts { height: 1; }
    ToolCallBlock > .tool-hooks { height: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter,space",
            "toggle_expanded",
            "Expand",
            show=False,
            id="tool.toggle",
            tooltip="Expand the tool result to its full output, or collapse it again",
        ),
        Binding(
            "a",
            "show_audit",
            "Audit row",
            id="tool.audit",
            tooltip="Open this call's audit row: decision, rule, approver, times, hashes",
        ),
    ]

    @dataclass
    class ShowAudit(Message):
        """The operator asked for the audit row of this call."""

        call_id: str

    expanded: reactive[bool] = reactive(False, init=False)

    def __init__(self, entry: Mapping[str, Any], *, collapsed_lines: int = COLLAPSED_LINES) -> None:
        role_class = "-tool"
        super().__init__(classes=role_class)
        self.entry = dict(entry)
        self.collapsed_lines = collapsed_lines
        self._short = render_body(self.entry, collapsed_lines)
        self.collapsible = self._short.total > collapsed_lines

    @property
    def hidden_count(self) -> int:
        """How many lines/rows the collapsed view leaves out."""
        return max(self._short.total - self.collapsed_lines, 0) if self.collapsible else 0

    def compose(self) -> Any:
        yield Static(self._header(), classes="tool-header")
        scroll = VerticalScroll(Static(self._short.renderable, classes="tool-body"), classes="tool-body-scroll")
        scroll.can_focus = False
        yield scroll
        yield Static(self._more(), classes="tool-more")
        kept = artifacts_text(self.entry)
        if kept.plain:
            yield Static(kept, classes="tool-artifacts")
        hooked = hooks_text(self.entry)
        if hooked.plain:
            yield Static(hooked, classes="tool-hooks")

    def _variables(self) -> Variables:
        return self.app.theme_variables if self.is_attached else None

    def _header(self) -> Text:
        return header_text(
            self.entry, expanded=self.expanded if self.collapsible else None, variables=self._variables()
        )

    def _more(self) -> Text:
        if not self.collapsible:
            return Text()
        if self.expanded:
            return Text("Enter collapses", style="dim")
        return Text(f"… {self.hidden_count} more {self._short.unit}: Enter expands", style="dim")

    def watch_expanded(self, expanded: bool) -> None:
        body = render_body(self.entry, None if expanded else self.collapsed_lines, self._variables())
        self.query_one(".tool-body", Static).update(body.renderable)
        self.query_one(".tool-header", Static).update(self._header())
        self.query_one(".tool-more", Static).update(self._more())
        self.query_one(".tool-more").display = self.collapsible
        self.set_class(expanded, "-expanded")
        scroll = self.query_one(".tool-body-scroll", VerticalScroll)
        scroll.can_focus = expanded
        scroll.scroll_home(animate=False)

    def on_mount(self) -> None:
        self.query_one(".tool-more").display = self.collapsible
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)
        self._theme_changed()

    def _theme_changed(self, _theme: object = None) -> None:
        """The colours that carry meaning, again in the theme now in force."""
        body = render_body(self.entry, None if self.expanded else self.collapsed_lines, self._variables())
        self.query_one(".tool-body", Static).update(body.renderable)
        self.query_one(".tool-header", Static).update(self._header())

    def action_show_audit(self) -> None:
        call_id = self.entry.get("call_id")
        if call_id:
            self.post_message(self.ShowAudit(str(call_id)))

    def action_toggle_expanded(self) -> None:
        if self.collapsible:
            self.expanded = not self.expanded

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.focus()
        self.action_toggle_expanded()


__all__ = ["Body", "ToolCallBlock", "decision_label", "diff_text", "header_text", "render_body"]
