"""The App's retrieval wiring: one engine per workspace, ``/rag …``, and retrieval for each message.

A mixin of ``AriesApp``. Engine calls run in thread workers (Tantivy, Chroma and the embedding
model are blocking); workers hand results back with ``call_from_thread`` and only the App's
methods touch widgets. The embedding model is loaded once, in a worker, on first use.
"""

from __future__ import annotations

import shlex
import threading
from typing import TYPE_CHECKING, Any

from textual import work

from app.commands import CommandError
from services.errors import AriesError
from widgets.context.pane import ContextPane

if TYPE_CHECKING:
    from services.retrieval import RetrievalEngine
    from services.retrieval.models import IngestReport, ProgressEvent
    from services.workspaces import Workspace

RAG_USAGE = "/rag index add PATH [--name ID] | index list | index use ID | index drop ID | query TEXT [-k N] | show HANDLE | last | cancel"  # noqa: E501
MESSAGE_K = 5


class RetrievalMixin:
    _engine: RetrievalEngine | None = None
    _engine_lock: threading.Lock
    _ingest_cancel: threading.Event | None = None

    workspace: Workspace | None

    def _init_retrieval(self) -> None:
        self._engine = None
        self._engine_lock = threading.Lock()
        self._ingest_cancel = None

    def engine(self) -> RetrievalEngine:
        """The active workspace's engine (created on first use, from any thread)."""
        workspace = self.workspace
        assert workspace is not None
        with self._engine_lock:
            if self._engine is None or self._engine.workspace is not workspace:
                if self._engine is not None:
                    self._engine.close()
                from services.retrieval import RetrievalEngine

                self._engine = RetrievalEngine(workspace)
            return self._engine

    def close_engine(self) -> None:
        if self._ingest_cancel is not None:
            self._ingest_cancel.set()
        with self._engine_lock:
            if self._engine is not None:
                engine, self._engine = self._engine, None
                engine.close()

    def _context_pane(self) -> ContextPane | None:
        from screens.main import MainScreen

        main = [s for s in self.screen_stack if isinstance(s, MainScreen)]  # type: ignore[attr-defined]
        panes = main[0].query(ContextPane) if main else None
        return panes.first() if panes else None

    def _fail(self, exc: AriesError, title: str) -> None:
        self.notify(exc.message, title=title, severity="error", timeout=8)  # type: ignore[attr-defined]

    # -- /rag ----------------------------------------------------------------------------
    def command_rag(self, args: list[str], line: str) -> None:
        if not args:
            raise CommandError("say what to do.")
        action, rest = args[0], args[1:]
        if action == "index":
            self._rag_index(rest)
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
            self._rag_query(" ".join(rest), k, None)
        elif action == "show" and len(rest) == 1:
            self._rag_show(rest[0])
        elif action == "last" and not rest:
            self._rag_last()
        elif action == "cancel" and not rest:
            self.action_cancel_ingest()
        else:
            raise CommandError(f"cannot read '/rag {' '.join(shlex.quote(a) for a in args)}'.")

    def _rag_index(self, args: list[str]) -> None:
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
            if self._ingest_cancel is not None:
                raise CommandError("an index is being built already: wait, or cancel it with Ctrl+X.")
            from pathlib import Path

            # Created here, not in the worker, so that Ctrl+X works from the first moment.
            self._ingest_cancel = threading.Event()
            self.refresh_bindings()  # type: ignore[attr-defined]  # shows Ctrl+X
            self._ingest(str(Path(rest[0]).expanduser()), name, self._ingest_cancel)
        elif action == "list" and not rest:
            self._rag_list()
        elif action == "use" and len(rest) == 1:
            self._rag_use(rest[0])
        elif action == "drop" and len(rest) == 1:
            self._confirm_drop(rest[0])
        else:
            raise CommandError(f"cannot read '/rag index {' '.join(args)}'.")

    # -- workers -------------------------------------------------------------------------
    @work(thread=True, group="rag-ingest", exit_on_error=False)
    def _ingest(self, path: str, name: str | None, cancel: threading.Event) -> None:
        def progress(event: ProgressEvent) -> None:
            self.call_from_thread(self._show_progress, event)  # type: ignore[attr-defined]

        try:
            self.call_from_thread(self.notify, f"Indexing {path}…", title="/rag index add", timeout=4)  # type: ignore[attr-defined]
            report = self.engine().index_add(path, name, progress=progress, cancel=cancel)
        except AriesError as exc:
            self.call_from_thread(self._fail, exc, "/rag index add")  # type: ignore[attr-defined]
            return
        finally:
            self._ingest_cancel = None
            self.call_from_thread(self._end_progress)  # type: ignore[attr-defined]
            self.call_from_thread(self.refresh_bindings)  # type: ignore[attr-defined]
        self.call_from_thread(self._ingested, report)  # type: ignore[attr-defined]

    def _show_progress(self, event: ProgressEvent) -> None:
        pane = self._context_pane()
        if pane is not None and event.stage != "done":
            pane.show_progress(event.stage, event.done, event.total, event.path)

    def _end_progress(self) -> None:
        pane = self._context_pane()
        if pane is not None:
            pane.clear_progress()

    def _ingested(self, report: IngestReport) -> None:
        state = "cancelled" if report.cancelled else "done"
        lines = [
            f"Index {report.index} ({state} in {report.elapsed_s:.1f} s): {len(report.added)} added, "
            f"{len(report.updated)} updated, {len(report.unchanged)} unchanged, {len(report.removed)} removed; "
            f"{report.chunks_added} chunks added, {report.chunks_removed} removed."
        ]
        for issue in report.errors:
            lines.append(f"  error  {issue.path}: {issue.error}: {issue.message}")
        for issue in report.skipped:
            lines.append(f"  skipped  {issue.path}: {issue.message}")
        if report.activated:
            lines.append(f"Index {report.index} is now in use.")
        self.append_entry("system", "\n".join(lines))  # type: ignore[attr-defined]
        self.reload_panes()  # type: ignore[attr-defined]

    def action_cancel_ingest(self) -> None:
        if self._ingest_cancel is None:
            self.notify("Nothing is being indexed.", title="/rag cancel", timeout=3)  # type: ignore[attr-defined]
            return
        self._ingest_cancel.set()
        self.notify("Cancelling after the current file…", title="/rag cancel", timeout=4)  # type: ignore[attr-defined]

    @work(thread=True, group="rag", exit_on_error=False)
    def _rag_list(self) -> None:
        try:
            infos = self.engine().index_list()
        except AriesError as exc:
            self.call_from_thread(self._fail, exc, "/rag index list")  # type: ignore[attr-defined]
            return
        if not infos:
            text = "No indexes in this workspace yet. /rag index add PATH builds one."
        else:
            rows = [
                f"{'*' if i.active else ' '} {i.name}  {i.files} files  {i.chunks} chunks  {i.embedding_model or '?'}"
                for i in infos
            ]
            text = "Indexes (* in use):\n" + "\n".join(rows)
        self.call_from_thread(self.append_entry, "system", text)  # type: ignore[attr-defined]

    @work(thread=True, group="rag", exit_on_error=False)
    def _rag_use(self, name: str) -> None:
        try:
            info = self.engine().index_use(name)
        except AriesError as exc:
            self.call_from_thread(self._fail, exc, "/rag index use")  # type: ignore[attr-defined]
            return
        self.call_from_thread(self.append_entry, "system", f"Index {info.name} is now in use ({info.chunks} chunks).")  # type: ignore[attr-defined]
        self.call_from_thread(self.reload_panes)  # type: ignore[attr-defined]

    def _confirm_drop(self, name: str) -> None:
        from screens.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                self._rag_drop(name)

        detail = (
            f"This deletes index {name} of workspace {self.workspace.name if self.workspace else ''}: its "
            "Tantivy and Chroma data. The documents themselves are not touched."
        )
        self.push_screen(ConfirmScreen(f"Drop index {name}?", detail), answered)  # type: ignore[attr-defined]

    @work(thread=True, group="rag", exit_on_error=False)
    def _rag_drop(self, name: str) -> None:
        try:
            self.engine().index_drop(name)
        except AriesError as exc:
            self.call_from_thread(self._fail, exc, "/rag index drop")  # type: ignore[attr-defined]
            return
        self.call_from_thread(self.append_entry, "system", f"Index {name} dropped.")  # type: ignore[attr-defined]
        self.call_from_thread(self.reload_panes)  # type: ignore[attr-defined]

    @work(thread=True, group="rag", exit_on_error=False)
    def _rag_query(self, text: str, k: int, answer_for: str | None) -> None:
        """Search the active index; with ``answer_for``, also answer that message (offline provider)."""
        from services.answers import offline_answer

        try:
            engine = self.engine()
            index = engine.active_index
            if index is None:
                if answer_for is None:
                    raise CommandError("no index is in use: /rag index add PATH, or /rag index use NAME.")
                result = None
            else:
                result = engine.query(text, k=k)
        except CommandError as exc:
            self.call_from_thread(self.notify, str(exc), title="/rag query", severity="error")  # type: ignore[attr-defined]
            return
        except AriesError as exc:
            self.call_from_thread(self._fail, exc, "retrieval")  # type: ignore[attr-defined]
            return
        hits = [hit.to_dict() for hit in result.hits] if result is not None else []
        if result is not None:
            caption = f"{'injected for' if answer_for else 'query'}: {text}  ·  index {result.index}  ·  k={k}"
            self.call_from_thread(self._show_hits, caption, hits)  # type: ignore[attr-defined]
        if answer_for is not None:
            answer = offline_answer(answer_for, index, hits)
            self.call_from_thread(  # type: ignore[attr-defined]
                self.append_entry,
                "assistant",
                answer.text,
                provider=answer.provider,
                provenance=answer.provenance,
                citations=answer.citations,
            )

    def _show_hits(self, caption: str, hits: list[dict[str, Any]]) -> None:
        pane = self._context_pane()
        if pane is not None:
            pane.show_results(caption, hits)

    @work(thread=True, group="rag", exit_on_error=False)
    def _rag_last(self) -> None:
        try:
            record = self.engine().last()
        except AriesError as exc:
            self.call_from_thread(self._fail, exc, "/rag last")  # type: ignore[attr-defined]
            return
        if record is None:
            self.call_from_thread(self.notify, "Nothing has been retrieved in this workspace yet.", title="/rag last")  # type: ignore[attr-defined]
            return
        caption = f"last: {record.query}  ·  index {record.index}  ·  {record.ts[:19].replace('T', ' ')}"
        self.call_from_thread(self._show_hits, caption, record.hits)  # type: ignore[attr-defined]

    @work(thread=True, group="rag", exit_on_error=False)
    def _rag_show(self, handle: str) -> None:
        try:
            chunk = self.engine().show(handle)
        except AriesError as exc:
            self.call_from_thread(self._fail, exc, "/rag show")  # type: ignore[attr-defined]
            return
        from screens.chunk_viewer import ChunkViewer

        self.call_from_thread(self.push_screen, ChunkViewer(chunk))  # type: ignore[attr-defined]

    def on_context_pane_show_chunk(self, message: ContextPane.ShowChunk) -> None:
        self._rag_show(message.handle)
