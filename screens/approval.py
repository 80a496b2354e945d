"""The approval modal: one pending tool call, shown in full, with the operator's choices.

Dismisses with an ``ApprovalDecision`` (approve once, approve for this session, approve always in
this workspace — a lasting grant whose rule is shown before the key is pressed, widened with ``*`` —
deny with an optional reason) or ``None`` when closed without deciding: the call then stays in the
queue.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Group
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from widgets.safe import clean, plain
from widgets.toolinfo import TIER_STYLES, key_argument, tier_style  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from services.tools.calls import ApprovalDecision, ApprovalRequest  # noqa: F401 - string annotation


def shorten_paths(request: ApprovalRequest, root: Path) -> ApprovalRequest:
    """The same request with the workspace root written as ``${workspace}`` (as in policy files)."""
    prefix = str(root)

    def short(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(prefix, "${workspace}")
        if isinstance(value, list):
            return [short(item) for item in value]
        if isinstance(value, dict):
            return {key: short(item) for key, item in value.items()}
        return value

    return replace(
        request,
        args=short(request.args),
        preview=short(request.preview),
        session_pattern=short(request.session_pattern),
    )


def summary_table(request: ApprovalRequest, variables: Mapping[str, str] | None = None) -> Table:
    tier = str(request.tier)
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    table.add_row("tool", plain(request.tool_id, "bold", single_line=True))
    table.add_row("risk", plain(tier, tier_style(tier, variables), single_line=True))
    origin = getattr(request, "origin", None) or {}
    asked = request.source
    if origin.get("model"):
        asked = f"{asked}: {origin['model']}, turn {origin.get('turn_id', '?')} step {origin.get('step', '?')}"
    if origin.get("from_text"):
        asked = f"{asked} · read from the model's text, not a native tool call"
    table.add_row("asked by", plain(asked, single_line=True))
    table.add_row("why", plain(f"{request.decision.reason}  (rule {request.decision.rule})"))
    if request.description:
        table.add_row("does", plain(request.description))
    return table


def preview_renderable(request: ApprovalRequest, variables: Mapping[str, str] | None = None) -> Any:
    """What the call will do: the diff of a write or patch (its colours from the theme in force,
    ``variables``; each line keeps its ``+``/``-``/``@@``), the command line and cwd, the URL."""
    preview = request.preview or {}
    kind = preview.get("kind")
    if kind == "diff" and preview.get("diff") is not None:
        from widgets.transcript.tool_call import diff_text

        diff = str(preview["diff"])
        return diff_text(diff.splitlines(), variables) if diff.strip() else Text("(no change)", style="dim")
    if kind == "command":
        argv = preview.get("argv") or preview.get("command") or request.args.get("command")
        line = " ".join(map(str, argv)) if isinstance(argv, list) else str(argv)
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        table.add_row("command", plain(line, "bold yellow"))
        table.add_row("cwd", plain(preview.get("cwd", ""), single_line=True))
        for key in ("timeout_s", "env"):
            if preview.get(key) not in (None, [], {}, ""):
                table.add_row(key, plain(preview[key]))
        return table
    if kind == "url" or "url" in preview:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        table.add_row("url", plain(preview.get("url", request.args.get("url", "")), "bold magenta", single_line=True))
        for key in ("host", "method", "max_bytes"):
            if key in preview:
                table.add_row(key, plain(preview[key], single_line=True))
        return table
    if kind == "error":
        return plain(f"preview unavailable: {preview.get('note', '')}", "red")
    if preview:
        shown = clean(json.dumps(preview, indent=2, ensure_ascii=False, default=str))
        return Syntax(shown, "json", theme="ansi_dark", word_wrap=True)
    return Text("(no preview for this tool)", style="dim")


KEYS = "a once · s session · w always here · * widen · d deny · Esc later"
REASON_KEYS = "type the reason (optional)  ·  Enter denies  ·  Esc back to the keys"


class ApprovalScreen(ModalScreen["ApprovalDecision | None"]):
    CSS_PATH = "approval.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "a", "approve_once", "Approve once", id="approval.once", tooltip="Run this call once; ask again next time"
        ),
        Binding(
            "s",
            "approve_session",
            "Approve for session",
            id="approval.session",
            tooltip="Run it, and run calls of the same tool and argument pattern without asking until exit",
        ),
        Binding(
            "w",
            "approve_always",
            "Always here",
            id="approval.always",
            tooltip="Run it, and store the lasting grant shown (this workspace only, until revoked with /grants)",
        ),
        Binding(
            "asterisk",
            "widen",
            "Widen",
            id="approval.widen",
            tooltip="Widen the lasting grant: '*' over more trailing plain arguments, or the folder above; "
            "press again to go on, back to the narrowest after the widest",
        ),
        Binding(
            "d",
            "deny",
            "Deny",
            id="approval.deny",
            tooltip="Refuse the call; you may type a reason, which the caller receives",
        ),
        Binding(
            "escape",
            "close",
            "Later",
            id="approval.later",
            tooltip="Close; the call stays waiting in the Approvals pane",
        ),
    ]

    def __init__(self, request: ApprovalRequest, *, root: Path | None = None) -> None:
        super().__init__()
        self.request = shorten_paths(request, root) if root is not None else request
        self._root = root
        self._denying = False
        self._level = 0  # which of the proposal's choices "always" stores (0: the narrowest)

    def compose(self) -> Any:
        with Vertical(id="approval"):
            yield Static(
                Text.assemble("Approve ", plain(self.request.tool_id, single_line=True), "?"), id="approval-title"
            )
            with VerticalScroll(id="approval-body"):
                yield Static(summary_table(self.request, self.app.theme_variables), id="approval-summary")
                yield Static(preview_renderable(self.request, self.app.theme_variables), id="approval-preview")
                args = clean(json.dumps(self.request.args, indent=2, ensure_ascii=False, default=str))
                yield Static(
                    Group(Text("arguments", style="bold"), Syntax(args, "json", theme="ansi_dark", word_wrap=True)),
                    id="approval-args",
                )
            with Vertical(id="approval-footer"):
                yield Static(self._session_note(), id="approval-session")
                yield Static(self._always_note(), id="approval-always")
                yield Input(placeholder="Reason for denying (optional), then Enter", id="approval-reason")
                yield Static(KEYS, id="approval-keys", markup=False)

    def _session_note(self) -> Text:
        if (getattr(self.request, "origin", None) or {}).get("from_text"):
            return Text("a call read from the model's text is approved once only", style="dim")
        pattern = json.dumps(self.request.session_pattern, ensure_ascii=False, default=str)
        return Text.assemble(
            ("approve for session covers: ", "dim"), plain(f"{self.request.tool_id} {pattern}", single_line=True)
        )

    def _always_note(self) -> Text:
        proposal = self.request.proposal
        if proposal is None:
            return Text("always in this workspace: not offered for this call", style="dim")
        short = str(self._root) if self._root is not None else None

        def shown(text: str) -> str:
            return text.replace(short, "${workspace}") if short else text

        level = self._level
        rule = shown(proposal.words(level))
        widen = f"  (* widen: {level + 1}/{len(proposal.choices)})" if len(proposal.choices) > 1 else ""
        note = Text.assemble(
            ("always in this workspace stores: ", "dim"),
            plain(f"{self.request.tool_id}  {rule}", "bold", single_line=True),
            (widen, "dim"),
            "\n",
            plain(shown(proposal.sentence(level)), "dim"),
        )
        warning = proposal.warning(level)
        if warning:
            note.append("\n")
            note.append_text(plain(f"⚠ runs code unasked: {shown(warning)}", "bold red"))
        return note

    def on_mount(self) -> None:
        self.query_one("#approval-reason").display = False
        self.query_one("#approval-body").focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self._denying and action in {"approve_once", "approve_session", "approve_always", "widen", "deny"}:
            return False  # typing a reason: letters are text, not keys
        if action in {"approve_always", "widen"} and self.request.proposal is None:
            return None  # shown disabled: no lasting grant can cover this call
        if action == "widen" and len(self.request.proposal.choices) < 2:
            return None
        if action == "approve_session" and not self.request.session_pattern:
            return None  # shown disabled: nothing to generalise
        if action == "approve_session" and (getattr(self.request, "origin", None) or {}).get("from_text"):
            return None  # a call read from text leaves no lasting grant
        return True

    def action_approve_once(self) -> None:
        from services.tools.calls import ApprovalDecision

        self.dismiss(ApprovalDecision.once())

    def action_approve_session(self) -> None:
        from services.tools.calls import ApprovalDecision

        self.dismiss(ApprovalDecision.session())

    def action_approve_always(self) -> None:
        from services.tools.calls import ApprovalDecision

        self.dismiss(ApprovalDecision.always(self.request.proposal.choices[self._level]))

    def action_widen(self) -> None:
        self._level = (self._level + 1) % len(self.request.proposal.choices)
        self.query_one("#approval-always", Static).update(self._always_note())

    def action_deny(self) -> None:
        self._denying = True
        reason = self.query_one("#approval-reason", Input)
        reason.display = True
        reason.focus()
        self.query_one("#approval-keys", Static).update(REASON_KEYS)  # letters are the reason's now
        self.refresh_bindings()

    @on(Input.Submitted, "#approval-reason")
    def _deny_with_reason(self, event: Input.Submitted) -> None:
        from services.tools.calls import ApprovalDecision

        self.dismiss(ApprovalDecision.deny(event.value.strip() or None))

    def action_close(self) -> None:
        if self._denying:
            self._denying = False
            self.query_one("#approval-reason").display = False
            self.query_one("#approval-body").focus()
            self.query_one("#approval-keys", Static).update(KEYS)
            self.refresh_bindings()
            return
        self.dismiss(None)
