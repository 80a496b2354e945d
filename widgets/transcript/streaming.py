"""The answer being streamed: Markdown that grows token by token, then a usage line.

Mounted by the App at the end of the Transcript pane when a turn starts streaming; it stays as
the turn's rendering once done (the recorded answer is the same text). Citation handles become
links (``aries-chunk:<handle>``) that open the chunk, and, below the answer, a row of them that
takes the focus (Tab from the transcript; Enter opens the chunk — a click on the link does the same).
Text is neutralised before it is shown.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Markdown, Static

from services.text.textsafe import neutralize
from widgets.transcript.citation_marks import CHUNK_SCHEME, CitationMarks, chunk_href

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

    from services.assistant.citation_turn import CitationChecks


def answer_parser() -> MarkdownIt:
    """CommonMark + GFM tables, with raw HTML and entities off: a model's ``<<SYS>>``,
    ``<start_of_turn>``, ``<b>`` or ``&amp;`` is text it wrote and is shown as such (the default
    parser would drop the tags and decode the entities)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("gfm-like", {"html": False}).disable("entity")


def link_citations(text: str, handles: list[str]) -> str:
    """Markdown with each known handle turned into a link that opens its chunk."""
    for handle in sorted(set(handles), key=len, reverse=True):
        pattern = re.compile(rf"(?<![\w:/-]){re.escape(handle)}(?![\w-])")
        text = pattern.sub(f"[{handle}](<{CHUNK_SCHEME}{handle}>)", text)
    return text


class CitationLink(Static):
    """One cited handle under an answer: focusable; Enter (or a click) opens its chunk, through the
    same message as a click on the link in the answer (``Markdown.LinkClicked``, handled by the App)."""

    DEFAULT_CSS = """
    CitationLink { width: auto; padding: 0 1; margin: 0 1 0 0; color: $text-accent; text-style: underline; }
    CitationLink:focus { background: $accent 40%; text-style: bold underline; }
    """
    can_focus = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open chunk", id="citation.open", tooltip="Open the cited chunk in the chunk viewer"),
    ]

    def __init__(self, handle: str, markdown: Markdown, checks: CitationChecks | None = None) -> None:
        super().__init__(Text(neutralize(handle, single_line=True)), markup=False)
        self.handle = handle
        self._markdown = markdown
        self.href = chunk_href(handle, checks.for_handle(handle) if checks is not None else None)

    def action_open(self) -> None:
        self._markdown.post_message(Markdown.LinkClicked(self._markdown, self.href))

    def on_click(self) -> None:
        self.action_open()


class StreamingAnswer(Vertical):
    DEFAULT_CSS = """
    StreamingAnswer { height: auto; margin: 0 0 1 0; padding: 0 1; border-left: wide $secondary; }
    StreamingAnswer #stream-label { color: $secondary; text-style: bold; }
    StreamingAnswer #stream-usage { color: $text-muted; }
    StreamingAnswer Markdown { margin: 0; padding: 0; }
    StreamingAnswer .citations { height: 1; }
    StreamingAnswer .citations-label { width: auto; color: $text-muted; }
    """

    def __init__(self, turn_id: str, model: str) -> None:
        super().__init__(classes="-assistant")
        self.turn_id = turn_id
        self.model = model
        self.text = ""
        self._label = Static(Text(f"assistant  {neutralize(model, single_line=True)}  streaming…"), id="stream-label")
        # citation links are handled by the App
        self._markdown = Markdown("", open_links=False, parser_factory=answer_parser)
        self._usage = Static("", id="stream-usage")
        self._stream: Any = None

    def compose(self) -> Any:
        yield self._label
        yield self._markdown
        yield self._usage

    async def write(self, delta: str) -> None:
        self.text += delta
        if self._stream is None:
            self._stream = Markdown.get_stream(self._markdown)
        await self._stream.write(neutralize(delta))

    async def finish(
        self,
        text: str,
        citations: list[str],
        usage: dict[str, Any] | None,
        state: str = "done",
        checks: dict[str, Any] | None = None,
    ) -> None:
        """The answer as it ended: its Markdown with the citation links, the row of cited handles, the
        marks of its checked sentences (``checks`` as recorded), the label's state and the usage line."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.text = text or self.text
        await self._markdown.update(link_citations(neutralize(self.text), citations))
        read = _read_checks(checks)
        handles = list(dict.fromkeys(citations))
        if handles and not self.query(".citations"):
            row = Horizontal(
                Static("cited (Tab, Enter opens):", classes="citations-label", markup=False),
                *[CitationLink(handle, self._markdown, read) for handle in handles],
                classes="citations",
            )
            await self.mount(row, before=self._usage)
        if read is not None and read.sentences and not self.query(".citation-marks"):
            await self.mount(CitationMarks(self.text, read, self._markdown), before=self._usage)
        self._label.update(Text(f"assistant  {neutralize(self.model, single_line=True)}  {state}"))
        if usage:
            tokens_in = f"{usage.get('prompt_tokens', 0)} tokens in"
            if not usage.get("prompt_tokens") and usage.get("prompt_tokens_estimated"):
                tokens_in = f"≈{usage['prompt_tokens_estimated']} tokens in (estimated: the server did not count)"
            out = usage.get("completion_tokens_estimated") or usage.get("completion_tokens") or 0
            tokens_out = f"{'≈' if usage.get('completion_tokens_estimated') else ''}{out} out"
            if out and usage.get("generating_ms", 0) >= 100:  # the rate while the answer streamed (not the prompt)
                tokens_out += f" · {out / (usage['generating_ms'] / 1000):.1f} tok/s"
            self._usage.update(
                Text(
                    f"{tokens_in} · {tokens_out} · "
                    f"{usage.get('elapsed_ms', 0) / 1000:.1f} s · {usage.get('steps', 0)} step(s)"
                )
            )


class RecordedAnswer(StreamingAnswer):
    """A recorded answer (``--continue``, ``/resume``, ``/fork``, a pane shown afresh) rendered as the
    streamed one was when its turn ended: Markdown, its citation links and row, its usage line; the label
    gives the time it was written. The find bar's highlight shows the text plainly, matches marked."""

    def __init__(self, entry: dict[str, Any]) -> None:
        super().__init__(str(entry.get("turn_id") or ""), str(entry.get("model") or entry.get("provider") or "?"))
        self.entry = entry
        self.text = str(entry.get("content", ""))
        self._stamp = neutralize(str(entry.get("timestamp", ""))[11:19], single_line=True)
        self._found = Static("", classes="found", markup=False)
        self._found.display = False

    def compose(self) -> Any:
        yield self._label
        yield self._markdown
        yield self._found
        yield self._usage

    async def on_mount(self) -> None:
        citations = self.entry.get("citations")
        usage = self.entry.get("usage")
        await self.finish(
            self.text,
            [str(handle) for handle in citations] if isinstance(citations, list) else [],
            usage if isinstance(usage, dict) else None,
            checks=self.entry.get("checks"),
        )
        self._label.update(Text(f"assistant  {neutralize(self.model, single_line=True)}  {self._stamp}"))

    def highlight(self, query: str) -> None:
        """Show ``query`` highlighted (the text plainly, in place of the Markdown); none: the Markdown again."""
        if query:
            text = Text(neutralize(self.text))
            text.highlight_regex(re.compile(re.escape(query), re.IGNORECASE), style="black on yellow")
            self._found.update(text)
        self._found.display = bool(query)
        self._markdown.display = not query


def _read_checks(value: dict[str, Any] | None) -> CitationChecks | None:
    if value is None:  # an answer with nothing checked, or recorded before the checks were
        return None
    from services.assistant.citation_turn import read_checks

    return read_checks(value)
