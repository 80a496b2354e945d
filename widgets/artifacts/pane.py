"""The Artifacts pane: the workspace's registry, with a preview of the highlighted text artifact.

Tool calls keep their outputs here (fetched bodies, extracted text, file snapshots and diffs, see
``services.tools.snapshots``); after a write, patch or undo the pane highlights the call's diff.
It follows the active session's signals (``widgets.signals``), subscribed when mounted, and loads the
registry again when the session is shown, when what is in force changes, or when a call kept artifacts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.containers import Vertical, VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from widgets.messages import ArtifactsChanged, SessionChanged
from widgets.safe import clean, plain
from widgets.signals import SessionSignals, follow_sessions

if TYPE_CHECKING:
    from services.workspace.artifacts import Artifact, ArtifactRegistry

PREVIEW_BYTES = 16 * 1024


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def preview_text(registry: ArtifactRegistry, artifact: Artifact, variables: Mapping[str, str] | None = None) -> Text:
    """The artifact's header and its first bytes; a diff coloured in the theme in force (``variables``),
    each line keeping its ``+``/``-``/``@@``."""
    from services.workspace.artifacts import is_text_mime

    header = Text()
    header.append(clean(artifact.name, single_line=True), style="bold")
    header.append(
        clean(f"  {artifact.mime_type}  {human_size(artifact.size_bytes)}  {artifact.hash[:19]}…", single_line=True),
        style="dim",
    )
    if artifact.description:
        header.append(f"\n{clean(artifact.description)}", style="italic")
    if not is_text_mime(artifact.mime_type):
        return Text.assemble(header, "\n\n", Text("(binary content: no preview)", style="dim"))
    try:
        data = registry.read_bytes(artifact, PREVIEW_BYTES)
    except OSError as exc:
        return Text.assemble(header, "\n\n", plain(f"cannot read the stored object: {exc}", "red"))
    body = data.decode("utf-8", errors="replace")
    more = "" if artifact.size_bytes <= PREVIEW_BYTES else f"\n… ({human_size(artifact.size_bytes)} in all)"
    if artifact.provenance.get("role") == "diff" or artifact.name.endswith((".diff", ".patch")):
        from widgets.transcript.tool_call import diff_text

        return Text.assemble(header, "\n\n", diff_text(body.splitlines(), variables), Text(more, style="dim"))
    return Text.assemble(header, "\n\n", plain(body), Text(more, style="dim"))


class ArtifactsPane(Vertical):
    BORDER_TITLE = "Artifacts"
    can_focus = True

    DEFAULT_CSS = """
    ArtifactsPane.-has-items #artifacts-empty { display: none; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._registry: ArtifactRegistry | None = None
        self._artifacts: dict[str, Artifact] = {}

    def compose(self) -> Any:
        yield Static(
            "No artifacts yet. /artifact add PATH adds one.", id="artifacts-empty", classes="empty", markup=False
        )

    def focus_main(self) -> None:
        lists = self.query(OptionList)
        if lists:
            lists.first().focus()
        else:
            self.focus()

    def _ensure_list(self) -> OptionList:
        """The list and preview are mounted on first use: an empty pane starts faster."""
        lists = self.query(OptionList)
        if lists:
            return lists.first(OptionList)
        options = OptionList(id="artifacts-list")
        self.mount(
            options, VerticalScroll(Static("", id="artifact-preview", markup=False), id="artifact-preview-scroll")
        )
        return options

    def load(self, registry: ArtifactRegistry, *, select: str | None = None) -> None:
        self._registry = registry
        artifacts = registry.list()
        self._artifacts = {a.id: a for a in artifacts}
        if not artifacts and not self.query(OptionList):
            self.border_subtitle = ""
            return
        options = self._ensure_list()
        options.clear_options()
        names = Counter(a.name for a in artifacts)
        for artifact in artifacts:
            label = Text.assemble(
                (clean(artifact.name, single_line=True), "bold"), f"  {human_size(artifact.size_bytes)}", style=""
            )
            if names[artifact.name] > 1:  # the diffs of two writes of one file: told apart by time and id
                label.append(f"  {artifact.created_at[11:19]}Z {artifact.id[:6]}", style="dim")
            options.add_option(Option(label, id=artifact.id))
        self.set_class(bool(artifacts), "-has-items")
        self.border_subtitle = f"{len(artifacts)} item{'s' if len(artifacts) != 1 else ''}" if artifacts else ""
        if artifacts:
            ids = [a.id for a in artifacts]
            options.highlighted = ids.index(select) if select is not None and select in ids else len(ids) - 1
        else:
            self.query_one("#artifact-preview", Static).update("")
        options.display = bool(artifacts)
        self.query_one("#artifact-preview-scroll").display = bool(artifacts)

    def on_mount(self) -> None:
        follow_sessions(self, self._session_opened)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, _theme: object = None) -> None:
        """A diff's colours, again in the theme now in force."""
        lists = self.query(OptionList)
        if lists and (option := lists.first(OptionList).highlighted_option) is not None:
            self._preview(option.id)

    def _session_opened(self, signals: SessionSignals) -> None:
        signals.changed.subscribe(self, self._session_changed)
        signals.artifacts.subscribe(self, self._artifacts_changed)
        self.load(signals.session.workspace.artifacts)

    def _session_changed(self, message: SessionChanged) -> None:
        self.load(message.session.workspace.artifacts)

    def _artifacts_changed(self, message: ArtifactsChanged) -> None:
        self.load(message.session.workspace.artifacts, select=message.select)

    @on(OptionList.OptionHighlighted, "#artifacts-list")
    def _show_preview(self, event: OptionList.OptionHighlighted) -> None:
        self._preview(event.option.id)

    def _preview(self, artifact_id: str | None) -> None:
        artifact = self._artifacts.get(artifact_id or "")
        if artifact is None or self._registry is None:
            return
        preview = preview_text(self._registry, artifact, self.app.theme_variables)
        self.query_one("#artifact-preview", Static).update(preview)
