"""The workspace switcher: a modal with a fuzzy filter. Enter opens; Ctrl+N creates."""

from __future__ import annotations

from typing import Any, ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.fuzzy import Matcher
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from widgets.safe import clean, plain


class WorkspaceSwitcher(ModalScreen[tuple[str, str] | None]):
    """Dismisses with ``("open", name)``, ``("new", name)`` or ``None`` when cancelled."""

    CSS_PATH = "workspace_switcher.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="switcher.cancel", tooltip="Close the switcher, change nothing"),
        Binding(
            "ctrl+n",
            "create",
            "New workspace",
            id="switcher.new",
            tooltip="Create a workspace named after the filter text and open it",
        ),
        Binding("down", "cursor_down", "Next", show=False, id="switcher.down", tooltip="Highlight the next"),
        Binding("up", "cursor_up", "Previous", show=False, id="switcher.up", tooltip="Highlight the previous"),
    ]

    def __init__(self, names: list[str], current: str, trust: dict[str, str] | None = None) -> None:
        super().__init__()
        self.names = names
        self.current = current
        self.trust = trust or {}  # name → "untrusted" | "changed" for those that need a review

    def compose(self) -> Any:
        with Vertical(id="switcher"):
            yield Static("Switch workspace", id="switcher-title", markup=False)
            yield Input(placeholder="Filter, or a new name for Ctrl+N", id="switcher-filter")
            yield OptionList(id="switcher-list")
            yield Static("", id="switcher-error")
            yield Static(
                "Enter open  ·  Ctrl+N create from the filter text  ·  Esc cancel", id="switcher-help", markup=False
            )

    def on_mount(self) -> None:
        self._refilter("")
        self.query_one(Input).focus()

    def _refilter(self, query: str) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        if query:
            matcher = Matcher(query)
            scored = [(matcher.match(name), name) for name in self.names]
            ranked = [name for score, name in sorted(scored, key=lambda pair: (-pair[0], pair[1])) if score > 0]
        else:
            ranked = list(self.names)
            matcher = None
        for name in ranked:
            shown = clean(name, single_line=True)
            label = matcher.highlight(shown) if matcher else Content(shown)
            if name == self.current:
                label = Content.assemble(label, ("  (current)", "dim"))
            if self.trust.get(name):  # a word, not a colour alone: its settings wait for a review
                label = Content.assemble(label, (f"  {self.trust[name]}: review with /trust", "$warning"))
            options.add_option(Option(label, id=name))
        if ranked:
            options.highlighted = 0
        self.query_one("#switcher-error", Static).update(
            plain("" if ranked or not query else f"No workspace matches {query!r}: Ctrl+N creates it.")
        )

    @on(Input.Changed, "#switcher-filter")
    def _changed(self, event: Input.Changed) -> None:
        self._refilter(event.value.strip())

    @on(Input.Submitted, "#switcher-filter")
    def _submitted(self) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is None:
            self.query_one("#switcher-error", Static).update("Nothing to open: type a name and press Ctrl+N.")
            return
        option = options.get_option_at_index(options.highlighted)
        self.dismiss(("open", option.id or ""))

    @on(OptionList.OptionSelected, "#switcher-list")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(("open", event.option.id or ""))

    def action_cursor_down(self) -> None:
        self.query_one(OptionList).action_cursor_down()

    def action_cursor_up(self) -> None:
        self.query_one(OptionList).action_cursor_up()

    def action_create(self) -> None:
        from services.errors import InvalidName
        from services.text.names import validate_name

        name = self.query_one(Input).value.strip()
        try:
            validate_name(name)
        except InvalidName as exc:
            self.query_one("#switcher-error", Static).update(plain(str(exc), "red"))
            return
        self.dismiss(("new", name))

    def action_cancel(self) -> None:
        self.dismiss(None)
