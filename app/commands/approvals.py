"""The approval queue in the TUI: Enter on a waiting call opens its modal; a call decided elsewhere
(cancelled, denied on a switch or a mode change) takes its modal with it; when the queue is done the
focus goes back to the prompt. The Approvals pane follows the queue itself (the session's ``approvals`` signal)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from screens.main import MainScreen
from widgets.approvals.pane import ApprovalsPane
from widgets.messages import StatusWaiting, call_status_key

if TYPE_CHECKING:
    from app.host import Host
    from services.session.session import Session
    from services.tools.calls import ApprovalDecision


class ApprovalsController:
    def __init__(self, host: Host) -> None:
        self.host = host

    def open(self, call_id: str) -> None:
        """The modal for a waiting call; the operator's decision goes to the session's queue."""
        session = self.host.session
        request = session.approvals.get(call_id) if session is not None else None
        if session is None or request is None:
            return

        def decided(decision: ApprovalDecision | None) -> None:
            if decision is not None:
                session.approvals.answer(request.call_id, decision)
                self.host.call_after_refresh(self.focus_prompt_if_queue_done)
            else:  # Esc: the call still waits, and the operator goes back to typing
                self.host.call_after_refresh(self.focus_prompt)

        from screens.approval import ApprovalScreen  # on first use: it brings rich.syntax and pygments

        self.host.push_screen(ApprovalScreen(request, root=session.workspace.root), decided)

    def changed(self, session: Session) -> None:
        """The queue changed: a modal whose call left it closes; the status line says which calls wait."""
        from screens.approval import ApprovalScreen

        pending = session.approvals.pending()
        modal = self.host.screen
        if isinstance(modal, ApprovalScreen) and modal.request.call_id not in {request.call_id for request in pending}:
            modal.dismiss(None)
        waiting = {str(r.origin["tool_call_id"]) for r in pending if r.origin.get("tool_call_id")}
        waiting |= {r.call_id for r in pending if not r.origin.get("tool_call_id")}  # the operator's own calls
        self.host.publish(StatusWaiting(frozenset(call_status_key(c) for c in waiting)))
        self.host.call_after_refresh(self.focus_prompt_if_queue_done)

    def close_modal_of(self, turn_id: str) -> None:
        """A turn ended (cancelled, failed): the modal of its call closes."""
        from screens.approval import ApprovalScreen

        screen = self.host.screen
        if isinstance(screen, ApprovalScreen) and screen.request.origin.get("turn_id") == turn_id:
            screen.dismiss(None)
            self.host.call_after_refresh(self.focus_prompt_if_queue_done)

    def focus_prompt(self) -> None:
        if isinstance(self.host.screen, MainScreen):
            self.host.screen.focus_prompt()

    def focus_prompt_if_queue_done(self) -> None:
        """Back to typing when nothing waits and focus sits in the (now empty) Approvals pane."""
        session, screen = self.host.session, self.host.screen
        if session is None or len(session.approvals) or not isinstance(screen, MainScreen):
            return
        pane = screen.query_one(ApprovalsPane)
        focused = screen.focused
        if focused is None or pane in focused.ancestors_with_self:
            screen.focus_prompt()
