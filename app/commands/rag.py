"""``/rag …``: build, select and drop indexes, search them, open a chunk, show the last retrieved set.

Tantivy, Chroma and the embedder block, so each engine call runs in a thread (an async worker
awaiting ``asyncio.to_thread``); the thread reports progress only by posting messages, and what comes
after the call (the notice, the Context pane's rows, the header) happens back on the App's thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.host import run_task
from services.errors import AriesError
from widgets.commands import Action, CommandError, IndexAdd, Named, Query, WatchIndex
from widgets.messages import HitsFound, IndexDropped, IngestEnded, IngestProgress, Preparing, SessionChanged

MESSAGE_K = 5  # the turn loop's default k (services.assistant.loop.DEFAULT_K), kept out of start-up

if TYPE_CHECKING:
    from app.commands.rag_watch import WatchController
    from app.host import Host
    from services.retrieval.models import IndexInfo, IngestReport, ProgressEvent
    from services.session.session import Session


class RagController:
    def __init__(self, host: Host) -> None:
        self.host = host
        self.ingest_cancel: threading.Event | None = None  # set while an index is being built

    @property
    def session(self) -> Session:
        return self.host.require_session()

    @property
    def ingesting(self) -> bool:
        return self.ingest_cancel is not None

    @cached_property
    def watches(self) -> WatchController:
        """``/rag index watch``: the session's watched indexes (app/commands/rag_watch.py)."""
        from app.commands.rag_watch import WatchController

        return WatchController(self.host)

    def header_part(self) -> str:
        """The watched indexes, for the header ('' when none)."""
        return self.watches.header_part() if "watches" in self.__dict__ else ""

    # -- /rag ------------------------------------------------------------------------------
    def command(self, parsed: IndexAdd | Action | Named | Query | WatchIndex) -> None:
        """The parsed ``/rag`` line (``widgets.commands``: its forms and options)."""
        if isinstance(parsed, WatchIndex):
            self.watches.command(parsed)
        elif isinstance(parsed, IndexAdd):
            cancel = self._start_ingest()
            path = self.host.resolve_path(parsed.path)
            self._ingest(self.session, str(path), parsed.name, cancel)
        elif isinstance(parsed, Query):
            self._query(self.session, parsed.text, parsed.k or MESSAGE_K * 2)
        elif isinstance(parsed, Named):
            self._named(parsed.action, parsed.name)
        elif parsed.action == "list":
            session = self.session
            run_task(self.host, "/rag index list", lambda: session.engine().index_list(), self._listed, group="rag")
        elif parsed.action == "last":
            session = self.session
            run_task(self.host, "/rag last", lambda: session.engine().last(), self._last, group="rag")
        else:  # cancel
            self.cancel_ingest()

    def _named(self, action: str, name: str) -> None:
        if action == "show":
            self.show_chunk(name)
        elif action == "use":
            session = self.session

            def used(info: IndexInfo) -> None:
                self.host.say(f"Index {info.name} is now in use ({info.chunks} chunks).", "rag")
                self.host.publish(SessionChanged(session))

            run_task(self.host, "/rag index use", lambda: session.engine().index_use(name), used, group="rag")
        elif action == "drop":
            self._confirm_drop(name)
        else:  # repair
            cancel = self._start_ingest()
            self._repair(self.session, name, cancel)

    def _start_ingest(self) -> threading.Event:
        """One index build at a time; its cancel event exists from the first moment (Ctrl+X works)."""
        if self.ingest_cancel is not None:
            raise CommandError("an index is being built already: wait, or cancel it with Ctrl+X.")
        self.ingest_cancel = threading.Event()
        self.host.refresh_bindings()
        return self.ingest_cancel

    def _ingest_over(self) -> None:
        self.ingest_cancel = None
        self.host.publish(IngestEnded())
        self.host.refresh_bindings()

    def cancel_ingest(self) -> None:
        if self.ingest_cancel is None:
            self.host.notify("Nothing is being indexed.", title="/rag cancel", timeout=3)
            return
        self.ingest_cancel.set()
        self.host.notify("Cancelling after the current file…", title="/rag cancel", timeout=4)

    def stop_ingest(self) -> None:
        """The session closes: the index build stops after its current file, a watch after its batch (no notice)."""
        if self.ingest_cancel is not None:
            self.ingest_cancel.set()
        if "watches" in self.__dict__:
            self.watches.stop_all()

    def preparing(self, message: Preparing) -> None:
        """A one-time preparation (the ONNX encoder's first export, deep inside a query or an ingest):
        a status line while it lasts, and a notice when it starts and ends."""
        if message.stage == "start":
            self.host.status_start(message.key, message.message)
            self.host.notify(f"{message.message} Retrieval waits for it.", title="retrieval", timeout=10)
        else:
            self.host.status_stop(message.key)
            if message.stage == "done":
                self.host.notify(message.message, title="retrieval", timeout=5)

    def _progress(self, title: str) -> Callable[[ProgressEvent], None]:
        """Progress from the ingest thread: posted, never applied from that thread."""
        host = self.host

        def progress(event: ProgressEvent) -> None:
            if event.stage == "wait":  # another Aries writes this index: its message, once (Ctrl+X stops waiting)
                host.notify(event.path or "waiting for another writer", title=title, timeout=8)
            host.publish(IngestProgress(event))

        return progress

    def resume_vectors(self) -> None:
        """Once a workspace is open: fill in the vectors an interrupted ``rag index add`` left
        pending (keywords first), in the background, as an index build (its progress in the
        Context pane, Ctrl+X stops it; the next open continues).  Nothing to do: nothing loaded."""
        if self.ingest_cancel is not None:
            return
        session = self.session
        # the coroutine is made when the worker starts: an App that closes first leaves none un-awaited
        self.host.run_worker(partial(self._resume_vectors, session), group="rag-vectors", exit_on_error=False)

    async def _resume_vectors(self, session: Session) -> None:
        indexes_dir = session.workspace.indexes_dir
        if not await asyncio.to_thread(_holds_an_index, indexes_dir):  # the common case: nothing is imported
            return
        from services.retrieval.backfill import pending_indexes

        names = await asyncio.to_thread(pending_indexes, indexes_dir)
        if not names or self.ingest_cancel is not None or session.workspace.ephemeral:
            return
        cancel = self._start_ingest()
        progress = self._progress("vectors")
        try:
            engine = await asyncio.to_thread(session.engine)
            for name in names:
                filled = await asyncio.to_thread(engine.index_fill, name, progress=progress, cancel=cancel)
                if filled.written:
                    self.host.say(
                        f"Index {name}: {filled.written} vectors written behind the keywords ({filled.note()}).", "rag"
                    )
        except AriesError as exc:
            self.host.report_error(exc.message, "vectors")
        finally:
            self._ingest_over()

    # -- the workers (``run_task``: the work in a thread, its typed errors one line) ---------------
    def _ingest(self, session: Session, path: str, name: str | None, cancel: threading.Event) -> None:
        title = "/rag index add"
        self.host.notify(f"Indexing {path}…", title=title, timeout=4)
        progress = self._progress(title)

        def indexed(report: Any) -> None:
            self.host.say(_ingest_summary(report, session.engine().active_index), "rag")
            if report.not_indexed:
                self.host.notify(
                    f"{len(report.not_indexed)} file(s) not indexed; the transcript lists each with its reason.",
                    title=title,
                    severity="warning",
                    timeout=8,
                )
            self.host.publish(SessionChanged(session))

        def index() -> Any:
            return session.engine().index_add(path, name, progress=progress, cancel=cancel)

        run_task(self.host, title, index, indexed, group="rag-ingest", cleanup=self._ingest_over)

    def _listed(self, infos: list[IndexInfo]) -> None:
        if not infos:
            self.host.say("No indexes in this workspace yet. /rag index add PATH builds one.", "rag")
            return
        rows: list[str] = []
        for i in infos:
            rows.append(
                f"{'*' if i.active else ' '} {i.name}  {i.files} files  {i.chunks} chunks  {i.status}  "
                f"{i.embedding_model or '?'} {i.embedding_backend or ''}".rstrip()
            )
            if i.status_detail:
                rows.append(f"    {i.status}: {i.status_detail}")
            if i.vectors_note:
                rows.append(f"    {i.vectors_note} (dense search covers that part; filling in)")
            advice = i.status.advice(i.name, command="/rag")
            if advice:
                rows.append(f"    {advice}")
            rows.extend(
                f"    failed  {f['path']}: [{f['code']}] {f['message']} (its previous chunks are kept)"
                for f in i.failed
            )
        self.host.say("Indexes (* in use):\n" + "\n".join(rows), "rag")
        damaged = [i.name for i in infos if i.status != "ok"]
        if damaged:
            self.host.notify(
                f"Index {', '.join(damaged)}: not sound (see the listing); queries are keyword-only.",
                title="/rag index list",
                severity="warning",
                timeout=8,
            )

    def _repair(self, session: Session, name: str, cancel: threading.Event) -> None:
        progress = self._progress("/rag index repair")

        def repair() -> tuple[int, Any] | None:
            from services.retrieval.ingest import Cancelled

            engine = session.engine()
            try:
                count = engine.index_repair(name, progress=progress, cancel=cancel)
            except Cancelled:
                return None
            return count, engine.index_info(name)

        def repaired(done: tuple[int, Any] | None) -> None:
            if done is None:
                self.host.say(f"Repair of index {name} cancelled; the index is unchanged (keyword-only).", "rag")
                return
            count, info = done
            self.host.say(f"Index {name}: {count} vectors rebuilt from its stored chunks; status {info.status}.", "rag")

        run_task(self.host, "/rag index repair", repair, repaired, group="rag-ingest", cleanup=self._ingest_over)

    def _confirm_drop(self, name: str) -> None:
        from screens.confirm import ConfirmScreen

        session = self.session

        def dropped(_: None) -> None:
            self.host.say(f"Index {name} dropped.", "rag")
            self.host.publish(IndexDropped(name))
            self.host.publish(SessionChanged(session))

        def answered(yes: bool | None) -> None:
            if yes:
                run_task(self.host, "/rag index drop", lambda: session.engine().index_drop(name), dropped, group="rag")

        detail = (
            f"This deletes index {name} of workspace {self.host.workspace_name}: its Tantivy and Chroma data. "
            "The documents themselves are not touched."
        )
        self.host.push_screen(ConfirmScreen(f"Drop index {name}?", detail), answered)

    def _query(self, session: Session, text: str, k: int) -> None:
        def query() -> Any:
            engine = session.engine()
            if engine.active_index is None:
                raise CommandError("no index is in use: /rag index add PATH, or /rag index use NAME.")
            return engine.query(text, k=k)

        run_task(self.host, "/rag query", query, lambda result: self._found(text, k, result), group="rag")

    def _found(self, text: str, k: int, result: Any) -> None:
        caption = f"query: {text}  ·  index {result.index}  ·  k={k}"
        if result.mode == "keyword":
            caption += "  ·  KEYWORD ONLY (no vector search: see the warning)"
        elif result.dense_note:  # keywords first: the vectors are still filling in
            caption += f"  ·  {result.dense_note}"
        for warning in result.warnings:
            self.host.notify(warning, title="retrieval", severity="warning", timeout=10)
        self.host.publish(HitsFound(caption, [hit.to_dict() for hit in result.hits]))

    def _last(self, record: Any) -> None:
        if record is None:
            self.host.notify("Nothing has been retrieved in this workspace yet.")
            return
        caption = f"last: {record.query}  ·  index {record.index}  ·  {record.ts[:19].replace('T', ' ')}"
        self.host.publish(HitsFound(caption, record.hits))

    def show_chunk(self, handle: str) -> None:
        """The chunk viewer on ``handle`` (``/rag show``, Enter in the Context pane, a citation link);
        ``handle#start-end`` (a checked citation) highlights that supporting span of the chunk's text."""
        from screens.chunk_viewer import parse_span

        session = self.session
        handle, span = parse_span(handle)

        def viewer(chunk: Any) -> None:
            from screens.chunk_viewer import ChunkViewer

            self.host.push_screen(ChunkViewer(chunk, span))

        def show() -> Any:  # an earlier turn's handle (turn:<conversation>:<n>) shows the turn
            from services.assistant.recall import show_turn

            return show_turn(session, handle) or session.engine().show(handle)

        run_task(self.host, "/rag show", show, viewer, group="rag")


INGEST_LINES_PER_KIND = 200
"""The transcript notice lists at most this many files of each kind (``aries rag index add`` lists all)."""


def _ingest_summary(report: IngestReport, active: str | None) -> str:
    """The transcript's account of an ingest; ``active``: the index queries go to now."""
    from services.text.textsafe import neutralize

    state = "cancelled" if report.cancelled else "done"
    lines = [
        f"Index {report.index} ({state} in {report.elapsed_s:.1f} s): {len(report.added)} added, "
        f"{len(report.updated)} updated, {len(report.unchanged)} unchanged, {len(report.removed)} removed, "
        f"{len(report.errors)} failed, {len(report.skipped)} skipped; "
        f"{report.chunks_added} chunks added, {report.chunks_removed} removed."
    ]
    if report.vectors_rebuilt:
        rebuilt = f"vector store rebuilt first ({report.vectors_rebuilt} chunks re-embedded)"
        lines.insert(0, f"Index {report.index}: {rebuilt}.")
    lines.extend(neutralize(line, single_line=True) for line in report.file_lines(INGEST_LINES_PER_KIND))
    if report.not_indexed:
        lines.append(f"{len(report.not_indexed)} file(s) not indexed: each is listed above with its reason.")
    if report.vectors_pending:  # keywords first: the vector phase was stopped
        lines.append(
            f"{report.vectors_pending} chunks are searchable by keyword only until their vectors are written "
            "(the next /rag index add, or the next time this workspace opens, continues)."
        )
    if report.activated:
        lines.append(f"Index {report.index} is now in use.")
    elif active is not None and active != report.index and not report.cancelled:
        lines.append(f"Queries still go to index {active}; /rag index use {report.index} switches to this one.")
    return "\n".join(lines)


__all__ = ["RagController"]


def _holds_an_index(indexes_dir: Path) -> bool:
    """Whether the workspace has an index at all (a folder listing: the retrieval code is not imported
    at a workspace's open only to learn that it has nothing to fill in)."""
    try:
        return any(not entry.name.startswith(".") for entry in indexes_dir.iterdir())
    except OSError:
        return False
