"""Operator tool commands for the App: ``/fs /shell /web /tool /undo /artifact /policy /grants /doctor``.

A small controller instead of a mixin. Every call goes through the session (``Session.call_tool``:
the one gateway, the approval queue, the audit store, the conversation). Calls run in async
workers; the result reaches the transcript as the conversation's own event, so the controller
only reports failures and keeps the status line.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from app.commands import CommandError
from app.tool_commands import fs_call, generic_call, shell_call, web_call
from services.errors import AriesError

if TYPE_CHECKING:
    from app.aries_app import AriesApp
    from services.session import Session
    from services.tools.results import ToolResult


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


class ToolController:
    def __init__(self, app: AriesApp) -> None:
        self.app = app

    @property
    def session(self) -> Session:
        return self.app.require_session()

    # -- running calls --------------------------------------------------------------------
    def call(self, tool_id: str, args: dict[str, Any]) -> None:
        self.app.run_worker(self._run(tool_id, args), group="tools", exit_on_error=False)

    async def _run(self, tool_id: str, args: dict[str, Any]) -> ToolResult | None:
        session = self.session
        key = f"tool-{id(args)}"
        self.app.status_start(key, f"{tool_id}  {_key_argument(args)}")
        try:
            result = await session.call_tool(tool_id, args)
        except AriesError as exc:
            self.app.report_error(exc.message, tool_id)
            return None
        finally:
            self.app.status_stop(key)
        if result.ok:
            links = [a for a in result.meta.get("artifacts") or [] if isinstance(a, dict)]
            if links or tool_id in {"builtin:web:fetch", "builtin:fs:add_artifact"}:
                # The pane shows what the call kept; for a write, patch or undo: its diff.
                diffs = [str(a["id"]) for a in links if a.get("role") == "diff"]
                self.app.reload_artifacts(select=diffs[-1] if diffs else None)
        elif result.error is not None:
            self.app.notify(
                result.error.message,
                title=f"{tool_id}: {result.error.type}",
                severity="warning" if result.denied else "error",
                timeout=8,
                markup=False,
            )
        return result

    async def _undo(self, call_id: str | None) -> ToolResult | None:
        from services.textsafe import neutralize
        from services.tools.undo import RESTORE_ID, undo_arguments

        try:
            restore_args = await asyncio.to_thread(undo_arguments, self.session.gateway().audit, call_id)
        except AriesError as exc:
            self.app.report_error(exc.message, "undo")
            return None
        result = await self._run(RESTORE_ID, restore_args)
        if result is not None and result.error is not None:
            diff = result.error.details.get("diff")
            if isinstance(diff, str) and diff:
                self.app.say(f"Not undone: {neutralize(result.error.message)}\n{neutralize(diff)}", "undo")
        return result

    # -- slash commands ---------------------------------------------------------------------
    def undo(self, args: list[str]) -> None:
        if len(args) > 1:
            raise CommandError("/undo takes at most one call id.")
        self.app.run_worker(self._undo(args[0] if args else None), group="tools", exit_on_error=False)

    def fs(self, args: list[str]) -> None:
        self.call(*fs_call(args))

    def shell(self, args: list[str]) -> None:
        self.call(*shell_call(args))

    def web(self, args: list[str]) -> None:
        self.call(*web_call(args))

    def tool(self, args: list[str], line: str) -> None:
        self.call(*generic_call(args, line))

    def artifact(self, args: list[str]) -> None:
        if args[:1] == ["list"] or not args:
            artifacts = self.session.workspace.artifacts.list()
            lines = [f"{a.id}  {a.name}  {a.size_bytes} bytes  {a.mime_type}" for a in artifacts]
            self.app.say("Artifacts:\n" + "\n".join(lines) if lines else "No artifacts yet.", "artifact")
            return
        if args[0] != "add" or len(args) < 2:
            raise CommandError("cannot read the artifact command.")
        call: dict[str, Any] = {"path": args[1]}
        if len(args) > 2:
            call["description"] = " ".join(args[2:])
        self.call("builtin:fs:add_artifact", call)

    def policy(self, args: list[str]) -> None:
        session = self.session
        if args[:1] == ["explain-last"]:
            decision = session.gateway().last_decision()
            if decision is None:
                self.app.say("No tool call has been decided in this workspace yet.", "policy")
                return
            self.app.say(explain_decision(decision), "policy")
        elif args[:1] == ["show"]:
            policy = session.policy()
            profile = session.profile()
            tools = "the tools the policy enables"
            if profile is not None and profile.tools is not None:
                tools = "only " + (", ".join(sorted(profile.tools)) or "no tools")
            self.app.say(
                f"Policy in force: {session.policy_source}\nhash {policy.hash}\napproval mode {session.mode}\n"
                f"profile {session.profile_name}: {tools}\n"
                f"Edit {session.workspace.root / 'policy.yaml'} and run /policy reload to change it.",
                "policy",
            )
        elif args[:1] == ["reload"]:
            denied = session.reload_policy()
            if denied:
                self.app.notify(f"{denied} waiting call(s) were denied: ask again under the new policy.")
            self.app.reload_panes(transcript=False)
        elif args[:1] == ["mode"]:
            if len(args) == 1:
                self.app.say(f"Approval mode: {session.mode}", "policy")
                return
            try:
                denied = session.set_mode(args[1])
            except AriesError as exc:
                raise CommandError(exc.message) from exc
            if denied:
                self.app.notify(f"{denied} waiting call(s) were denied: ask again under the new mode.")
            self.app.reload_panes(transcript=False)
        else:
            raise CommandError("cannot read the policy command.")

    def grants(self, args: list[str]) -> None:
        session = self.session
        if not args or args == ["list"]:
            grants = session.grants()
            if not grants:
                self.app.say("No session grants. Approve a call with 's' to grant it for this session.", "grants")
                return
            lines = [
                f"{n}. {g['tool_id']}  {json.dumps(g['pattern'], ensure_ascii=False)}" for n, g in enumerate(grants, 1)
            ]
            self.app.say("Session grants (/grants revoke N | all):\n" + "\n".join(lines), "grants")
            return
        if args[0] == "revoke" and len(args) == 2:
            if args[1] == "all":
                if not session.revoke_grants():
                    self.app.say("There were no session grants.", "grants")
                return
            if not args[1].isdigit() or session.revoke_grant(int(args[1])) is None:
                raise CommandError(f"no grant number {args[1]}; /grants lists them.")
            return
        raise CommandError("cannot read the grants command.")

    def doctor(self) -> None:
        self.app.run_worker(self._doctor, thread=True, group="doctor", exit_on_error=False)

    def _doctor(self) -> None:
        report = self.session.doctor()
        lines = [f"{'ok  ' if check.ok else 'FAIL'}  {check.name}: {check.detail}" for check in report.checks]
        verdict = "All checks passed." if report.ok else "Some checks FAILED."
        self.app.call_from_thread(self.app.say, "\n".join(["Doctor:", *lines, verdict]), "doctor")


def _key_argument(args: dict[str, Any]) -> str:
    for key in ("argv", "path", "paths", "url", "query", "process_id", "artifact_id"):
        if key in args:
            value = args[key]
            text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
            return text[:60]
    return ""
