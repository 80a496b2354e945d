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
from typing import TYPE_CHECKING, Any, ClassVar, cast

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
from widgets.transcript.pane import TranscriptPane

if TYPE_CHECKING:
    from widgets.prompt.editor import PromptEditor
    from widgets.transcript.find import FindBar

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
        self.waiting = 0  # calls in the approval queue (the pane strip says how many)
        # The first view's classes, set before the panes mount: set in on_mount, they would restyle
        # every widget once more before the first frame.
        self.add_class("-view-transcript", update=False)
        self.set_class(0 < self.app.size.width < NARROW_WIDTH, "-narrow", update=False)

    def compose(self) -> Any:
        """Each widget costs the first frame (~1.5 ms of CPU): what is hidden there comes on first use —
        the pane strip when the screen is first narrow, the find bar (Ctrl+F), the Tab hint, the
        multi-line editor. The prompt's rows sit on the screen itself, below the workbench."""
        yield WorkbenchHeader(icon="♈")
        if self.narrow:
            yield PaneTabs(self.view, self.waiting, id="tabs")
        with Horizontal(id="workbench"):
            yield TranscriptPane(id="transcript")
            with Vertical(id="side"):
                yield ContextPane(id="context")
                yield ApprovalsPane(id="approvals")
                yield ArtifactsPane(id="artifacts")
        yield RunStatus(id="run-status")  # the find bar (Ctrl+F) and the Tab hint go after it
        yield PromptInput(_command_names, completer=self._complete, id="prompt")
        yield QueuedLines(id="queued")  # lines typed ahead (hidden while none wait)
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
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
        if self.narrow and not self.query("#tabs"):
            self.mount(PaneTabs(self.view, self.waiting, id="tabs"), after=self.query_one(WorkbenchHeader))
        self.show_view(self.view)

    def show_view(self, pane: str) -> None:
        """Bring ``pane`` (one of ``PANE_IDS``) into view; on a wide screen every pane is in view."""
        if pane not in PANE_IDS:
            return
        self.view = pane
        for name in PANE_IDS:
            self.set_class(name == pane, f"-view-{name}")
        for tabs in self.query("#tabs").results(PaneTabs):
            tabs.show(pane)

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

            editor = PromptEditor(completer=self._complete, id="prompt-editor")
            await self.mount(editor, after=self.query_one(PromptInput))
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

    def action_external_editor(self) -> None:
        """Ctrl+G: the draft (the editor's, else the prompt's with its chips expanded) in $VISUAL/$EDITOR;
        what it saves comes back (several lines: in the multi-line editor); a failure keeps the draft."""
        from widgets.prompt.external import edit_in_editor

        editor, prompt = self._editor(), self.query_one(PromptInput)
        draft = editor.text if editor is not None and editor.is_open else prompt.expanded()
        edited = edit_in_editor(self.app, draft)
        if edited.text is None:
            self.notify(edited.problem, title="editor", severity="warning", timeout=6)
        elif "\n" in edited.text.strip("\n"):
            self.post_message(PromptInput.Expand(edited.text))
        else:
            self._collapse(edited.text.strip("\n"))

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
        self.waiting = event.count
        for tabs in self.query("#tabs").results(PaneTabs):
            tabs.show(waiting=event.count)
        if event.count == 0:
            focused = self.focused
            pane = self.query_one(ApprovalsPane)
            if focused is not None and (focused is pane or pane in focused.ancestors):
                self.focus_prompt()  # the queue is done: back to typing
            if self.view == "approvals":
                self.show_view("transcript")  # and, on a narrow screen, to the conversation

    # -- copying a mouse selection (Ctrl+C) ------------------------------------------------------
    def action_copy_text(self) -> None:
        """Ctrl+C: the text selected with the mouse (its source lines: a wrapped paragraph as one line, a
        code block with its indentation), sanitised (``widgets.clipboard``); nothing selected: the quit hint."""
        from textual.actions import SkipAction

        text = self.get_selected_text()
        if not text:
            raise SkipAction()  # on to the App's Ctrl+C: how to quit
        from widgets.clipboard import copy_text

        copy_text(self.app, text, "copy selection")

    # -- find (Ctrl+F; the bar is mounted on first use: it and its input stay out of the first frame) --
    async def action_find(self) -> None:
        """Ctrl+F: the find bar over the conversation (the transcript comes into view). Awaited, so that
        keys typed right after Ctrl+F wait for the bar and go to it."""
        self.show_view("transcript")
        if not self.query("#find"):
            from widgets.transcript.find import FindBar

            await self.mount(FindBar(id="find"), after=self.query_one(RunStatus))
        self._find_bar().open()

    def _find_bar(self) -> FindBar:
        return cast("FindBar", self.query_one("#find"))

    def on_find_bar_search(self, event: FindBar.Search) -> None:
        """(Naming-convention handlers: the bar's module is imported on first use.)"""
        current, total = self.query_one(TranscriptPane).find(event.query)
        self._find_bar().show_count(current, total, event.query)

    def on_find_bar_step(self, event: FindBar.Step) -> None:
        bar = self._find_bar()
        current, total = self.query_one(TranscriptPane).find_step(event.step)
        bar.show_count(current, total, bar.query_one("#find-input", Input).value)

    def action_find_step(self, step: int) -> None:
        """``n`` / ``N`` outside an input while the find bar is open: the next / previous match."""
        from widgets.transcript.find import FindBar

        self.post_message(FindBar.Step(step))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action != "find_step":
            return True
        return bool(self.query("#find")) and self._find_bar().is_open  # the bar is mounted by the first Ctrl+F

    def on_find_bar_leave(self, event: FindBar.Leave) -> None:
        self.query_one(TranscriptPane).focus()

    def on_find_bar_closed(self, event: FindBar.Closed) -> None:
        self.query_one(TranscriptPane).find_clear()
        self._find_bar().close()
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
    async def _candidates(self, event: PromptInput.Candidates) -> None:
        found = list(self.query("#completions").results(Static))
        if not event.candidates:
            for hint in found:
                hint.display = False
            return
        hint = found[0] if found else Static("", id="completions", markup=False)
        if not found:  # the first Tab with candidates: the hint goes above the prompt
            await self.mount(hint, before=self.query_one(PromptInput))
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
