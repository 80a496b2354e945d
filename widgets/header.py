"""The header: the title and what is in force (workspace, profile, model, approval mode), one line.

Values arrive from the App (``subtitle(...)`` builds the line from only the values it is given:
nothing is shown for what is not in force). The line is rendered as plain, neutralised text and is
cut with an ellipsis when the terminal is narrow.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Header

from widgets.safe import clean


def subtitle(
    *,
    workspace: str | None = None,
    profile: str | None = None,
    model: str | None = None,
    mode: str | None = None,
) -> str:
    """``workspace demo · model ollama:llama3 · approvals guide``, leaving out what is None or empty."""
    parts = [
        ("workspace", workspace),
        ("profile", profile),
        ("model", model),
        ("approvals", mode),
    ]
    return " · ".join(f"{label} {clean(value, single_line=True)}" for label, value in parts if value)


class WorkbenchHeader(Header):
    """Textual's header, with the title and subtitle neutralised (never markup) and cut to one line."""

    def format_title(self) -> Content:
        title = Content(clean(self.screen_title, single_line=True))
        sub = Content(clean(self.screen_sub_title, single_line=True))
        if not sub:
            return title
        return Content.assemble(title, (" — ", "dim"), sub.stylize("dim"))
