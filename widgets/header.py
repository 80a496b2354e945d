"""The header: the title and what is in force (workspace, profile, model, approval mode), one line.

Values arrive from the App (``subtitle(...)`` builds the line from only the values it is given:
nothing is shown for what is not in force). The line is rendered as plain, neutralised text and is
cut with an ellipsis when the terminal is narrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content
from textual.widgets import Header

from widgets.safe import clean

if TYPE_CHECKING:
    from services.session import Session


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


def session_line(session: Session, model: str, serving: str = "") -> str:
    """The App's subtitle: what ``session`` has in force (workspace, profile, ``model``, approval mode,
    policy file) and, while it runs, where the web viewer serves (``serving``)."""
    policy = "workspace policy" if session.policy_path is not None else "default policy"
    profile = session.profile_name + (" (broken)" if session.profile_broken else "")
    name = session.workspace.name + (f" ({session.trust.label}: /trust)" if session.trust.needs_review else "")
    line = subtitle(workspace=name, profile=profile, model=model, mode=session.mode)
    return f"{line} · {policy}" + (f" · {serving}" if serving else "")


class WorkbenchHeader(Header):
    """Textual's header, with the title and subtitle neutralised (never markup) and cut to one line."""

    def format_title(self) -> Content:
        title = Content(clean(self.screen_title, single_line=True))
        sub = Content(clean(self.screen_sub_title, single_line=True))
        if not sub:
            return title
        return Content.assemble(title, (" — ", "dim"), sub.stylize("dim"))
