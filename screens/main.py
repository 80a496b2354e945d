"""The main screen: the Transcript beside the Context, Approvals and Artifacts panes; the prompt below.

At ``NARROW_WIDTH`` columns and wider the side column stands beside the transcript. Below that
(80×24 terminals) one pane is in view at a time: the transcript, or the side pane that has the
focus (F3, F4, F5; F2 and sending a message bring the transcript back). A strip at the top names
the pane in view, the F-keys and how many approvals wait.

The screen hands nothing on: each pane, the status line and the prompt (its history) subscribe to the
active session's signals when mounted (``widgets.signals.follow_sessions``) and update themselves.

Focus: the prompt has it unless the operator moves it. Panes never take it; when a modal closes,
the prompt gets it back (the transcript, and the approval queue after a decision while calls still
wait, keep it); when the approval queue empties while it had the focus, the prompt gets it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events, on
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Static

from widgets.approvals.pane import ApprovalsPane
from widgets.artifacts.pane import ArtifactsPane
from widgets.context.pane import ContextPane
from widgets.header import WorkbenchHeader
from widgets.keybar import KeyBar
from widgets.prompt.input import PromptInput
from widgets.prompt.queued import QueuedLines
from widgets.safe import clean
from widgets.status import RunStatus
from widgets.tabs import PaneTabs
from widgets.transcript.find import FindBar
from widgets.transcript.pane import TranscriptPane

if TYPE_CHECKING:
    from widgets.prompt.editor import PromptEditor

NARROW_WIDTH = 110
PANE_IDS = ("transcript", "context", "approvals", "artifacts")


class MainScreen(Screen[None]):
    CSS_PATH = "main.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "find_step(1)", "Next match", show=False, id="find.n", tooltip="The find bar's next match"),
        Binding("N", "find_step(-1)", "Previous match", show=False, id="find.N", tooltip="The previous match"),
    ]
    AUTO_FOCUS = "#prompt"  # back from a modal whose opener is gone (a call denied meanwhile): the prompt

    @dataclass
    class SlashCommand(Message):
        """Run (``run=True``) or pre-fill (``run=False``) a slash command line at the prompt.

        Posted by the command palette. Running submits the prompt exactly as if typed, so the App's
        ``Input.Submitted`` handler dispatches it; pre-filling leaves the cursor after the line.
        """

        line: str
        run: bool = True

    def __init__(self) -> None:
        super().__init__()
        self.view = "transcript"

    def compose(self) -> Any:
        yield WorkbenchHeader(icon="♈")
        yield PaneTabs(id="tabs")
        with Horizontal(id="workbench"):
            yield TranscriptPane(id="transcript")
            with Vertical(id="side"):
                yield ContextPane(id="context")
                yield ApprovalsPane(id="approvals")
                yield ArtifactsPane(id="artifacts")
        with Vertical(id="input-area"):
            yield RunStatus(id="run-status")
            yield FindBar(id="find")
            yield Static("", id="completions", markup=False)
            yield PromptInput(_command_names, completer=self._complete, id="prompt")
            yield QueuedLines(id="queued")
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.query_one("#completions").display = False
        self._apply_width(self.size.width or self.app.size.width)
        self.query_one(PromptInput).focus()

    # -- narrow layout ---------------------------------------------------------------------------
    @property
    def narrow(self) -> bool:
        return self.has_class("-narrow")

    def on_resize(self, event: events.Resize) -> None:
        self._apply_width(event.size.width)

    def _apply_width(self, width: int) -> None:
        self.set_class(0 < width < NARROW_WIDTH, "-narrow")
        self.show_view(self.view)

    def show_view(self, pane: str) -> None:
        """Bring ``pane`` (one of ``PANE_IDS``) into view; on a wide screen every pane is in view."""
        if pane not in PANE_IDS:
            return
        self.view = pane
        for name in PANE_IDS:
            self.set_class(name == pane, f"-view-{name}")
        self.query_one(PaneTabs).show(pane)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        widget: Widget | None = event.widget
        while widget is not None and widget is not self:
            if widget.id in PANE_IDS:
                self.show_view(widget.id or "transcript")
                return
            widget = widget.parent  # type: ignore[assignment]

    @on(Input.Submitted, "#prompt")
    def _submitted(self, event: Input.Submitted) -> None:
        """A message (not a command) brings the transcript into view; the App handles the text."""
        if not event.value.strip().startswith("/"):
            self.show_view("transcript")

    # -- focus -----------------------------------------------------------------------------------
    def focus_prompt(self) -> None:
        editor = self._editor()
        (editor if editor is not None and editor.is_open else self.query_one(PromptInput)).focus()

    def take_back(self, escape: Callable[[str], str | None]) -> bool:
        """Esc at the one-line prompt with lines typed ahead (``app.commands.typeahead``): ``escape``
        gets the prompt's text and gives the new one (a queued line to edit, or nothing), or None when
        the queue has nothing to do with this Esc."""
        prompt = self.query_one(PromptInput)
        if self.focused is not prompt:
            return False
        text = escape(prompt.value)
        if text is None:
            return False
        if "\n" in text:  # a multi-line message is edited in the multi-line editor
            prompt.value = ""
            prompt.expanding = True
            prompt.post_message(PromptInput.Expand(text))
        else:
            prompt.value, prompt.cursor_position = text, len(text)
        return True

    # -- the multi-line editor (mounted on first use: TextArea stays out of start-up) ----------------
    def _editor(self) -> PromptEditor | None:
        found = list(self.query("#prompt-editor"))
        return found[0] if found else None  # type: ignore[return-value]

    @on(PromptInput.Expand)
    async def _expand(self, event: PromptInput.Expand) -> None:
        editor = self._editor()
        if editor is None:
            from widgets.prompt.editor import PromptEditor

            editor = PromptEditor(id="prompt-editor")
            await self.query_one("#input-area").mount(editor, after=self.query_one(PromptInput))
        self.query_one(PromptInput).display = False
        editor.open(event.text)

    def _collapse(self, text: str) -> PromptInput:
        prompt = self.query_one(PromptInput)
        editor = self._editor()
        if editor is not None:
            editor.close()
        prompt.display, prompt.expanding = True, False
        prompt.value, prompt.pastes = text, {}
        prompt.cursor_position = len(text)
        prompt.focus()
        return prompt

    @on(PromptInput.Forward)
    def _forwarded(self, event: PromptInput.Forward) -> None:
        """Keys typed before the editor had the focus go on to it, in order."""
        editor = self._editor()
        if editor is None or not editor.is_open:
            return
        if event.key == "enter":
            if editor.text.strip():
                self._editor_sent(editor.text)
        elif event.key in ("ctrl+j", "shift+enter"):
            editor.insert("\n")
        elif event.key == "backspace":
            editor.action_delete_left()
        elif event.character:
            editor.insert(event.character)

    def on_prompt_editor_collapse(self, event: PromptEditor.Collapse) -> None:
        """Esc in the editor (a one-line text): back to the one-line prompt (a naming-convention
        handler: the editor's module is imported on first use)."""
        self._collapse(event.text)

    def on_prompt_editor_send(self, event: PromptEditor.Send) -> None:
        self._editor_sent(event.text)

    def _editor_sent(self, text: str) -> None:
        """Sent from the editor: submitted by the prompt, as if typed there (one path to the App)."""
        prompt = self._collapse("")
        prompt.call_later(prompt.submit_text, text)

    def focus_pane(self, pane: str) -> None:
        """F2–F5: the pane's main widget takes the focus (its list or table, once it has one)."""
        widget = self.query_one(f"#{pane}")
        if isinstance(widget, TranscriptPane):
            widget.focus()
        elif isinstance(widget, ContextPane | ApprovalsPane | ArtifactsPane):
            widget.focus_main()

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        """Back from a modal: the prompt, unless the focus was restored to the transcript or the
        approval queue (which keeps it after a decision while calls wait; Esc on its modal sends it to
        the prompt too: ``app.commands.approvals``). A chunk or artifact viewer closed from its side pane
        gives the prompt back: typed text goes there, and Enter does not reopen the viewer."""
        self.call_after_refresh(self._check_focus)

    def _check_focus(self) -> None:
        focused = self.focused
        if focused is None or not focused.is_attached or not _shown(focused):
            self.focus_prompt()
        elif any(self.query_one(f"#{pane}") in focused.ancestors_with_self for pane in ("context", "artifacts")):
            self.focus_prompt()

    @on(ApprovalsPane.Changed)
    def _approvals_changed(self, event: ApprovalsPane.Changed) -> None:
        self.query_one(PaneTabs).show(waiting=event.count)
        if event.count == 0:
            focused = self.focused
            pane = self.query_one(ApprovalsPane)
            if focused is not None and (focused is pane or pane in focused.ancestors):
                self.focus_prompt()  # the queue is done: back to typing
            if self.view == "approvals":
                self.show_view("transcript")  # and, on a narrow screen, to the conversation

    # -- find (Ctrl+F) ---------------------------------------------------------------------------
    def action_find(self) -> None:
        """Ctrl+F: the find bar over the conversation (the transcript comes into view)."""
        self.show_view("transcript")
        self.query_one(FindBar).open()

    @on(FindBar.Search)
    def _find(self, event: FindBar.Search) -> None:
        current, total = self.query_one(TranscriptPane).find(event.query)
        self.query_one(FindBar).show_count(current, total, event.query)

    @on(FindBar.Step)
    def _find_step(self, event: FindBar.Step) -> None:
        bar = self.query_one(FindBar)
        current, total = self.query_one(TranscriptPane).find_step(event.step)
        bar.show_count(current, total, bar.query_one("#find-input", Input).value)

    def action_find_step(self, step: int) -> None:
        """``n`` / ``N`` outside an input while the find bar is open: the next / previous match."""
        self.post_message(FindBar.Step(step))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.query_one(FindBar).is_open if action == "find_step" else True

    @on(FindBar.Leave)
    def _find_leave(self) -> None:
        self.query_one(TranscriptPane).focus()

    @on(FindBar.Closed)
    def _find_closed(self) -> None:
        self.query_one(TranscriptPane).find_clear()
        self.query_one(FindBar).close()
        self.focus_prompt()

    # -- completion and the palette --------------------------------------------------------------
    def _complete(self, line: str) -> tuple[str, list[str]]:
        """Tab: a slash command's words, or the ``@path`` being typed (files under the policy's roots)."""
        head, _, word = line.rpartition(" ")
        if not word.startswith("@"):
            from widgets.commands import complete

            commands = getattr(self.app, "commands", None)  # the App's registry: run-time commands too
            if commands is None:
                return complete(line)
            return complete(line, commands.registry.specs(), commands.complete_values)
        session = getattr(self.app, "session", None)
        if session is None:
            return line, []
        from services.assistant.attachments import complete_mention

        try:
            roots = list(session.gateway().bound.roots)
        except Exception:  # a policy that does not load: nothing to complete (the turn says why)
            return line, []
        return f"{head} @" if head else "@", complete_mention(roots, word[1:])

    @on(PromptInput.Candidates)
    def _candidates(self, event: PromptInput.Candidates) -> None:
        hint = self.query_one("#completions", Static)
        if not event.candidates:
            hint.display = False
            return
        from rich.text import Text

        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("Tab: ", style="dim")
        for number, candidate in enumerate(event.candidates):
            style = "reverse bold" if number == event.current else "bold"
            text.append(clean(candidate, single_line=True), style=style)
            text.append("  ")
        hint.update(text)
        hint.display = True

    @on(SlashCommand)
    def _slash_command(self, event: SlashCommand) -> None:
        prompt = self.query_one(PromptInput)
        prompt.value = event.line if event.run else f"{event.line.rstrip()} "
        prompt.cursor_position = len(prompt.value)
        prompt.focus()
        if event.run:  # submitted from the prompt's own context, so that it is the message's sender
            prompt.call_later(prompt.action_submit)

    @property
    def run_status(self) -> RunStatus:
        return self.query_one(RunStatus)


def _command_names() -> list[str]:
    """The slash commands the prompt suggests (the grammar is imported when the first ``/`` is typed)."""
    from widgets.commands import suggestions

    return suggestions()


def _shown(widget: Widget) -> bool:
    """True when ``widget`` and all its ancestors are displayed."""
    node: Any = widget
    while node is not None:
        if getattr(node, "display", True) is False:
            return False
        node = node.parent
    return True
