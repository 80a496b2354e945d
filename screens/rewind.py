"""The rewind's one approval: every file it puts back, each file changed outside Aries with its diff,
and the shell and MCP calls it cannot undo — before anything changes (``/rewind N|NAME``).

Dismissed with ``"rewind"`` (the files as listed, those changed outside Aries left as they are),
``"include"`` (those overwritten too; offered only when there are some) or ``None`` (nothing changes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from widgets.safe import plain

if TYPE_CHECKING:
    from services.session.rewind import RewindPlan


class RewindScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    RewindScreen { align: center middle; }
    RewindScreen #rewind {
        width: 94%; max-width: 110; height: auto; max-height: 100%;
        border: thick $warning; background: $surface; padding: 0 1;
    }
    RewindScreen #rewind-title { dock: top; height: auto; text-style: bold; }
    RewindScreen #rewind-body { height: auto; max-height: 100%; padding: 1 0; }
    RewindScreen #rewind-keys { dock: bottom; height: 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer('rewind')", "Rewind", id="rewind.yes", tooltip="Rewind as listed"),
        Binding(
            "i", "answer('include')", "Include changed", id="rewind.include",
            tooltip="Also overwrite the files changed outside Aries",
        ),
        Binding("n,escape", "answer(None)", "Cancel", id="rewind.no", tooltip="Change nothing"),
    ]  # fmt: skip

    def __init__(self, plan: RewindPlan) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> Any:
        plan = self.plan
        lines = plan.lines()
        for change in plan.changed:
            lines += ["", f"{change.rel} changed outside Aries since (left unless i):", change.diff.rstrip("\n")]
        keys = "y rewind  ·  " + ("i include changed files  ·  " if plan.changed else "") + "n / Esc cancel"
        with Vertical(id="rewind"):
            yield Static(plain(lines[0]), id="rewind-title")
            with VerticalScroll(id="rewind-body"):
                yield Static(plain("\n".join(lines[1:])), id="rewind-detail")
            yield Static(keys, id="rewind-keys", markup=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "answer" and parameters == ("include",):
            return bool(self.plan.changed)
        return True

    def action_answer(self, answer: str | None) -> None:
        self.dismiss(answer)
