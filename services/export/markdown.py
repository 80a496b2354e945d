"""An export as Markdown: Aries' own words are the only markup.

What came from the conversation is never read as Markdown or HTML by a renderer: a message, an
answer, a call's arguments or result and a cited passage are fenced code blocks (a backtick fence
longer than any run of backticks in the text, so no line of it can close the block); a one-line
value (a time, a tool id, a rule, a source) is a code span (delimited the same way); a sentence of
Aries' that names a value (a citation's note) has every character that could start markup
backslash-escaped. So a hostile answer's ``<script>``, ``<img src=…>``, ``[link](javascript:…)`` or
``![pixel](http://…)`` shows as the text it is, in CommonMark and GitHub's renderer alike. The texts
come made safe by :mod:`services.export.document` (secrets redacted, controls shown as escapes).
"""

from __future__ import annotations

import re

from services.export.document import Body, Citation, Entry, ExportDocument, Field

_TICKS = re.compile(r"`+")
_PROSE = re.compile(r"([\\`*_\[\]<>&!|~#])")


def _longest_run(text: str) -> int:
    return max((len(run) for run in _TICKS.findall(text)), default=0)


def fence(text: str, language: str = "text") -> str:
    marks = "`" * max(3, _longest_run(text) + 1)
    return f"{marks}{language}\n{text}\n{marks}"


def code(value: str) -> str:
    """``value`` as a code span (one line): literal in every renderer."""
    if not value:
        return "—"
    marks = "`" * (_longest_run(value) + 1)
    pad = " " if value[0] in "` " or value[-1] in "` " else ""  # CommonMark takes one space off each side
    return f"{marks}{pad}{value}{pad}{marks}"


def prose(text: str) -> str:
    """A sentence of Aries' with values in it: every character that could begin markup escaped."""
    return _PROSE.sub(r"\\\1", text)


def _fields(fields: tuple[Field, ...]) -> list[str]:
    return [f"- **{field.label}:** {code(field.value)}" for field in fields]


def _body(body: Body) -> list[str]:
    lines = [f"**{body.label}:**", ""] if body.label else []
    return [*lines, fence(body.text, body.language), ""]


def _citation(citation: Citation) -> list[str]:
    source = f" — {code(citation.source)}" if citation.source else ""
    lines = [f"**[{citation.number}]** {code(citation.handle)}{source}: {prose(citation.note)}.", ""]
    if citation.text is not None:
        lines += [fence(citation.text), ""]
    return lines


def _entry(entry: Entry) -> list[str]:
    detail = f" — {code(entry.detail)}" if entry.detail else ""
    lines = [f"### {entry.heading}{detail}", "", *_fields(entry.fields), ""]
    for body in entry.bodies:
        lines += _body(body)
    if entry.citations:
        lines += ["**Citations:**", ""]
        for citation in entry.citations:
            lines += _citation(citation)
    return lines


def render(document: ExportDocument) -> bytes:
    lines = [f"# Conversation {code(document.conversation_id)}", "", *_fields(document.fields), ""]
    lines += "\n>\n".join(f"> {prose(note)}" for note in document.notes).split("\n")
    lines.append("")
    for part in document.parts:
        lines += [f"## {part.heading}", ""]
        for entry in part.entries:
            lines += _entry(entry)
    text = "\n".join(lines).rstrip("\n") + "\n"
    return text.encode("utf-8")


__all__ = ["code", "fence", "prose", "render"]
