"""``/compact``: the model's summary of the turns left out of the window (``services.assistant.compaction``):
asked for in a worker, shown, edited in the operator's editor, undone; ``/compact auto on|off`` in the
operator's settings. Each summary, edit and undo is a transcript entry: the Transcript pane shows it as
the conversation writes it; the summary reaches the model as data with the next request that leaves its
turns out (``/usage`` shows its part)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from services.errors import AriesError

if TYPE_CHECKING:
    from app.host import Host
    from services.session.session import Session
    from widgets.commands import CompactAction

TITLE = "compact"


class CompactController:
    def __init__(self, host: Host, busy: Callable[[], bool]) -> None:
        self.host = host
        self.busy = busy  # a turn is running
        self.worker: Any = None  # the summary being written

    def command(self, parsed: CompactAction) -> None:
        from services.assistant.compaction import show, undo

        session = self.host.require_session()
        if parsed.action == "show":
            self.host.say(show(session.conversation), TITLE)
        elif parsed.action == "undo":
            _, now = undo(session.conversation)
            after = "none is in force now"
            if now is not None:
                after = f"summary {now.compaction_id} of turns {now.first}–{now.last} is in force"
            self.host.say(f"Summary undone: {after}. The turns themselves were never changed.", TITLE)
        elif parsed.action == "edit":
            self.edit(session)
        elif parsed.action == "auto":
            self.auto(parsed.state == "on")
        else:
            self.run(session)

    def run(self, session: Session) -> None:
        """Ask the model in force for the summary, in a worker (one at a time, never during a turn)."""
        if self.busy() or self.worker is not None:
            self.host.report_error("A turn or a summary is running: wait for it.", TITLE)
            return
        from services.models.config import make_provider, resolve_model

        config = resolve_model(session.model_setting(), session.in_force.model_env())
        if config.provider == "offline":
            from services.assistant.compaction import OFFLINE

            self.host.report_error(OFFLINE, TITLE)
            return
        work = self._compact(session, make_provider(config), config.label)
        self.worker = self.host.run_worker(work, group=TITLE, exit_on_error=False)

    async def _compact(self, session: Session, provider: Any, label: str) -> None:
        from services.assistant.compaction import compact

        self.host.status_start(TITLE, f"asking {label} for a summary of the earlier turns")
        try:
            entry = await compact(session, provider, label)
        except AriesError as exc:
            self.host.report_error(exc.message, TITLE)
            return
        finally:
            self.host.status_stop(TITLE)
            await provider.aclose()
            self.worker = None
        turns = entry.get("turns") or {}
        self.host.notify(
            f"Summary {entry['compaction_id']} of turns {turns.get('first')}–{turns.get('last')} written: "
            "/compact show, edit, undo.",
            title=TITLE,
            timeout=6,
        )

    def edit(self, session: Session) -> None:
        """The summary in force in $VISUAL/$EDITOR (the App suspended); what is saved is a new entry."""
        from services.assistant.compaction import CompactError, current, edit
        from widgets.prompt.external import edit_in_editor

        summary = current(session.conversation)
        if summary is None:
            raise CompactError("No summary is in force to edit: /compact writes one.")
        edited = edit_in_editor(self.host, summary.text)
        if edited.text is None:
            self.host.report_error(edited.problem, TITLE)
            return
        entry = edit(session.conversation, edited.text)
        done = f"Summary {entry['compaction_id']} (edited) is in force; /compact undo goes back."
        self.host.notify(done, title=TITLE)

    def auto(self, on: bool) -> None:
        from services.settings.operator import update_settings

        update_settings(lambda settings: settings.model_copy(update={"auto_compact": on}))
        what = "on: after a turn whose request leaves out turns no summary covers" if on else "off"
        self.host.say(f"Automatic summaries {what} (your settings, every workspace).", TITLE)
