"""The Context pane: the last retrieved or injected set of chunks (``/rag last``), and the earlier turns a
turn brought back (handles ``turn:<conversation>:<n>``, ranked ``↩1``, ``↩2``…).

Each row: rank, citation handle, source and page/section, the fused score, and each retriever's
rank and score (BM25, dense). Enter on a row opens the full chunk with its metadata. While an
index is being built, a progress bar shows the stage and the count.

It follows the active session's signals (``widgets.signals``), subscribed when mounted: a session
shown afresh (its last retrieved set is read in a thread worker just after, never delaying the first
frame), what is in force (the index in use), a retrieved set (a command's or a turn's), an index
build's progress, a dropped index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Label, Static

from widgets.messages import (
    ConversationStarted,
    HitsFound,
    IndexDropped,
    IngestEnded,
    IngestProgress,
    SessionChanged,
    TurnEvent,
)
from widgets.safe import clean, plain
from widgets.signals import Conversational, RetrievalNews, SessionSignals, follow_sessions

if TYPE_CHECKING:
    from textual.widgets import DataTable

    from services.session.session import Session


COLUMNS = ("#", "handle", "source · page/section", "fused", "bm25", "dense")
SOURCE_WIDTH = 20
EMPTY = "Nothing retrieved yet in this workspace."


def _retriever_cell(rank: Any, score: Any) -> Text:
    """``#rank score`` of one retriever, or a dash when it did not return the chunk."""
    if rank is None:
        return Text("—", style="dim")
    shown = f"{score:.3f}" if isinstance(score, int | float) else "?"
    return plain(f"#{rank} {shown}", single_line=True)


def _score(score: Any) -> Text:
    return Text(f"{score:.4f}") if isinstance(score, int | float) else plain(score if score is not None else "?")


def _where(hit: dict[str, Any]) -> str:
    if hit.get("page") is not None:
        return f"p. {hit['page']}"
    section = str(hit.get("section") or "")
    return section.rsplit(" > ", 1)[-1]  # the innermost heading; the full path is in the chunk viewer


def _source_cell(hit: dict[str, Any], width: int = SOURCE_WIDTH) -> Text:
    """``path · section`` in ``width`` cells. What gives way first is the path's folders, from the left
    (``…/approvals/gateway.md``), then the end of the section: the file's name stays whole while it fits."""
    where = _where(hit)
    path = clean(str(hit.get("source_path", "")), single_line=True)
    after = f" · {clean(where, single_line=True)}" if where else ""
    *folders, name = path.split("/")
    tails = ["…/" + "/".join([*folders[len(folders) - keep :], name]) for keep in range(len(folders) - 1, -1, -1)]
    candidates = [path, *tails, name]  # all the folders, then fewer from the left, then the name alone
    shown = next((c for c in candidates if len(c) + len(after) <= width), name)
    text = Text(shown)
    if after:
        text.append(after, style="dim")
    text.truncate(width, overflow="ellipsis")
    return text


def source_width(room: int, cells: list[list[Text]]) -> int:
    """The source column's width in a table ``room`` columns wide: what the other columns (``cells``:
    each row's cells but the source) and the cell padding leave, at least ``SOURCE_WIDTH``."""
    widths = [len(title) for title in COLUMNS if title != COLUMNS[2]]
    for row in cells:
        widths = [max(w, cell.cell_len) for w, cell in zip(widths, row, strict=True)]
    padding = 2 * len(COLUMNS) + 1  # a cell's padding on each side, the scrollbar's column
    return max(SOURCE_WIDTH, room - sum(widths) - padding)


def last_injected(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last retrieval entry of a conversation's turns (the set a turn injected), or None."""
    found = [e for e in entries if e.get("kind") == "retrieval" and e.get("index") is not None and e.get("turn_id")]
    return found[-1] if found else None


class ContextPane(Vertical):
    """Shows an empty state until a result set arrives; the table is mounted on first use."""

    BORDER_TITLE = "Context"
    can_focus = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "open",
            "Open chunk",
            show=False,
            id="context.open",
            tooltip="Open the highlighted chunk with its full text and metadata",
        ),
    ]

    @dataclass
    class ShowChunk(Message):
        """The operator asked for the full chunk behind a handle (of a row that is still current)."""

        handle: str
        workspace: str | None = None
        index: str | None = None

    @dataclass
    class LastRetrieval(Message, bubble=False):
        """The last retrieved set of ``workspace``, read in a thread worker."""

        workspace: str
        record: Any

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's parameter name
        super().__init__(id=id)
        self.workspace: str | None = None  # the workspace the App has open (set_workspace)
        self._rows_workspace: str | None = None  # the workspace the rows shown came from
        self._dropped: set[str] = set()  # indexes dropped since the rows were shown
        self._shown: tuple[str, list[dict[str, Any]]] | None = None  # the caption and hits of the rows

    def on_resize(self) -> None:
        """The source column follows the pane's width (the screen's)."""
        if self._shown is not None and self._shown[1]:
            workspace, dropped = self._rows_workspace, self._dropped
            row = self._table().cursor_row
            self.show_results(*self._shown, workspace=workspace)
            self._dropped = dropped
            self._table().move_cursor(row=row)

    def compose(self) -> Any:
        yield Static(EMPTY, id="context-empty", classes="empty", markup=False)

    def focus_main(self) -> None:
        def focus() -> None:
            tables = self.query("#context-table")
            (tables.first() if tables else self).focus()

        self.call_after_refresh(focus)

    # -- results -------------------------------------------------------------------------
    def _table(self, caption_text: Text | str = "") -> DataTable[Any]:
        from textual.widgets import DataTable  # mounted on first results: keeps start-up light

        tables = self.query("#context-table")
        if tables:
            return tables.first(DataTable)
        # Made with its text: an update before the label is mounted was sometimes lost (a blank caption).
        caption = Label(caption_text, id="context-caption")
        table: DataTable[Any] = DataTable(id="context-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        self.mount(caption, table)
        return table

    def show_results(self, caption: str, hits: list[dict[str, Any]], *, workspace: str | None = None) -> None:
        """Replace the table with ``hits`` (dicts with the fields of ``services.retrieval.Hit``).

        Accepts what ``RetrievalEngine.last().hits`` returns, so the App can show the last retrieved
        set of a workspace after a restart. ``workspace`` (default: the one of ``set_workspace``)
        is remembered with the rows. Never moves the focus.
        """
        shown = plain(caption if hits else f"{caption}: no matching chunks", single_line=True)
        table = self._table(shown)
        table.clear()
        self._rows_workspace = workspace if workspace is not None else self.workspace
        self._dropped = set()
        self._shown = (caption, hits)
        rows = [
            [
                plain(hit.get("rank", ""), single_line=True),
                plain(str(hit.get("handle", "")), "bold", single_line=True),
                _score(hit.get("score")),
                _retriever_cell(hit.get("bm25_rank"), hit.get("bm25_score")),
                _retriever_cell(hit.get("dense_rank"), hit.get("dense_score")),
            ]
            for hit in hits
        ]
        width = source_width(self.content_region.width, rows)  # grows with the pane (the screen)
        for hit, (rank, handle, *scores) in zip(hits, rows, strict=True):
            table.add_row(rank, handle, _source_cell(hit, width), *scores, key=str(hit.get("handle", "")))
        caption_label = self.query_one("#context-caption", Label)
        caption_label.update(shown)
        caption_label.display = True
        table.display = True
        self.query_one("#context-empty", Static).display = False
        self.add_class("-has-items")

    def show_last(self, record: Any, *, workspace: str | None = None) -> None:
        """Show a ``RetrievalRecord`` (``engine.last()``): its query, index, time and hits."""
        stamp = str(getattr(record, "ts", ""))[:19].replace("T", " ")
        caption = f"last: {getattr(record, 'query', '')}  ·  index {getattr(record, 'index', '')}  ·  {stamp}"
        owner = workspace if workspace is not None else getattr(record, "workspace", None)
        self.show_results(caption, list(getattr(record, "hits", []) or []), workspace=owner)

    def reset(self, caption: str = EMPTY) -> None:
        """Clear the rows (workspace switched, index dropped) and show ``caption`` as the empty state."""
        for table in self.query("#context-table"):
            table.clear()  # type: ignore[attr-defined]
            table.display = False
        for caption_label in self.query("#context-caption"):
            caption_label.display = False
        self._rows_workspace = None
        self._dropped = set()
        self._shown = None
        empty = self.query_one("#context-empty", Static)
        empty.update(plain(caption))
        empty.display = True
        self.remove_class("-has-items")

    def set_workspace(self, name: str | None) -> None:
        """The workspace the App has open now; rows from another one become stale (not cleared)."""
        self.workspace = name

    def index_dropped(self, name: str) -> None:
        """Rows of index ``name`` now belong to a dropped index: Enter explains instead of erroring."""
        self._dropped.add(name)

    def stale_reason(self, handle: str) -> str | None:
        """Why the row ``handle`` can no longer be opened, or None when it can."""
        owner = self._rows_workspace
        if owner is not None and self.workspace is not None and owner != self.workspace:
            return f"This result belongs to workspace {owner}, not {self.workspace}: run the query again here."
        index = handle.split(":", 1)[0]
        if index in self._dropped:
            return f"This result belongs to index {index}, which was dropped."
        return None

    def _open(self, handle: str) -> None:
        reason = self.stale_reason(handle)
        if reason is not None:
            self.app.notify(clean(reason), title="Context", severity="warning", timeout=6, markup=False)
            return
        self.post_message(self.ShowChunk(handle, self._rows_workspace, handle.split(":", 1)[0]))

    def action_open(self) -> None:
        tables = self.query("#context-table")
        if not tables:
            return
        table: DataTable[Any] = tables.first()  # type: ignore[assignment]
        if table.row_count:
            row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
            if row_key.value:
                self._open(row_key.value)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value:
            self._open(event.row_key.value)

    # -- progress ------------------------------------------------------------------------
    def show_progress(self, stage: str, done: int, total: int, path: str | None = None) -> None:
        from textual.widgets import ProgressBar

        bars = self.query("#context-progress")
        if bars:
            bar = bars.first(ProgressBar)
        else:
            bar = ProgressBar(id="context-progress", show_eta=False)
            self.mount(Label("", id="context-progress-label"), bar, before=0)
        bar.update(total=max(total, 1), progress=done)
        where = f"  {path}" if path else ""
        if stage == "vectors":  # keywords first: searchable already, the dense part fills in
            stage, where = "keywords ✓ · vectors", "  (searchable by keyword now)"
        label = clean(f"indexing: {stage} {done}/{total}{where}   (Ctrl+X cancels)", single_line=True)
        self.query_one("#context-progress-label", Label).update(Text(label, overflow="ellipsis", no_wrap=True))

    def clear_progress(self) -> None:
        for widget in self.query("#context-progress, #context-progress-label"):
            widget.remove()

    # -- what the session's signals say -----------------------------------------------------------
    def on_mount(self) -> None:
        follow_sessions(self, self._session_opened)

    def _session_opened(self, signals: SessionSignals) -> None:
        """Rows of another workspace never stay; its last retrieved set comes back just after."""
        signals.changed.subscribe(self, self._session_changed)
        signals.retrieval.subscribe(self, self._retrieval)
        signals.turn.subscribe(self, self._turn_event)
        signals.conversation.subscribe(self, self._conversation)
        session = signals.session
        self.reset()
        self.set_workspace(signals.name)
        self._show_index(session)
        self._load_last(session)

    def _session_changed(self, message: SessionChanged) -> None:
        self._show_index(message.session)

    def _show_index(self, session: Session) -> None:
        index = session.workspace.setting("active_index")
        self.border_subtitle = clean(f"index {index}" if index else "no index in use", single_line=True)

    @work(thread=True, exclusive=True, group="context-last", exit_on_error=False)
    def _load_last(self, session: Session) -> None:
        from textual.worker import get_current_worker

        from services.retrieval.audit import RetrievalAudit

        if session.closed:
            return
        audit = RetrievalAudit(session.workspace.paths.audit_db, session.workspace.name)
        try:
            record = audit.last()
        except Exception:  # no retrieval table yet, or an unreadable store: /doctor reports the store
            return
        finally:
            audit.close()
        if record is not None and not get_current_worker().is_cancelled:
            self.post_message(self.LastRetrieval(session.workspace.name, record))

    @on(LastRetrieval)
    def _last_retrieval(self, message: LastRetrieval) -> None:
        tables = list(self.query("#context-table"))  # mounted on first use
        rows = int(getattr(tables[0], "row_count", 0)) if tables else 0
        if message.workspace == self.workspace and rows == 0:
            self.show_last(message.record, workspace=message.workspace)

    def _conversation(self, message: Conversational) -> None:
        """``/new``: empty; ``/resume``, ``/fork``: the reopened conversation's last injected set (its
        handles, in order, from the transcript), or empty when it has none — never the rows of the
        conversation left."""
        if not isinstance(message, ConversationStarted):
            return
        last = last_injected(message.entries)
        if last is None:
            self.reset("Nothing retrieved yet in this conversation.")
            return
        hits = [{"rank": n, "handle": handle} for n, handle in enumerate(last.get("handles") or [], 1)]
        turn = clean(str(last.get("turn_id") or "?"), single_line=True)
        self.show_results(f"injected for: {last.get('query', '')}  ·  index {last.get('index')}  ·  turn {turn}", hits)

    def _retrieval(self, message: RetrievalNews) -> None:
        if isinstance(message, HitsFound):
            self.show_results(message.caption, message.hits)
        elif isinstance(message, IndexDropped):
            self.index_dropped(message.name)
        elif isinstance(message, IngestProgress) and message.event.stage != "done":
            event = message.event
            self.show_progress(event.stage, event.done, event.total, event.path)
        elif isinstance(message, IngestEnded):
            self.clear_progress()

    def _turn_event(self, message: TurnEvent) -> None:
        from services.assistant import Retrieved

        event = message.event
        if isinstance(event, Retrieved) and (event.index is not None or event.brought_back):
            # earlier turns brought back follow the passages, ranked ↩1, ↩2… (Enter shows the turn)
            turns = [{**hit, "rank": f"↩{n}"} for n, hit in enumerate(event.brought_back, 1)]
            where = f"index {event.index}" if event.index is not None else "no index"
            back = f"  ·  {len(turns)} earlier turn(s) brought back" if turns else ""
            self.show_results(
                f"injected for: {event.query}  ·  {where}  ·  turn {event.turn_id}{back}", [*event.hits, *turns]
            )
