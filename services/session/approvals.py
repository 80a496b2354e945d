"""The approval queue: tool calls waiting for the operator, held headless.

The gateway asks an *approver* whenever the policy says ``confirm``. ``ApprovalQueue.ask`` is
that approver for an interactive session: it parks the request with a future and tells its
listeners (the TUI's Approvals pane redraws). The operator's answer (``answer``) resolves the
future; the gateway then runs or refuses the call and records it. Nothing about Textual here:
the TUI is one listener among possible others.

``deny_all(reason)`` resolves every pending request as a denial: the caller (closing a session,
changing the approval mode or the policy) must then let the waiting calls finish so that each
denial is recorded before the audit store closes (``Session.aclose`` does).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the gateway is imported on first use of a tool, not at start-up
    from services.tools.calls import ApprovalDecision, ApprovalRequest

Listener = Callable[[], object]


@dataclass
class _Pending:
    request: ApprovalRequest
    future: asyncio.Future[ApprovalDecision]
    loop: asyncio.AbstractEventLoop
    turn_id: str | None = None


class ApprovalQueue:
    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []

    # -- the approver -----------------------------------------------------------------
    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ApprovalDecision] = loop.create_future()
        with self._lock:
            self._pending[request.call_id] = _Pending(request, future, loop)
        self._changed()
        try:
            return await future
        finally:
            with self._lock:
                self._pending.pop(request.call_id, None)
            self._changed()

    __call__ = ask

    # -- what the operator sees and does -------------------------------------------------
    def pending(self) -> list[ApprovalRequest]:
        with self._lock:
            return [p.request for p in self._pending.values()]

    def get(self, call_id: str) -> ApprovalRequest | None:
        with self._lock:
            entry = self._pending.get(call_id)
        return entry.request if entry else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)

    def answer(self, call_id: str, decision: ApprovalDecision) -> bool:
        """Resolve one pending call; False when it is no longer waiting. Safe from any thread."""
        with self._lock:
            entry = self._pending.get(call_id)
        if entry is None:
            return False
        _resolve(entry, decision)
        return True

    def deny_all(self, reason: str) -> int:
        """Deny every waiting call with ``reason``; returns how many were waiting."""
        with self._lock:
            entries = list(self._pending.values())
        if not entries:
            return 0
        from services.tools.calls import ApprovalDecision

        for entry in entries:
            _resolve(entry, ApprovalDecision.deny(reason))
        return len(entries)

    # -- listeners ---------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def _changed(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener()
            except Exception:  # a listener's bug never blocks a decision
                pass


def _resolve(entry: _Pending, decision: ApprovalDecision) -> None:
    def settle() -> None:
        if not entry.future.done():
            entry.future.set_result(decision)

    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is entry.loop:
        settle()
    elif not entry.loop.is_closed():
        entry.loop.call_soon_threadsafe(settle)


__all__ = ["ApprovalQueue"]
