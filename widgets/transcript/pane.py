"""The Transcript pane: the active conversation, one block per entry, and the answer being streamed.

It follows the active session's signals (``widgets.signals``), subscribed when mounted: a session
shown afresh, a new conversation, each entry the conversation writes, and the turn loop's events (the
answer streams into a ``StreamingAnswer`` block as it arrives). The pane reconciles the stream with
the record itself: the recorded answer of a turn it followed is already on screen (the stream's block,
finished on ``Done``), so it is not shown twice.

A long message of the operator (a pasted text: a chip at the prompt) is folded to its first
``FOLD_SHOWN`` lines and a line that says how many follow; Enter on the selected message (↑/↓) or a
click on that line unfolds it, and folds it again. ``y`` and a mouse selection that reaches the fold
copy the whole message, as written.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from widgets.messages import ConversationEntry, EntryRevealed, TurnEvent
from widgets.safe import clean, plain
from widgets.signals import Conversational, SessionSignals, follow_sessions

if TYPE_CHECKING:
    from textual.selection import Selection

    from widgets.transcript.streaming import StreamingAnswer

ROLE_LABELS = {"user": "you", "assistant": "assistant", "tool": "tool", "system": "aries", "notice": "aries"}
MAX_SHOWN_CHARS = 20_000
FOLD_LINES = 12
"""An operator's message longer than this (in lines) is folded in the transcript."""
FOLD_SHOWN = 4
"""How many of its first lines a folded message shows."""
MAX_TOOL_LINES = 16
SHOWN = "TranscriptEntry, ToolCallBlock, StreamingAnswer"
MARK_KINDS = ("pin", "unpin", "rewind")
"""Every block the pane shows for a conversation."""


def fold_lines(entry: dict[str, Any]) -> int:
    """How many lines a folded ``entry`` hides (0: it is not folded: not the operator's, or short)."""
    if entry.get("role") != "user":
        return 0
    lines = _body(entry).count("\n") + 1
    return lines - FOLD_SHOWN if lines > FOLD_LINES else 0


def fold_note(hidden: int, folded: bool) -> str:
    if folded:
        return f"… {hidden} more lines · Enter or a click here unfolds"
    return "Enter or a click here folds it again"


def render_entry(entry: dict[str, Any], mark: str = "", *, folded: bool = False) -> Text:
    """One transcript entry as plain, neutralised text (never markup): a label line, then the content;
    ``mark`` (``pinned``, ``rewound away``) is said on the label line (``folded``: a long message of
    the operator's first lines and how many follow)."""
    role = clean(entry.get("role", "system"), single_line=True)
    stamp = clean(str(entry.get("timestamp", ""))[11:19], single_line=True)
    label = Text()
    label.append(ROLE_LABELS.get(role, role), style=f"bold {_role_style(role)}")
    if role == "tool":
        status = entry.get("status", "")
        label.append(f"  {clean(entry.get('tool_name', '?'), single_line=True)}", style="bold")
        label.append(f"  {clean(status, single_line=True)}", style="green" if status == "success" else "red")
        duration = entry.get("duration_ms")
        shown = f"{duration:.0f}" if isinstance(duration, int | float) else "?"
        label.append(f"  {shown} ms", style="dim")
    if role == "assistant" and entry.get("provenance") == "cloud":
        model = clean(str(entry.get("model") or "?"), single_line=True)
        label.append(f"  cloud · {model}", style="bold yellow")
        request = (entry.get("cloud") or {}).get("request_id") if isinstance(entry.get("cloud"), dict) else None
        if request:
            label.append(f"  {clean(str(request), single_line=True)}", style="dim")
    label.append(f"  {stamp}", style="dim")
    if mark:
        label.append(f"  · {mark}", style="bold green" if mark == "pinned" else "italic")
    body = _body(entry)
    hidden = fold_lines(entry)
    if hidden:
        shown = "\n".join(body.split("\n")[:FOLD_SHOWN]) if folded else body[:MAX_SHOWN_CHARS]
        return Text.assemble(label, "\n", plain(shown), "\n", Text(fold_note(hidden, folded), style="dim italic"))
    if len(body) > MAX_SHOWN_CHARS:
        body = body[:MAX_SHOWN_CHARS] + f"\n… ({len(body) - MAX_SHOWN_CHARS} more characters in the transcript file)"
    return Text.assemble(label, "\n", plain(body))


def _body(entry: dict[str, Any]) -> str:
    """What an entry shows below its label: its content (attached files as one line each, a tool's data)."""
    role = entry.get("role")
    body = str(entry.get("content", ""))
    if role == "user" and ("attached file " in body):  # the files a message attached: one line each
        from services.assistant.attachments import collapse_attachments

        body = collapse_attachments(body)
    if role == "tool":
        body = "\n".join(part for part in (body, tool_output_text(entry.get("output"))) if part)
    return body


def tool_output_text(output: Any, max_lines: int = MAX_TOOL_LINES) -> str:
    """The data part of a tool result, as indented JSON cut to ``max_lines`` lines."""
    data = output.get("data") if isinstance(output, dict) and "status" in output else output
    if data is None:
        return ""
    import json  # on first use: not at start-up

    lines = json.dumps(data, indent=2, ensure_ascii=False, default=str).splitlines()
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"… ({len(lines) - max_lines} more lines in the transcript file)"]
    return "\n".join(lines)


def _role_style(role: str) -> str:
    return {"user": "cyan", "assistant": "magenta", "tool": "yellow", "system": "blue", "notice": "blue"}.get(
        role, "white"
    )


class TranscriptEntry(Static):
    DEFAULT_CSS = """
    TranscriptEntry { margin: 0 0 1 0; padding: 0 1; }
    TranscriptEntry.-user { border-left: wide $accent; }
    TranscriptEntry.-assistant { border-left: wide $secondary; }
    TranscriptEntry.-tool { border-left: wide $warning; }
    TranscriptEntry.-system, TranscriptEntry.-notice { border-left: wide $primary-muted; color: $text-muted; }
    """

    def __init__(self, entry: dict[str, Any]) -> None:
        role = clean(entry.get("role", "system"), single_line=True)
        self.hidden_lines = fold_lines(entry)  # what folding hides (0: never folded)
        self.folded = bool(self.hidden_lines)
        super().__init__(
            render_entry(entry, folded=self.folded),
            classes=f"-{role}" if role in ROLE_LABELS else "-system",
            markup=False,
        )
        self.entry = entry
        self.marks = (False, False)  # (rewound away, pinned), as shown
        self._query = ""

    def mark(self) -> str:
        """What the label line says of the entry's turn (``rewound away``, ``pinned`` or nothing)."""
        away, pin = self.marks
        return "rewound away" if away else "pinned" if pin else ""

    def show_marks(self, away: bool, pinned: bool) -> None:
        """Say on the label line that the entry's turn was rewound away or is pinned."""
        self.marks = (away, pinned)
        self.highlight(self._query)

    def highlight(self, query: str) -> None:
        """Show ``query`` highlighted in the entry (nothing highlighted for an empty query)."""
        self._query = query
        text = render_entry(self.entry, self.mark(), folded=self.folded)
        if query:
            text.highlight_regex(re.compile(re.escape(query), re.IGNORECASE), style="black on yellow")
        self.update(text)

    def toggle_fold(self) -> bool:
        """Unfold a folded message, or fold it again (False: it is not a message that folds)."""
        if not self.hidden_lines:
            return False
        self.folded = not self.folded
        self.highlight(self._query)
        return True

    def on_click(self, event: events.Click) -> None:
        """A click on the fold's line (the block's last row) unfolds or folds the message; the end of a
        mouse selection there (a drag, then the click Textual sends) does not."""
        if self.hidden_lines and event.y == self.size.height - 1 and self.text_selection is None:
            event.stop()
            self.toggle_fold()

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The selected text as written; a selection that reaches the fold's line takes the lines it
        hides too (the whole message from where the selection starts), never the fold's note."""
        if not (self.hidden_lines and self.folded):
            return super().get_selection(selection)
        shown = str(render_entry(self.entry, folded=True)).split("\n")
        note = len(shown) - 1  # the fold's line
        if selection.end is not None and selection.end.y < note:
            return super().get_selection(selection)
        from textual.geometry import Offset
        from textual.selection import Selection as Span

        head = Span(selection.start, Offset(0, note)).extract("\n".join(shown))
        hidden = "\n".join(_body(self.entry).split("\n")[FOLD_SHOWN:])
        start_line = 0 if selection.start is None else selection.start.y
        return (head + hidden if start_line < note else hidden), "\n"


FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n(.*?)^\1[ \t]*$", re.MULTILINE | re.DOTALL)


def code_blocks(text: str) -> list[str]:
    """The contents of the fenced code blocks of a Markdown text, in order."""
    return [match.group(2).rstrip("\n") for match in FENCE.finditer(text)]


def searchable_text(widget: Widget) -> str:
    """The text the find bar searches in one block of the pane."""
    entry = getattr(widget, "entry", None)
    if isinstance(entry, dict):
        body = str(entry.get("content", ""))
        return "\n".join(part for part in (body, tool_output_text(entry.get("output"))) if part)
    return str(getattr(widget, "text", ""))


def entry_widget(entry: dict[str, Any]) -> Widget:
    """The widget for one transcript entry: a ``ToolCallBlock`` for tool calls, a ``RecordedAnswer`` for a
    local answer of a turn (rendered as its stream was), else a ``TranscriptEntry``."""
    if entry.get("role") == "tool":
        from widgets.transcript.tool_call import ToolCallBlock  # on first use: tables, diffs, syntax

        return ToolCallBlock(entry)
    if entry.get("role") == "assistant" and entry.get("provenance", "local") != "cloud" and entry.get("turn_id"):
        from widgets.transcript.streaming import RecordedAnswer  # as the streamed answer ended: links, usage

        return RecordedAnswer(entry)
    return TranscriptEntry(entry)


class TranscriptPane(VerticalScroll):
    """Scrollable list of transcript entries; ``load`` replaces them, ``add_entry`` appends."""

    BORDER_TITLE = "Transcript"
    can_focus = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "scroll_home", "Top", show=False, id="transcript.top", tooltip="Scroll to the first entry"),
        Binding("end", "scroll_end", "Bottom", show=False, id="transcript.bottom", tooltip="Scroll to the last entry"),
        Binding(
            "up,k", "select(-1)", "Previous", show=False, id="transcript.previous", tooltip="Select the message above"
        ),
        Binding("down,j", "select(1)", "Next", show=False, id="transcript.next", tooltip="Select the message below"),
        Binding("y", "copy", "Copy", show=False, id="transcript.copy", tooltip="Copy the selected message (OSC 52)"),
        Binding(
            "enter",
            "toggle_fold",
            "Unfold",
            show=False,
            id="transcript.unfold",
            tooltip="Unfold the selected long message (a pasted text), or fold it again",
        ),
        Binding(
            "c",
            "copy_code",
            "Copy code",
            show=False,
            id="transcript.copy_code",
            tooltip="Copy the code blocks of the selected message (OSC 52)",
        ),
        Binding(
            "tab",
            "to_citation",
            "Citation",
            show=False,
            id="transcript.citation",
            tooltip="To the cited handles of the latest answer in view (Enter opens one)",
        ),
    ]

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's parameter name
        super().__init__(id=id)
        self._found: list[Widget] = []  # the blocks that match the find bar's query, in order
        self._found_at: int | None = None
        self._query = ""
        self._selected: Widget | None = None  # the message y/c copy (Up/Down move it)
        self._empty = Static(
            "No messages yet. Type below and press Enter; /help lists the commands.",
            id="transcript-empty",
            markup=False,
        )
        self._answer: StreamingAnswer | None = None  # the block the current turn streams into
        self._usage: dict[str, Any] | None = None
        self._turns: set[str] = set()  # the turns followed here: their answer is the stream's block

    def compose(self) -> Any:
        yield self._empty

    def on_mount(self) -> None:
        follow_sessions(self, self._session_opened)

    def load(self, entries: list[dict[str, Any]], subtitle: str = "") -> None:
        """Show ``entries`` instead of what is shown (streamed answers of the conversation before too)."""
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle
        if not entries and not self.query(SHOWN):
            return  # already empty: nothing to restyle
        self._answer = None
        self.remove_children(SHOWN)
        self._empty.display = not entries
        if entries:
            self.mount_all([entry_widget(entry) for entry in entries])
            self._restyle()
        self.call_after_refresh(self.scroll_end, animate=False)

    def entries(self) -> list[dict[str, Any]]:
        """The entries shown, in order (messages and tool calls alike)."""
        shown = self.query("TranscriptEntry, ToolCallBlock, RecordedAnswer")
        return [widget.entry for widget in shown]  # type: ignore[attr-defined]

    def add_entry(self, entry: dict[str, Any]) -> None:
        self._empty.display = False
        self.mount(entry_widget(entry))
        if entry.get("kind") in MARK_KINDS:  # a pin, unpin or rewind: the turns it marks change look
            self.call_after_refresh(self._restyle)
        self.call_after_refresh(self.scroll_end, animate=False)

    def _restyle(self) -> None:
        """Mark the pinned turns (``-pinned``) and those a rewind put away (``-rewound``, dimmed)."""
        from services.conversation.timeline import timeline_of, turn_number

        shown = [(widget, getattr(widget, "entry", None)) for widget in self.query(SHOWN)]
        timeline = timeline_of([entry for _, entry in shown if isinstance(entry, dict)])
        live, pinned = set(timeline.lineage), set(timeline.pinned)
        for widget, entry in shown:
            turn = entry.get("turn_id") if isinstance(entry, dict) else None
            away, pin = bool(turn) and turn not in live, bool(turn) and turn in live and turn_number(turn) in pinned
            if (
                isinstance(widget, TranscriptEntry)
                and widget.entry.get("role") == "user"
                and (away, pin) != widget.marks
            ):
                widget.show_marks(away, pin)
            widget.set_class(away, "-rewound")
            widget.set_class(pin, "-pinned")

    # -- selecting and copying a message ---------------------------------------------------------
    @property
    def selected(self) -> Widget | None:
        return self._selected if self._selected is not None and self._selected.is_attached else None

    def action_to_citation(self) -> None:
        """Tab from the pane: the first cited handle of the latest answer in view (of the latest answer
        when none is in view), not the top of the conversation; from anything inside, the next one."""
        from widgets.transcript.streaming import CitationLink

        links = list(self.query(CitationLink))
        if self.screen.focused is not self or not links:
            self.screen.focus_next()
            return
        in_view = [link for link in links if link.region.area]
        latest = (in_view or links)[-1]
        first = next(link for link in links if link.parent is latest.parent)
        first.focus()

    def action_select(self, step: int) -> None:
        blocks = list(self.query(SHOWN))
        if not blocks:
            return
        current = self.selected
        index = len(blocks) - 1 if current is None else max(0, min(len(blocks) - 1, blocks.index(current) + step))
        if current is not None:
            current.remove_class("-selected")
        self._selected = blocks[index]
        self._selected.add_class("-selected")
        self.scroll_to_widget(self._selected, animate=False)

    def reveal(self, message_id: str) -> bool:
        """Scroll to the entry ``message_id`` (its top at the top) and select it (False: not shown)."""
        for block in self.query(SHOWN):
            entry = getattr(block, "entry", None)
            if isinstance(entry, dict) and entry.get("message_id") == message_id:
                if self.selected is not None:
                    self.selected.remove_class("-selected")
                self._selected = block
                block.add_class("-selected")
                self.scroll_to_widget(block, animate=False, top=True)
                return True
        return False

    def action_copy(self) -> None:
        from widgets.clipboard import copy_text

        block = self.selected
        if block is None:
            self.notify("Select a message first (↑/↓ in the transcript).", title="copy", severity="warning")
            return
        copy_text(self.app, searchable_text(block), "copy")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_fold":  # only on a selected message that folds: Enter is free otherwise
            block = self.selected
            return isinstance(block, TranscriptEntry) and bool(block.hidden_lines)
        return super().check_action(action, parameters)

    def action_toggle_fold(self) -> None:
        block = self.selected
        if isinstance(block, TranscriptEntry) and block.toggle_fold():
            self.scroll_to_widget(block, animate=False)

    def action_copy_code(self) -> None:
        from widgets.clipboard import copy_text

        block = self.selected
        code = code_blocks(searchable_text(block)) if block is not None else []
        if not code:
            self.notify("The selected message has no code block (y copies the whole message).", title="copy")
            return
        copy_text(self.app, "\n\n".join(code), "copy code")

    # -- find (Ctrl+F) -------------------------------------------------------------------------
    def find(self, query: str) -> tuple[int | None, int]:
        """Highlight ``query`` (case-insensitive) in every block; ``(current, total)`` blocks that match,
        the current one (the last, the newest) scrolled into view."""
        self._query = query
        needle = query.casefold()
        blocks = list(self.query(SHOWN))
        self._found = [b for b in blocks if needle and needle in searchable_text(b).casefold()]
        from widgets.transcript.streaming import RecordedAnswer

        for block in blocks:
            block.set_class(block in self._found, "-find-match")
            if isinstance(block, TranscriptEntry | RecordedAnswer):
                block.highlight(query if block in self._found else "")
        self._found_at = len(self._found) - 1 if self._found else None
        self._show_found()
        return self._found_at, len(self._found)

    def find_step(self, step: int) -> tuple[int | None, int]:
        if self._found:
            self._found_at = ((self._found_at or 0) + step) % len(self._found)
            self._show_found()
        return self._found_at, len(self._found)

    def find_clear(self) -> None:
        self.find("")

    def _show_found(self) -> None:
        for number, block in enumerate(self._found):
            block.set_class(number == self._found_at, "-find-current")
        for block in self.query(".-find-current"):
            if block not in self._found or self._found.index(block) != self._found_at:
                block.remove_class("-find-current")
        if self._found_at is not None:
            current = self._found[self._found_at]
            if isinstance(current, TranscriptEntry) and current.folded:  # the match may be in the folded lines
                current.toggle_fold()
            self.scroll_to_widget(current, animate=False, top=True)

    # -- what the session's signals say -----------------------------------------------------------
    def _session_opened(self, signals: SessionSignals) -> None:
        signals.conversation.subscribe(self, self._conversation)
        signals.turn.subscribe(self, self._turn_event)
        self._turns.clear()
        conversation = signals.session.conversation
        entries = conversation.read().entries
        self.load(entries, subtitle=conversation.conversation_id if entries else "new conversation")
        if conversation.format_notice:  # written by a newer Aries: what is not shown, said once
            self.notify(conversation.format_notice, title="transcript", severity="warning", timeout=10)

    def _conversation(self, message: Conversational) -> None:
        if isinstance(message, EntryRevealed):
            self.call_after_refresh(self.reveal, message.message_id)  # after the reopened entries' layout
        elif isinstance(message, ConversationEntry):
            if not self.streamed(message):
                self.add_entry(message.entry)
            self.border_subtitle = message.conversation_id
        elif message.conversation_id:  # /resume, /fork: the reopened conversation
            self.load(message.entries, subtitle=message.conversation_id)
        else:  # /new
            self.load([], subtitle="new conversation")

    def streamed(self, message: ConversationEntry) -> bool:
        """True for the recorded answer of a turn followed here: its stream's block shows it already
        (the cloud's answer is never streamed)."""
        from services.conversation.events import AssistantAnswer

        event = message.event
        return isinstance(event, AssistantAnswer) and event.provenance != "cloud" and event.turn_id in self._turns

    async def _turn_event(self, message: TurnEvent) -> None:
        """The answer streams into its own block; a tool call or an invalid attempt closes the block
        (what follows streams into a new one, below), the end of the turn marks it."""
        from services.assistant import Cancelled, Done, Failed, SchemaInvalid, TextDelta, ToolProposed, UsageReport

        event, answer = message.event, self._answer
        self._turns.add(event.turn_id)
        if isinstance(event, TextDelta):
            answer = await self._answer_block(event.turn_id, message.model_label)
            await answer.write(event.text)
        elif isinstance(event, ToolProposed) and answer is not None:
            await answer.finish(answer.text, [], None, "asked for a tool")
            self._answer = None
        elif isinstance(event, SchemaInvalid) and answer is not None:  # that attempt stays, marked
            state = "not valid for the output schema" + (" · asking once more" if event.retrying else "")
            await answer.finish(answer.text, [], None, state)
            if event.retrying:
                self._answer = None
        elif isinstance(event, UsageReport):
            self._usage = {
                "prompt_tokens": event.prompt_tokens,
                "completion_tokens": event.completion_tokens,
                "elapsed_ms": event.elapsed_ms,
                "steps": event.steps,
                "prompt_tokens_estimated": event.prompt_tokens_estimated,
                "completion_tokens_estimated": event.completion_tokens_estimated,
                "generating_ms": event.generating_ms,
            }
        elif isinstance(event, Done):
            answer = await self._answer_block(event.turn_id, message.model_label)
            await answer.finish(event.text, event.citations, self._usage, checks=event.checks)
            self._answer = None
        elif isinstance(event, Cancelled | Failed):
            if answer is not None:
                await answer.finish("", [], None, "cancelled" if isinstance(event, Cancelled) else "failed")
            self._answer = None

    async def _answer_block(self, turn_id: str, model_label: str) -> StreamingAnswer:
        if self._answer is not None and self._answer.turn_id == turn_id:
            return self._answer
        from widgets.transcript.streaming import StreamingAnswer

        self._answer = StreamingAnswer(turn_id, model_label)
        await self.mount(self._answer)
        self.scroll_end(animate=False)
        return self._answer
