"""The marks under an answer: each sentence that cites a passage (or states a fact citing none) with
its verdict, as a symbol and a word coloured from the theme (never colour alone).

One row per marked sentence: ``✓ supported`` / ``~ weak`` / ``✗ unsupported`` / ``? invented`` /
``! uncited``, the start of the sentence and the handle it cites. A row takes the focus (Tab from
the answer); Enter opens the cited chunk with the supporting span highlighted, through the same
message as a citation link (``aries-chunk:<handle>#<start>-<end>``, handled by the App). The rows
come from the checks recorded with the answer (:class:`services.assistant.citation_turn.CitationChecks`),
so a restored conversation shows the same marks.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Markdown, Static

from widgets.safe import clip

if TYPE_CHECKING:
    from services.assistant.citation_turn import CitationChecks, CitedMark, SentenceMark

CHUNK_SCHEME = "aries-chunk:"
MARKS = {
    "supported": "✓ supported",
    "weak": "~ weak",
    "unsupported": "✗ unsupported",
    "invented": "? invented",
    "uncited": "! uncited",
}
LEGEND = (
    "citations checked by word overlap{vectors}: supported = grounded in the passage, not proven true; "
    "overlap cannot see negation · Enter shows the span"
)


def chunk_href(handle: str, mark: CitedMark | None) -> str:
    """The link that opens ``handle``'s chunk, with the supporting span when the check found one."""
    if mark is not None and mark.span is not None:
        return f"{CHUNK_SCHEME}{handle}#{mark.span[0]}-{mark.span[1]}"
    return f"{CHUNK_SCHEME}{handle}"


def _without_handles(text: str, sentence: SentenceMark) -> str:
    """The sentence as read: its cited handles (and their brackets) and its emphasis marks taken out."""
    for citation in sentence.citations:
        text = re.sub(rf"\s*[\[(]?\s*{re.escape(citation.handle)}\s*[\])]?", "", text)
    text = re.sub(r"\*\*|__|`", "", text)
    return re.sub(r"(?<![\w*])[*_](\S(?:[^*_]*\S)?)[*_](?![\w*])", r"\1", text)


class SentenceMarkRow(Static):
    """One marked sentence: focusable; Enter (or a click) opens the cited chunk at the supporting span."""

    DEFAULT_CSS = """
    SentenceMarkRow { height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    SentenceMarkRow.-supported { color: $text-success; }
    SentenceMarkRow.-weak { color: $text-warning; }
    SentenceMarkRow.-unsupported, SentenceMarkRow.-invented { color: $text-error; }
    SentenceMarkRow.-uncited { color: $text-muted; }
    SentenceMarkRow:focus { background: $accent 30%; text-style: bold; }
    """
    can_focus = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "open",
            "Show span",
            id="citation.span",
            tooltip="Open the cited chunk, the supporting span highlighted",
        ),
    ]

    def __init__(self, answer: str, sentence: SentenceMark, markdown: Markdown) -> None:
        self.sentence = sentence
        self.mark = sentence.best()
        self._markdown = markdown
        line = Text.assemble((f"{MARKS.get(sentence.verdict, sentence.verdict):<13}", "bold"), " ")
        if self.mark is not None:
            line.append(f"{clip(self.mark.handle, 40)}  ")
        line.append(clip(_without_handles(answer[sentence.start : sentence.end], sentence), 200))
        super().__init__(line, markup=False, classes=f"-{sentence.verdict}")

    def action_open(self) -> None:
        if self.mark is not None and self.mark.verdict != "invented":
            self._markdown.post_message(Markdown.LinkClicked(self._markdown, chunk_href(self.mark.handle, self.mark)))
        elif self.mark is not None:
            handle = clip(self.mark.handle, 60)
            self.notify(f"{handle} was not given to the model in this turn: there is no passage to show", markup=False)
        else:
            self.notify("This sentence states a number, a name or a date and cites no passage.")

    def on_click(self) -> None:
        self.action_open()


class CitationMarks(Vertical):
    """The marks of one answer (see the module docstring)."""

    DEFAULT_CSS = """
    CitationMarks { height: auto; margin: 0 0 0 0; }
    CitationMarks .marks-legend { color: $text-muted; padding: 0 1; }
    """

    def __init__(self, answer: str, checks: CitationChecks, markdown: Markdown) -> None:
        super().__init__(classes="citation-marks")
        self._rows = [SentenceMarkRow(answer, sentence, markdown) for sentence in checks.sentences]
        vectors = " and meaning" if checks.method != "overlap" else ""
        self._legend = Static(LEGEND.format(vectors=vectors), classes="marks-legend", markup=False)

    def compose(self) -> Any:
        yield from self._rows
        yield self._legend
