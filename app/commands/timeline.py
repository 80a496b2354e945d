"""``/pin [N]``, ``/unpin N``, ``/checkpoint NAME``, ``/checkpoints`` and ``/rewind N|NAME``.

Pins and checkpoints are entries of the open conversation (``services.conversation.marks``). A rewind
is planned in a thread (``services.session.rewind.plan_rewind``), shown in its one approval
(:class:`screens.rewind.RewindScreen`: every file, the diffs of files changed outside Aries, what
cannot be undone), then done through the gateway on the App's loop; the conversation is reopened so
the transcript shows the turns in force.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from app.host import run_task, when_idle

if TYPE_CHECKING:
    from app.host import AppHost
    from services.session.rewind import RewindPlan


class TimelineController:
    def __init__(self, host: AppHost, turn_running: Callable[[], bool]) -> None:
        self.host = host
        self.turn_running = turn_running

    def pin(self, ref: str | None) -> None:
        from services.conversation.marks import pin

        conversation = self.host.require_session().conversation
        run_task(self.host, "/pin", lambda: pin(conversation, None if ref is None else int(ref)), self._told("/pin"))

    def unpin(self, ref: str) -> None:
        from services.conversation.marks import unpin

        conversation = self.host.require_session().conversation
        run_task(self.host, "/unpin", lambda: unpin(conversation, int(ref)), self._told("/unpin"))

    def checkpoint(self, name: str) -> None:
        from services.conversation.marks import checkpoint

        conversation = self.host.require_session().conversation
        run_task(self.host, "/checkpoint", lambda: checkpoint(conversation, name), self._told("/checkpoint"))

    def checkpoints(self) -> None:
        from services.conversation.marks import checkpoint_lines

        lines = checkpoint_lines(self.host.require_session().conversation)
        if not lines:
            self.host.say(
                "No checkpoint in this conversation yet: /checkpoint NAME marks the current turn.", "checkpoints"
            )
            return
        self.host.say("Checkpoints:\n" + "\n".join(lines), "checkpoints")

    def _told(self, title: str) -> Callable[[str], None]:
        def told(line: str) -> None:
            self.host.notify(line, title=title, timeout=4)

        return told

    def rewind(self, ref: str) -> None:
        """``/rewind N|NAME``: planned in a thread, then the one approval, then done."""
        from services.session.rewind import plan_rewind

        when_idle(self.turn_running, "rewind")
        session = self.host.require_session()
        run_task(self.host, "/rewind", lambda: plan_rewind(session, ref), self._ask, group="rewind")

    def _ask(self, plan: RewindPlan) -> None:
        from screens.rewind import RewindScreen

        def chosen(answer: str | None) -> None:
            if answer is None:
                self.host.notify("Nothing was rewound.", title="/rewind", timeout=4)
                return
            self.host.run_worker(self._apply(plan, answer == "include"), group="rewind", exit_on_error=False)

        self.host.push_screen(RewindScreen(plan), chosen)

    async def _apply(self, plan: RewindPlan, include_changed: bool) -> None:
        from services.errors import AriesError
        from services.session.rewind import apply_rewind_async

        session = self.host.require_session()
        try:
            done = await apply_rewind_async(session, plan, include_changed=include_changed)
        except AriesError as exc:
            self.host.report_error(exc.message, "/rewind")
            return
        self.host.start_conversation(session.conversation.conversation_id)
        count = len(done["files"])
        self.host.notify(f"Rewound to the end of turn {plan.to}: {count} file(s) put back.", title="/rewind", timeout=5)
