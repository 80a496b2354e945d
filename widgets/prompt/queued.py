"""The strip below the prompt that shows what was typed ahead of the running turn (``QueueChanged`` on
the session's ``queue`` signal, from ``app.commands.typeahead``): each queued line, oldest first,
and what Esc does. Hidden while nothing is queued; a session shown afresh starts empty."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from widgets.messages import QueueChanged
from widgets.safe import clip
from widgets.signals import SessionSignals, follow_sessions

SHOWN = 3
"""Queued lines shown; more are counted."""
LINE_WIDTH = 100


class QueuedLines(Static):
    DEFAULT_CSS = """
    QueuedLines { height: auto; max-height: 5; padding: 0 1; color: $text-muted; display: none; }
    QueuedLines.-queued { display: block; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's parameter name
        super().__init__("", id=id, markup=False)
        self.queued: tuple[str, ...] = ()
        self.editing = False

    def on_mount(self) -> None:
        follow_sessions(self, self._session_opened)

    def _session_opened(self, signals: SessionSignals) -> None:
        signals.queue.subscribe(self, self._changed)
        self._show((), editing=False)

    def _changed(self, message: QueueChanged) -> None:
        self._show(message.queued, editing=message.editing)

    def _show(self, queued: tuple[str, ...], *, editing: bool) -> None:
        self.queued, self.editing = queued, editing
        self.set_class(bool(queued) or editing, "-queued")
        self.update(self.strip_text())

    def strip_text(self) -> Text:
        """The strip's text: each queued line (its first line, clipped), then the keys."""
        text = Text()
        for number, line in enumerate(self.queued[:SHOWN], start=1):
            first, *rest = line.split("\n")
            more = f"  (+{len(rest)} lines)" if rest else ""
            text.append(f"queued {number}: ", style="bold")
            text.append(clip(first, LINE_WIDTH) + more + "\n")
        if len(self.queued) > SHOWN:
            text.append(f"… and {len(self.queued) - SHOWN} more\n")
        if self.editing:
            text.append("Editing a queued message: Enter queues it again · Esc removes it")
        else:
            text.append("Sent when the turn ends · Esc at an empty prompt takes the newest back to edit")
        return text
