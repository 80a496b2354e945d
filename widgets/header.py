"""The header: the title and what is in force (workspace, profile, model, approval mode), one line.

Values arrive from the App (``subtitle(...)`` builds the line from only the values it is given:
nothing is shown for what is not in force). The line is rendered as plain, neutralised text. Where it
does not fit (80 columns) the header shows its compact form (``compact``: the values without their
labels, ``demo · default · offline · guide · default policy``); then the policy file goes, a long
model name is cut in its middle, the profile goes (``fit``); only what still does not fit is cut, with
an ellipsis.

After each model request the line starts with the context meter (``ctx 1,420/2,048``, from the
request's :class:`~services.models.window_budget.ContextBreakdown`): first, so that 80 columns keep it;
coloured as the window fills and, past 75 % of the prompt's room, with a word as well (``high``,
``full``), never colour alone.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from textual.content import Content
from textual.widgets import Header

from widgets.safe import clean

if TYPE_CHECKING:
    from services.session.session import Session


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


LABELS = ("workspace ", "profile ", "model ")
HEADER_MARGIN = 18
"""Columns of the header that the title cannot use: the icon (8) on the left, the clock space (10) on the right."""


def compact(line: str) -> str:
    """The header line without its labels: ``workspace demo · model x · approvals guide`` →
    ``demo · x · guide``; ``workspace policy`` → ``ws policy``."""
    parts = []
    for part in line.split(" · "):
        label = next((label for label in LABELS if part.startswith(label) and part != "workspace policy"), "")
        if label:
            part = part.removeprefix(label)
        elif part.startswith("approvals "):
            part = part.removeprefix("approvals ")  # guide, commander, strict: distinct without their label
        elif part == "workspace policy":
            part = "ws policy"
        parts.append(part)
    return " · ".join(parts)


def _cut_model(parts: list[str], room: int, least: int) -> None:
    """The ``model …`` part cut in its middle (``ollama:qwen2.5-cod…ong-tag``) until the compact line
    fits ``room``, keeping at least ``least`` characters of the name."""
    models = [i for i, part in enumerate(parts) if part.startswith("model ")]
    over = len(compact(" · ".join(parts))) - room
    if over <= 0 or not models:
        return
    model = parts[models[0]].removeprefix("model ")
    keep = max(len(model) - over - 1, least)
    if keep < len(model):
        head = keep * 2 // 3  # the provider and the model's family; the tag's end
        parts[models[0]] = "model " + model[:head] + "…" + model[len(model) - (keep - head) :]


def fit(line: str, room: int) -> str:
    """``line`` (labelled) in at most ``room`` columns: its compact form; then the policy and the web
    viewer left out (``/policy`` and ``/serve`` name them); then the model's name cut in its middle,
    then the profile left out (``/profile`` names it) and the name cut further. The meter (first) and
    the approval mode stay whole; only what still does not fit is cut later, with an ellipsis."""
    if len(line) <= room:
        return line
    parts = line.split(" · ")
    while len(compact(" · ".join(parts))) > room and parts and not parts[-1].startswith("approvals "):
        parts.pop()
    cut = list(parts)
    _cut_model(cut, room, 16)
    if len(compact(" · ".join(cut))) > room:
        cut = [part for part in parts if not part.startswith("profile ")]
        _cut_model(cut, room, 8)
    return compact(" · ".join(cut))


def session_line(session: Session, model: str, serving: str = "", meter: str = "") -> str:
    """The App's subtitle: the context meter of the last request (``meter``, when one was sent), what
    ``session`` has in force (workspace, profile, ``model``, approval mode, policy file) and, while it
    runs, where the web viewer serves (``serving``)."""
    policy = "workspace policy" if session.policy_path is not None else "default policy"
    profile = session.profile_name + (" (broken)" if session.profile_broken else "")
    name = session.workspace.name + (f" ({session.trust.label}: /trust)" if session.trust.needs_review else "")
    line = subtitle(workspace=name, profile=profile, model=model, mode=session.mode)
    line = f"{meter} · {line}" if meter else line
    return f"{line} · {policy}" + (f" · {serving}" if serving else "")


METER = re.compile(r"^ctx [\d,]+/[\d,]+(?: (high|full))?(?= · |$)")
METER_STYLES = {None: "", "high": "bold $warning", "full": "bold $error"}
"""The meter at the start of the line, and its style by the word it carries."""


def meter_style(sub: Content) -> Content:
    """``sub`` with its leading context meter coloured by its level (unchanged without one)."""
    found = METER.match(sub.plain)
    style = METER_STYLES[found.group(1)] if found else ""
    return sub.stylize(style, 0, found.end()) if found and style else sub


class WorkbenchHeader(Header):
    """Textual's header, with the title and subtitle neutralised (never markup) and cut to one line."""

    def format_title(self) -> Content:
        title = Content(clean(self.screen_title, single_line=True))
        sub = Content(clean(self.screen_sub_title, single_line=True))
        if not sub:
            return title
        room = self.size.width - HEADER_MARGIN - title.cell_length - 3
        if self.size.width and sub.cell_length > room:
            sub = Content(fit(clean(self.screen_sub_title, single_line=True), room))
        return Content.assemble(title, (" — ", "dim"), meter_style(sub.stylize("dim")))

    def on_resize(self) -> None:
        for title in self.query("HeaderTitle"):
            title.update(self.format_title())  # type: ignore[attr-defined]
