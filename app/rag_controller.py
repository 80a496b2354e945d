"""``/rag …`` and the retrieval half of a message, for the App.

A small controller instead of a mixin: it parses the command, runs the service call in a thread
worker (Tantivy, Chroma and the embedder block), and hands results back to the App's thread with
``call_from_thread``. Only App and pane methods touch widgets; state stays on the App.
"""

from __future__ import annotations

import shlex
import threading
from typing import TYPE_CHECKING, Any

from app.commands import CommandError
from services.errors import AriesError

MESSAGE_K = 5  # the turn loop's default k (services.assistant.loop.DEFAULT_K), kept out of start-up

if TYPE_CHECKING:
    from app.aries_app import AriesApp
    from services.retrieval.models import IngestReport, ProgressEvent
    from services.session import Session


class RagController:
    def __init__(self, app: AriesApp) -> None:
        self.app = app
        self.ingest_cancel: threading.Event | None = None

    @property
    def session(self) -> Session:
        return self.app.require_session()

    def _thread(self, fn: Any, *args: Any, group: str = "rag") -> None:
        self.app.run_worker(lambda: fn(*args), thread=True, group=group, exit_on_error=False)

    def _fail(self, exc: AriesError, title: str) -> None:
        self.app.call_from_thread(self.app.report_error, exc.message, title)

    def _say(self, text: str, title: str = "rag") -> None:
        self.app.call_from_thread(self.app.say, text, title)

    # -- /rag ------------------------------------------------------------------------------
    def command(self, args: list[str]) -> None:
        if not args:
            raise CommandError("say what to do.")
        action, rest = args[0], args[1:]
        if action == "index":
            self._index(rest)
        elif action == "query":
            k = MESSAGE_K * 2
            if "-k" in rest:
                at = rest.index("-k")
                try:
                    k = int(rest[at + 1])
                except (IndexError, ValueError) as exc:
                    raise CommandError("-k takes a number.") from exc
                if not 1 <= k <= 100:
                    raise CommandError("-k is between 1 and 100.")
                rest = rest[:at] + rest[at + 2 :]
            if not rest:
                raise CommandError("say what to search for.")
            self._thread(self._query, " ".join(rest), k)
        elif action == "show" and len(rest) == 1:
            self._thread(self._show, rest[0])
        elif action == "last" and not rest:
            self._thread(self._last)
        elif action == "cancel" and not rest:
            self.cancel_ingest()
        else:
            raise CommandError(f"cannot read '/rag {' '.join(shlex.quote(a) for a in args)}'.")

    def _index(self, args: list[str]) -> None:
        if not args:
            raise CommandError("say what to do with indexes.")
        action, rest = args[0], args[1:]
        if action == "add" and rest:
            name = None
            if "--name" in rest:
                at = rest.index("--name")
                if at + 1 >= len(rest):
                    raise CommandError("--name takes an index name.")
                name = rest[at + 1]
                rest = rest[:at] + rest[at + 2 :]
            if len(rest) != 1:
                raise CommandError("index add takes one path.")
            if self.ingest_cancel is not None:
                raise CommandError("an index is being built already: wait, or cancel it with Ctrl+X.")
            # Created here, not in the worker, so that Ctrl+X works from the first moment.
            self.ingest_cancel = threading.Event()
            self.app.refresh_bindings()
            path = self.app.resolve_path(rest[0])
            self._thread(self._ingest, str(path), name, self.ingest_cancel, group="rag-ingest")
        elif action == "list" and not rest:
            self._thread(self._list)
        elif action == "use" and len(rest) == 1:
            self._thread(self._use, rest[0])
        elif action == "drop" and len(rest) == 1:
            self._confirm_drop(rest[0])
        elif action == "repair" and len(rest) == 1:
            if self.ingest_cancel is not None:
                raise CommandError("an index is being built already: wait, or cancel it with Ctrl+X.")
            self.ingest_cancel = threading.Event()
            self.app.refresh_bindings()
            self._thread(self._repair, rest[0], self.ingest_cancel, group="rag-ingest")
        else:
            raise CommandError(f"cannot read '/rag index {' '.join(args)}'.")

    def cancel_ingest(self) -> None:
        if self.ingest_cancel is None:
            self.app.notify("Nothing is being indexed.", title="/rag cancel", timeout=3)
            return
        self.ingest_cancel.set()
        self.app.notify("Cancelling after the current file…", title="/rag cancel", timeout=4)

    # -- workers (threads) -------------------------------------------------------------------
    def _ingest(self, path: str, name: str | None, cancel: threading.Event) -> None:
        app = self.app

        def progress(event: ProgressEvent) -> None:
            if event.stage == "wait":  # another Aries writes this index: its message, once (Ctrl+X stops waiting)
                message = event.path or "waiting for another writer"
                app.call_from_thread(app.notify, message, title="/rag index add", timeout=8, markup=False)
            app.call_from_thread(app.show_progress, event)

        try:
            app.call_from_thread(app.notify, f"Indexing {path}…", title="/rag index add", timeout=4, markup=False)
            report = self.session.engine().index_add(path, name, progress=progress, cancel=cancel)
        except AriesError as exc:
            self._fail(exc, "/rag index add")
            return
        finally:
            self.ingest_cancel = None
            app.call_from_thread(app.end_progress)
            app.call_from_thread(app.refresh_bindings)
        self._say(_ingest_summary(report))
        if report.not_indexed:
            app.call_from_thread(
                app.notify,
                f"{len(report.not_indexed)} file(s) not indexed; the transcript lists each with its reason.",
                title="/rag index add",
                severity="warning",
                timeout=8,
                markup=False,
            )
        app.call_from_thread(app.reload_panes, transcript=False)

    def _list(self) -> None:
        try:
            infos = self.session.engine().index_list()
        except AriesError as exc:
            self._fail(exc, "/rag index list")
            return
        if not infos:
            self._say("No indexes in this workspace yet. /rag index add PATH builds one.")
            return
        rows: list[str] = []
        for i in infos:
            rows.append(
                f"{'*' if i.active else ' '} {i.name}  {i.files} files  {i.chunks} chunks  {i.status}  "
                f"{i.embedding_model or '?'} {i.embedding_backend or ''}".rstrip()
            )
            if i.status_detail:
                rows.append(f"    {i.status}: {i.status_detail}")
            if i.status == "vectors unavailable":  # a folder that cannot be written: nothing to repair
                rows.append("    keyword-only while the index folder cannot be written")
            elif i.status.startswith("vectors"):
                rows.append(f"    keyword-only until repaired: /rag index repair {i.name}")
            rows.extend(
                f"    failed  {f['path']}: [{f['code']}] {f['message']} (its previous chunks are kept)"
                for f in i.failed
            )
        self._say("Indexes (* in use):\n" + "\n".join(rows))
        damaged = [i.name for i in infos if i.status != "ok"]
        if damaged:
            self.app.call_from_thread(
                self.app.notify,
                f"Index {', '.join(damaged)}: not sound (see the listing); queries are keyword-only.",
                title="/rag index list",
                severity="warning",
                timeout=8,
                markup=False,
            )

    def _repair(self, name: str, cancel: threading.Event) -> None:
        from services.retrieval.ingest import Cancelled

        app = self.app

        def progress(event: ProgressEvent) -> None:
            if event.stage == "wait":  # another Aries writes this index (Ctrl+X stops waiting)
                message = event.path or "waiting for another writer"
                app.call_from_thread(app.notify, message, title="/rag index repair", timeout=8, markup=False)
            app.call_from_thread(app.show_progress, event)

        try:
            count = self.session.engine().index_repair(name, progress=progress, cancel=cancel)
            info = self.session.engine().index_info(name)
        except Cancelled:
            self._say(f"Repair of index {name} cancelled; the index is unchanged (keyword-only).")
            return
        except AriesError as exc:
            self._fail(exc, "/rag index repair")
            return
        finally:
            self.ingest_cancel = None
            app.call_from_thread(app.end_progress)
            app.call_from_thread(app.refresh_bindings)
        self._say(f"Index {name}: {count} vectors rebuilt from its stored chunks; status {info.status}.")

    def _use(self, name: str) -> None:
        try:
            info = self.session.engine().index_use(name)
        except AriesError as exc:
            self._fail(exc, "/rag index use")
            return
        self._say(f"Index {info.name} is now in use ({info.chunks} chunks).")
        self.app.call_from_thread(self.app.reload_panes, transcript=False)

    def _confirm_drop(self, name: str) -> None:
        from screens.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                self._thread(self._drop, name)

        detail = (
            f"This deletes index {name} of workspace {self.app.workspace_name}: its Tantivy and Chroma data. "
            "The documents themselves are not touched."
        )
        self.app.push_screen(ConfirmScreen(f"Drop index {name}?", detail), answered)

    def _drop(self, name: str) -> None:
        try:
            self.session.engine().index_drop(name)
        except AriesError as exc:
            self._fail(exc, "/rag index drop")
            return
        self._say(f"Index {name} dropped.")
        self.app.call_from_thread(self.app.index_dropped, name)

    def _query(self, text: str, k: int) -> None:
        try:
            engine = self.session.engine()
            if engine.active_index is None:
                raise CommandError("no index is in use: /rag index add PATH, or /rag index use NAME.")
            result = engine.query(text, k=k)
        except CommandError as exc:
            self.app.call_from_thread(self.app.report_error, str(exc), "/rag query")
            return
        except AriesError as exc:
            self._fail(exc, "retrieval")
            return
        hits = [hit.to_dict() for hit in result.hits]
        caption = f"query: {text}  ·  index {result.index}  ·  k={k}"
        if result.mode == "keyword":
            caption += "  ·  KEYWORD ONLY (no vector search: see the warning)"
        for warning in result.warnings:
            self.app.call_from_thread(
                self.app.notify, warning, title="retrieval", severity="warning", timeout=10, markup=False
            )
        self.app.call_from_thread(self.app.show_hits, caption, hits)

    def _last(self) -> None:
        try:
            record = self.session.engine().last()
        except AriesError as exc:
            self._fail(exc, "/rag last")
            return
        if record is None:
            self.app.call_from_thread(self.app.notify, "Nothing has been retrieved in this workspace yet.")
            return
        caption = f"last: {record.query}  ·  index {record.index}  ·  {record.ts[:19].replace('T', ' ')}"
        self.app.call_from_thread(self.app.show_hits, caption, record.hits)

    def _show(self, handle: str) -> None:
        try:
            chunk = self.session.engine().show(handle)
        except AriesError as exc:
            self._fail(exc, "/rag show")
            return
        from screens.chunk_viewer import ChunkViewer

        self.app.call_from_thread(self.app.push_screen, ChunkViewer(chunk))

    def show_chunk(self, handle: str) -> None:
        self._thread(self._show, handle)


INGEST_LINES_PER_KIND = 200
"""The transcript notice lists at most this many files of each kind (``aries rag index add`` lists all)."""


def _ingest_summary(report: IngestReport) -> str:
    from services.textsafe import neutralize

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
    if report.activated:
        lines.append(f"Index {report.index} is now in use.")
    return "\n".join(lines)


__all__ = ["RagController"]
