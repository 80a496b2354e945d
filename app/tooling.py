"""The App's tool wiring: one gateway per workspace, the TUI approver, and the operator commands.

A mixin of ``AriesApp`` so that ``aries_app.py`` stays the App's wiring.  Every tool call — typed
by the operator here, or later asked for by the model — goes through ``ToolGateway.execute``:
schema, policy, approval, dispatch, audit, transcript.  Tools run in an async worker; sync tool
bodies run in threads inside the gateway.  The approver parks the request in the Approvals
pane and waits for the operator's decision in the modal.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from textual import work

from app.commands import CommandError
from app.tool_commands import fs_call, generic_call, shell_call, web_call
from widgets.approvals.pane import ApprovalsPane

if TYPE_CHECKING:
    from services.tools.gateway import ApprovalDecision, ApprovalRequest, ToolGateway
    from services.tools.results import ToolResult
    from services.workspaces import Workspace

APPROVAL_MODES = ("guide", "commander", "strict")
WORKSPACE_POLICY = "policy.yaml"  # a workspace's own tool policy; the shipped safe default otherwise


def explain_decision(record: dict[str, Any]) -> str:
    """A short account of one audited decision: what was asked, what was decided, by which rule."""
    policy = record.get("policy_decision") or {}
    args = json.dumps(record.get("args"), ensure_ascii=False, default=str)
    if len(args) > 200:
        args = args[:200] + "…"
    lines = [
        f"Last policy decision: {record.get('decision', policy.get('action', '?'))}"
        f"  (rule {record.get('rule_id') or policy.get('rule', '?')}, mode {policy.get('mode', '?')})",
        f"tool: {policy.get('tool_id', record.get('tool_id', '?'))}  tier {policy.get('tier', '?')}",
        f"arguments: {args}",
        f"reason: {policy.get('reason') or record.get('reason', '')}",
        f"approved by: {record.get('approved_by') or policy.get('approved_by') or '-'}",
        f"when: {record.get('ended_at') or record.get('started_at', '?')}",
    ]
    error = record.get("error")
    if isinstance(error, dict) and error.get("type"):
        lines.append(f"result: {error['type']}: {error.get('message', '')}")
    elif record.get("output") is not None:
        lines.append("result: ok")
    return "\n".join(lines)


class ToolingMixin:
    """State: the gateway of the active workspace and the calls waiting for approval."""

    _gateway: ToolGateway | None = None
    _pending: dict[str, tuple[ApprovalRequest, asyncio.Future[ApprovalDecision]]]

    # provided by the App
    workspace: Workspace | None

    def _init_tooling(self) -> None:
        self._gateway = None
        self._pending = {}

    def gateway(self) -> ToolGateway:
        """The active workspace's gateway, created on first use (keeps tools out of start-up)."""
        workspace = self.workspace
        assert workspace is not None
        if self._gateway is None or self._gateway.workspace is not workspace:
            self.close_gateway()
            from services.policy import load_policy
            from services.tools.gateway import ToolGateway

            mode = str(workspace.setting("approval_mode") or "guide")
            custom = workspace.root / WORKSPACE_POLICY
            policy = load_policy(custom if custom.is_file() else None)
            self._gateway = ToolGateway(workspace, policy=policy, mode=mode, source="operator")
        return self._gateway

    def close_gateway(self) -> None:
        """Deny whatever still waits, stop the workspace's processes, close the audit run."""
        if self._pending:  # only then is the gateway module loaded at all
            from services.tools.gateway import ApprovalDecision

            for _request, future in list(self._pending.values()):
                if not future.done():
                    future.set_result(ApprovalDecision.deny("the workspace was closed before a decision"))
            self._pending.clear()
        if self._gateway is not None:
            gateway, self._gateway = self._gateway, None
            gateway.close()

    # -- approvals -----------------------------------------------------------------------
    async def approve_in_tui(self, request: ApprovalRequest) -> ApprovalDecision:
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self._pending[request.call_id] = (request, future)
        self._show_pending()
        self.notify(  # type: ignore[attr-defined]
            f"{request.tool_id} waits for your approval: F4, then Enter opens it.", title="Approval needed", timeout=6
        )
        try:
            return await future
        finally:
            self._pending.pop(request.call_id, None)
            self._show_pending()

    def pending_requests(self) -> list[ApprovalRequest]:
        return [request for request, _ in self._pending.values()]

    def _approvals_pane(self) -> ApprovalsPane | None:
        # the main screen's pane even while a modal is on top (a call can end while the modal is open)
        screens = self.screen_stack[:1]  # type: ignore[attr-defined]
        panes = screens[0].query(ApprovalsPane) if screens else None
        return panes.first() if panes else None

    def _show_pending(self) -> None:
        pane = self._approvals_pane()
        if pane is None:
            return
        requests = self.pending_requests()
        pane.show(requests)
        focused = self.focused  # type: ignore[attr-defined]
        if not requests and (focused is None or pane in focused.ancestors_with_self):
            self.action_focus_prompt()  # type: ignore[attr-defined]  # the queue is done: back to typing

    def on_approvals_pane_open(self, message: ApprovalsPane.Open) -> None:
        """Enter on a pending call (a naming-convention handler: ``@on`` is not collected from mixins)."""
        entry = self._pending.get(message.call_id)
        if entry is None:
            return
        request, future = entry

        def decided(decision: ApprovalDecision | None) -> None:
            if decision is not None and not future.done():
                future.set_result(decision)

        from screens.approval import ApprovalScreen  # on first use: it brings rich.syntax and pygments

        root = self.workspace.root if self.workspace is not None else None
        self.push_screen(ApprovalScreen(request, root=root), decided)  # type: ignore[attr-defined]

    # -- running tools ---------------------------------------------------------------------
    def call_tool(self, tool_id: str, args: dict[str, Any]) -> None:
        self._run_tool(tool_id, args)

    @work(group="tools", exit_on_error=False)
    async def _run_tool(self, tool_id: str, args: dict[str, Any]) -> ToolResult:
        gateway = self.gateway()
        transcript = self.transcript  # type: ignore[attr-defined]
        result = await gateway.execute(tool_id, args, approver=self.approve_in_tui, transcript=transcript)
        self.sync_transcript()  # type: ignore[attr-defined]
        if result.ok:
            if tool_id in {"builtin:web:fetch"}:
                self.reload_artifacts()  # type: ignore[attr-defined]
        elif result.error is not None:
            severity = "warning" if result.denied else "error"
            self.notify(  # type: ignore[attr-defined]
                result.error.message, title=f"{tool_id}: {result.error.type}", severity=severity, timeout=8
            )
        return result

    # -- slash commands ----------------------------------------------------------------------
    def command_fs(self, args: list[str], line: str) -> None:
        self.call_tool(*fs_call(args))

    def command_shell(self, args: list[str], line: str) -> None:
        self.call_tool(*shell_call(args))

    def command_web(self, args: list[str], line: str) -> None:
        self.call_tool(*web_call(args))

    def command_tool(self, args: list[str], line: str) -> None:
        self.call_tool(*generic_call(args, line))

    def command_policy(self, args: list[str], line: str) -> None:
        if args[:1] == ["explain-last"]:
            decision = self.gateway().last_decision()
            if decision is None:
                self.append_entry("system", "No tool call has been decided in this workspace yet.")  # type: ignore[attr-defined]
                return
            self.append_entry("system", explain_decision(decision))  # type: ignore[attr-defined]
            return
        if args[:1] == ["mode"]:
            workspace = self.workspace
            assert workspace is not None
            if len(args) == 1:
                self.append_entry("system", f"Approval mode: {workspace.setting('approval_mode')}")  # type: ignore[attr-defined]
                return
            mode = args[1]
            if mode not in APPROVAL_MODES:
                raise CommandError(f"the approval mode is one of {', '.join(APPROVAL_MODES)}.")
            workspace.update(approval_mode=mode)
            self.close_gateway()  # the next call binds the policy with the new mode
            self.reload_panes()  # type: ignore[attr-defined]
            self.append_entry("system", f"Approval mode is now {mode}.")  # type: ignore[attr-defined]
            return
        raise CommandError("cannot read the policy command.")

    def command_doctor(self, args: list[str], line: str) -> None:
        self._run_doctor()

    @work(group="doctor", thread=True, exit_on_error=False)
    def _run_doctor(self) -> None:
        from services.tools.doctor import doctor

        report = doctor()
        lines = [f"{'ok  ' if check.ok else 'FAIL'}  {check.name}: {check.detail}" for check in report.checks]
        verdict = "All checks passed." if report.ok else "Some checks FAILED."
        self.call_from_thread(self.append_entry, "system", "\n".join(["Doctor:", *lines, verdict]))  # type: ignore[attr-defined]
