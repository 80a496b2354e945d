"""Type-ahead: a message or slash command sent while a turn runs waits in a queue and is sent when
the turn ends.

The queue holds the lines as typed (oldest first). When the running turn ends — answered, failed, or
cancelled with Ctrl+X (which cancels that turn only) — the lines are sent in order, each as if typed
then: a message starts the next turn (and the rest wait for that one), a slash command runs at once.
So a queued line runs under whatever is in force when it is sent (a ``/profile use`` or ``/policy
mode`` queued before it, a rewind), and a turn held up by an approval wait sends nothing until the
wait is resolved and the turn is over.

Until it is sent a line can be taken back: Esc at an empty prompt brings the newest queued line into
the prompt to be edited (Enter queues it again, or sends it if the turn is over); Esc again removes
it. The queue is the session's: a workspace switch or quit drops it.

What the queue holds is published on the session's ``queue`` signal (``QueueChanged``); the
``widgets.prompt.queued.QueuedLines`` strip below the prompt shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from widgets.messages import QueueChanged

if TYPE_CHECKING:
    from app.host import Host


class TypeAhead:
    """The lines typed ahead of the running turn, and the one taken back to be edited."""

    def __init__(self, host: Host, *, send: Callable[[str], None], busy: Callable[[], bool]) -> None:
        self.host = host
        self.send = send  # a line, as if submitted now (a slash command, or a message: a turn)
        self.busy = busy  # a turn runs
        self.queued: list[str] = []
        self.editing: str | None = None  # the line taken back into the prompt

    def __len__(self) -> int:
        return len(self.queued)

    def submit(self, text: str) -> None:
        """A line from the prompt: queued while a turn runs, else sent now."""
        edited, self.editing = self.editing is not None, None
        if self.busy() or self.queued:  # (queued and idle: typed in the instant the last turn ended)
            self.queued.append(text)
            self._changed()
            self.drain()
            return
        if edited:  # a line taken back, sent after the turn ended: the strip forgets it
            self._changed()
        self.send(text)

    def drain(self) -> None:
        """The turn is over: send the queued lines in order until one starts a turn."""
        while self.queued and not self.busy():
            line = self.queued.pop(0)
            self._changed()
            self.send(line)

    def escape(self, prompt: str) -> str | None:
        """Esc at the prompt: the new prompt text, or None when the queue has nothing to do with it.

        With a line taken back in the prompt, Esc removes it; at an empty prompt, Esc takes the
        newest queued line back to be edited."""
        if self.editing is not None:
            self.editing = None
            self._changed()
            self.host.notify("The queued message was removed.", title="queued", timeout=3)
            return ""
        if prompt or not self.queued:
            return None
        self.editing = self.queued.pop()
        self._changed()
        return self.editing

    def clear(self) -> None:
        """The session closes: what was queued for it goes."""
        if self.queued or self.editing is not None:
            self.queued, self.editing = [], None
            self._changed()

    def remaining(self) -> str:
        """For Ctrl+X's notice: what happens to the queue."""
        count = len(self.queued)
        if not count:
            return ""
        return (
            f" {count} queued message{'s' if count > 1 else ''} remain{'s' if count == 1 else ''}: "
            "sent when it has stopped (Esc at the prompt takes the newest back)."
        )

    def _changed(self) -> None:
        self.host.publish(QueueChanged(tuple(self.queued), self.editing is not None))
