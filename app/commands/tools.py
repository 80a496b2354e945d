"""Operator tool commands: ``/fs /shell /web /tool /undo /artifact /policy /grants /doctor``.

Every call goes through the session (``Session.call_tool``: the one gateway, the approval queue, the
audit store, the conversation). Calls run in async workers; the result reaches the transcript as the
conversation's own event, so the controller only reports failures, keeps the status line and tells
the Artifacts pane what a call kept. ``a`` on a tool-call block opens its audit row.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from app.host import run_task
from services.errors import AriesError
from widgets.commands import Action, CommandError, GrantsRevoke, PolicyMode, ToolCall
from widgets.messages import ArtifactsChanged, SessionChanged, call_status_key

if TYPE_CHECKING:
    from textual.worker import Worker

    from app.host import Host
    from services.session.session import Session
    from services.tools.results import ToolResult


_ASKED = {
    "operator_once": "you allowed it once",
    "operator_session": "you allowed it for this session",
    "operator_always": "you allowed it always in this workspace",
    "operator_grant": "a lasting grant of this workspace allowed it",
}


def grant_in_words(record: dict[str, Any]) -> str | None:
    """The grant that decided an audited call (``grant g1a2b3c (workspace): ls *``), or None."""
    policy = record.get("policy_decision") or {}
    grant = (policy.get("facts") or {}).get("grant")
    if not isinstance(grant, dict) or not grant.get("id"):
        return None
    text = f"grant {grant['id']} ({grant.get('scope', '?')})"
    return f"{text}: {grant['pattern']}" if grant.get("pattern") else text


def grants_in_lines(grants: list[dict[str, Any]]) -> list[str]:
    """``/grants``: one line per grant (id, scope, tool, pattern; a lasting one's uses, origin and
    expiry), and what combines into running code unasked."""
    lines = []
    for n, g in enumerate(grants, 1):
        pattern = g["pattern"] if isinstance(g["pattern"], str) else json.dumps(g["pattern"], ensure_ascii=False)
        line = f"{n}. {g['id']}  {g['scope']}  {g['tool_id']}  {pattern}"
        if g["scope"] == "workspace":
            origin = g.get("origin") or {}
            expiry = ("expired " if g.get("expired") else "expires ") + g["expires_at"] if g.get("expires_at") else ""
            line += f"  · used {g.get('uses', 0)}x · by {origin.get('by')} {origin.get('at')} {expiry}".rstrip()
        lines.append(line)
        if g.get("runs_code_unasked"):
            lines.append(f"   ⚠ runs code unasked: {g['runs_code_unasked']}")
    return lines


def decision_in_words(record: dict[str, Any]) -> str:
    """What an audited decision meant, in words, with the action and the rule that decided it:
    ``needed your approval (confirm): rule mode.guide.requires_approval — you allowed it once``."""
    policy = record.get("policy_decision") or {}
    action = str(record.get("decision") or policy.get("action") or "?")
    rule = str(record.get("rule_id") or policy.get("rule") or "?")
    asked_rule = str((policy.get("facts") or {}).get("policy_rule") or "?")
    approved_by = record.get("approved_by") or policy.get("approved_by")
    if action == "allow":
        return f"ran without asking (allow): rule {rule}"
    if action == "confirm" and approved_by in _ASKED:
        return f"needed your approval (confirm): rule {rule} — {_ASKED[str(approved_by)]}"
    if action == "confirm":
        return f"needs your approval (confirm): rule {rule}"
    if action == "deny" and rule == "approval.operator_denied":
        return f"needed your approval (confirm): rule {asked_rule} — you denied it"
    if action == "deny" and rule == "approval.no_approver":
        return f"needed approval (confirm): rule {asked_rule} — nobody could approve it, so it was refused"
    if action == "deny":
        return f"refused by the policy (deny): rule {rule}"
    return f"{action}: rule {rule}"


def explain_decision(record: dict[str, Any]) -> str:
    """A short account of one audited decision: what was asked, what was decided, by which rule."""
    policy = record.get("policy_decision") or {}
    args = json.dumps(record.get("args"), ensure_ascii=False, default=str)
    if len(args) > 200:
        args = args[:200] + "…"
    lines = [
        f"Last policy decision: {decision_in_words(record)} (mode {policy.get('mode', '?')})",
        f"tool: {policy.get('tool_id', record.get('tool_id', '?'))}  tier {policy.get('tier', '?')}",
        f"arguments: {args}",
        f"reason: {policy.get('reason') or record.get('reason', '')}",
        f"approved by: {record.get('approved_by') or policy.get('approved_by') or '-'}",
        f"when: {record.get('ended_at') or record.get('started_at', '?')}",
    ]
    grant = grant_in_words(record)
    if grant is not None:
        lines.insert(5, f"decided by: {grant}")
    error = record.get("error")
    if isinstance(error, dict) and error.get("type"):
        lines.append(f"result: {error['type']}: {error.get('message', '')}")
    elif record.get("output") is not None:
        lines.append("result: ok")
    return "\n".join(lines)


class ToolController:
    def __init__(self, host: Host) -> None:
        self.host = host
        self._running: list[Worker[Any]] = []

    @property
    def session(self) -> Session:
        return self.host.require_session()

    # -- running calls --------------------------------------------------------------------
    def call(self, tool_id: str, args: dict[str, Any]) -> None:
        self._running.append(self.host.run_worker(self._run(tool_id, args), group="tools", exit_on_error=False))

    @property
    def running(self) -> bool:
        """Whether an operator's call runs or waits for approval (Ctrl+X has something to cancel)."""
        self._running = [worker for worker in self._running if worker.is_running]
        return bool(self._running)

    def cancel(self) -> int:
        """Ctrl+X: cancel the operator's calls that run or wait (each recorded as cancelled); how many."""
        running = [worker for worker in self._running if worker.is_running]
        for worker in running:
            worker.cancel()
        self._running = []
        return len(running)

    async def _run(self, tool_id: str, args: dict[str, Any]) -> ToolResult | None:
        from services.tools.calls import new_id

        session = self.session
        call_id = new_id("call")  # named before it runs: the approval queue's waiting row is this row
        key = call_status_key(call_id)
        self.host.status_start(key, f"{tool_id}  {_key_argument(args)}", cancellable=True)
        try:
            result = await session.call_tool(tool_id, args, call_id=call_id)
        except AriesError as exc:
            self.host.report_error(exc.message, tool_id)
            return None
        finally:
            self.host.status_stop(key)
        if result.ok:
            links = [a for a in result.meta.get("artifacts") or [] if isinstance(a, dict)]
            if links or tool_id in {"builtin:web:fetch", "builtin:fs:add_artifact"}:
                # The pane shows what the call kept; for a write, patch or undo: its diff.
                diffs = [str(a["id"]) for a in links if a.get("role") == "diff"]
                self.host.publish(ArtifactsChanged(session, select=diffs[-1] if diffs else None))
        elif result.error is not None:
            self.host.notify(
                result.error.message,
                title=f"{tool_id}: {result.error.type}",
                severity="warning" if result.denied else "error",
                timeout=8,
                markup=False,
            )
        return result

    async def _restore(self, restore_args: dict[str, Any]) -> ToolResult | None:
        from services.text.textsafe import neutralize
        from services.tools.undo import RESTORE_ID

        result = await self._run(RESTORE_ID, restore_args)
        if result is not None and result.error is not None:
            diff = result.error.details.get("diff")
            if isinstance(diff, str) and diff:
                self.host.say(f"Not undone: {neutralize(result.error.message)}\n{neutralize(diff)}", "undo")
        return result

    # -- slash commands ---------------------------------------------------------------------
    def undo(self, call_id: str | None) -> None:
        """``/undo [CALL_ID]``: the restore's arguments read from the audit log (a thread), then the
        restore itself, a call through the gateway like any other."""
        from services.tools.undo import undo_arguments

        audit = self.session.gateway().audit

        def restore(restore_args: dict[str, Any]) -> None:
            self.host.run_worker(self._restore(restore_args), group="tools", exit_on_error=False)

        run_task(self.host, "undo", lambda: undo_arguments(audit, call_id), restore, group="tools")

    def call_parsed(self, parsed: ToolCall) -> None:
        """``/fs``, ``/shell``, ``/web``, ``/tool``: the parsed call, through the gateway."""
        self.call(parsed.tool_id, parsed.args)

    def artifact(self, parsed: Action | ToolCall) -> None:
        if isinstance(parsed, ToolCall):
            self.call(parsed.tool_id, parsed.args)
            return
        artifacts = self.session.workspace.artifacts.list()
        lines = [f"{a.id}  {a.name}  {a.size_bytes} bytes  {a.mime_type}" for a in artifacts]
        self.host.say("Artifacts:\n" + "\n".join(lines) if lines else "No artifacts yet.", "artifact")

    def policy(self, parsed: Action | PolicyMode) -> None:
        session = self.session
        if isinstance(parsed, PolicyMode):
            self._mode(session, parsed.mode)
        elif parsed.action == "explain-last":
            decision = session.gateway().last_decision()
            if decision is None:
                self.host.say("No tool call has been decided in this workspace yet.", "policy")
                return
            self.host.say(explain_decision(decision), "policy")
        elif parsed.action == "show":
            policy = session.policy()
            profile = session.profile()
            tools = "the tools the policy enables"
            if profile is not None and profile.tools is not None:
                tools = "only " + (", ".join(sorted(profile.tools)) or "no tools")
            self.host.say(
                f"Policy in force: {session.policy_source}\nhash {policy.hash}\napproval mode {session.mode}\n"
                f"profile {session.profile_name}: {tools}\n"
                f"Edit {session.workspace.paths.policy} and run /policy reload to change it.",
                "policy",
            )
        else:  # reload
            denied = session.reload_policy()
            if denied:
                self.host.notify(f"{denied} waiting call(s) were denied: ask again under the new policy.")
            self.host.publish(SessionChanged(session))

    def _mode(self, session: Session, mode: str | None) -> None:
        if mode is None:
            self.host.say(f"Approval mode: {session.mode}", "policy")
            return
        try:
            denied = session.set_mode(mode)
        except AriesError as exc:
            raise CommandError(exc.message) from exc
        if denied:
            self.host.notify(f"{denied} waiting call(s) were denied: ask again under the new mode.")
        self.host.publish(SessionChanged(session))

    def grants(self, parsed: Action | GrantsRevoke) -> None:
        session = self.session
        grants = session.grants() if isinstance(parsed, Action) or isinstance(parsed.target, int) else []
        if isinstance(parsed, Action):  # list
            if not grants:
                self.host.say("No grants. Approve a call with 's' (this session) or 'w' (always here).", "grants")
                return
            lines = grants_in_lines(grants)
            self.host.say("Grants (/grants revoke ID | all):\n" + "\n".join(lines), "grants")
            return
        if parsed.target is None:  # revoke all: the session's
            if not session.revoke_grants():
                self.host.say("There were no session grants (lasting ones are revoked by id).", "grants")
            return
        target = parsed.target
        if isinstance(target, int):
            if not 0 < target <= len(grants):
                raise CommandError(f"no grant number {target}; /grants lists them.")
            target = str(grants[target - 1]["id"])
        revoked = session.gateway().revoke_grant(target)
        if revoked is None:
            raise CommandError(f"no grant {target}; /grants lists them.")
        session.conversation.notice(
            f"Grant {target} ({revoked['scope']}) revoked: {revoked['tool_id']} {revoked['pattern']}.", title="grants"
        )

    def doctor(self) -> None:
        self.host.run_worker(self._doctor(self.session), group="doctor", exit_on_error=False)

    async def _doctor(self, session: Session) -> None:
        from services.tools.session_doctor import session_doctor

        report = await asyncio.to_thread(session_doctor, session)
        lines = [f"{'ok  ' if check.ok else 'FAIL'}  {check.name}: {check.detail}" for check in report.checks]
        verdict = "All checks passed." if report.ok else "Some checks FAILED."
        self.host.say("\n".join(["Doctor:", *lines, verdict]), "doctor")

    def show_audit(self, call_id: str) -> None:
        """A tool call's audit row in full."""
        session = self.host.session
        if session is None:
            return
        record = session.gateway().audit.get_call(call_id)
        if record is None:
            self.host.report_error(f"no audit row {call_id} in this workspace", "audit")
            return
        from screens.audit_row import AuditRowScreen

        self.host.push_screen(AuditRowScreen(record))


def _key_argument(args: dict[str, Any]) -> str:
    for key in ("argv", "path", "paths", "url", "query", "process_id", "artifact_id"):
        if key in args:
            value = args[key]
            text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
            return text[:60]
    return ""
