"""The conversation search index of a workspace: where it lives, how it is kept current, one writer.

It lives in ``<workspace>/cache/conversations/`` — derived data: a bundle never carries ``cache/``
(:mod:`services.bundles.export`), an import drops one, and it is rebuilt from the transcripts when
it is missing, damaged, or of another format (``meta.json``'s ``format``; a mismatch → rebuild):

``meta.json``      ``{"format", "generation"}``; the generation moves on every rebuild, so that
                   another process with the old index open opens the new one
``offsets.json``   per transcript: the bytes indexed so far, and the file's inode (a replaced or
                   shortened file is indexed again whole)
``tantivy/``       the Tantivy index (schema: :func:`schema`)

**Current by catching up, not by notification.** Before a search answers, :meth:`HistoryIndex.catch_up`
reads whatever was appended to each transcript since its offset and indexes it (one commit). This
one mechanism covers every writer — the TUI's conversation, ``aries ask`` in another process, a
fork, an import — and every crash (the offsets are saved after the commit; entries indexed again
after a crash between the two replace their earlier documents, by message id), where a notification
from :class:`services.conversation.Conversation` would only see its own process. Its cost is a
``stat`` per transcript per search (2,000 transcripts: a few ms) and a commit when something is new.

**One writer across processes.** The writer lock (``cache/.locks/conversations.writer.lock``) and the
store lock (``….store.lock``) are :class:`services.retrieval.store_locks.IndexLocks`, as for a
retrieval index: the writer lock for one catch-up (a search only *tries* it: while another process
writes, the search answers from what is indexed, marked partial), the store lock around a commit
(and its merges) and around a reader's reload, so that no reader opens a segment a merge is deleting.

**Built lazily.** Nothing builds on a workspace's start-up path. The TUI builds it in a background
worker once the workbench is settled (:mod:`services.history_search.background`, slice by slice);
a search meanwhile catches up for at most ``budget_s`` and reports the rest as partial. What was
appended to indexed transcripts comes first, then the transcripts to index whole, newest first.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

from services.files.atomic import atomic_write_text
from services.history_search.coverage import Coverage, SearchIndexError
from services.history_search.documents import SearchDocument, documents_for
from services.history_search.footers import damaged_files
from services.retrieval.store_locks import IndexLocks
from services.workspace.paths import CACHE_DIR, TRANSCRIPTS_DIR
from services.workspace.transcripts import SUFFIX

if TYPE_CHECKING:
    import tantivy

    from services.workspace.manager import Workspace

FORMAT = 1
"""Changes whenever the schema or what goes into a document changes: a mismatch rebuilds the index."""
NAME = "conversations"
BATCH_ENTRIES = 5_000
"""Entries per commit while catching up (a reader sees the index grow batch by batch)."""
WRITER_HEAP = 64 * 1024 * 1024

Progress = Callable[[int, int], None]
"""``(transcripts done, transcripts to do)`` while catching up."""


def schema() -> tantivy.Schema:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("entry", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("conversation", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("seq", stored=True, fast=True)
    builder.add_integer_field("turn", stored=True, indexed=True, fast=True)
    builder.add_text_field("role", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("kind", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("tool", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("timestamp", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("epoch", stored=False, indexed=True, fast=True)
    builder.add_text_field("text", stored=True, tokenizer_name="en_stem", index_option="position")
    return builder.build()


@dataclass
class _Work:
    path: Path
    conversation_id: str
    start: int
    whole: bool  # indexed again from the start: its earlier documents go first
    inode: int


class HistoryIndex:
    """The conversation search index of the workspace whose folder is ``root``."""

    def __init__(self, root: Path, transcripts_dir: Path | None = None) -> None:
        self.root = Path(root)
        self.transcripts_dir = Path(transcripts_dir) if transcripts_dir else self.root / TRANSCRIPTS_DIR
        self.directory = self.root / CACHE_DIR / NAME
        self.meta_path = self.directory / "meta.json"
        self.offsets_path = self.directory / "offsets.json"
        self.tantivy_dir = self.directory / "tantivy"
        self.locks = IndexLocks(self.root / CACHE_DIR, NAME)
        self._index: tantivy.Index | None = None
        self._generation: int | None = None
        self._offsets_cache: tuple[tuple[int, int, int], dict[str, list[int]]] | None = None
        self._lock = threading.Lock()  # this object's open index, between threads

    @classmethod
    def for_workspace(cls, workspace: Workspace) -> HistoryIndex:
        return cls(workspace.root, workspace.transcripts_dir)

    # -- the folder ---------------------------------------------------------------------------
    def _meta(self) -> dict[str, Any] | None:
        try:
            meta = json.loads(self.meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or not isinstance(meta.get("generation"), int):
            return None
        return meta

    def _offsets(self) -> dict[str, list[int]] | None:
        """The offset table (kept in memory while the file is unchanged: a search reads it once)."""
        try:
            stat = self.offsets_path.stat()
        except OSError:
            return None
        signature = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if self._offsets_cache is not None and self._offsets_cache[0] == signature:
            return dict(self._offsets_cache[1])
        try:
            data = json.loads(self.offsets_path.read_text(encoding="utf-8"))
            files = data["files"]
            if data.get("format") != FORMAT or not isinstance(files, dict):
                return None
            offsets = {str(k): [int(v[0]), int(v[1])] for k, v in files.items()}
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None
        self._offsets_cache = (signature, offsets)
        return dict(offsets)

    def _save_offsets(self, offsets: dict[str, list[int]]) -> None:
        ordered = {key: offsets[key] for key in sorted(offsets)}
        atomic_write_text(self.offsets_path, json.dumps({"format": FORMAT, "files": ordered}, separators=(",", ":")))

    def _reset(self) -> tantivy.Index:
        """A new, empty index (the writer lock held): the old one, whatever it held, is gone."""
        import tantivy

        previous = self._meta()
        generation = (previous["generation"] + 1) if previous else int(time.time())
        with self.locks.store():
            shutil.rmtree(self.tantivy_dir, ignore_errors=True)
            self.offsets_path.unlink(missing_ok=True)
            self.tantivy_dir.mkdir(parents=True, exist_ok=True)
            index = tantivy.Index(schema(), path=str(self.tantivy_dir))
            self._save_offsets({})
            atomic_write_text(self.meta_path, json.dumps({"format": FORMAT, "generation": generation}))
        self._index, self._generation = index, generation
        return index

    def _open(self) -> tantivy.Index | None:
        """The index as it is on disk (reopened when another process rebuilt it); None when it is
        missing, of another format or unreadable."""
        import tantivy

        meta = self._meta()
        if meta is None:
            return None
        if self._index is not None and self._generation == meta["generation"]:
            return self._index
        if damaged_files(self.tantivy_dir):  # Tantivy would panic on them, its message on stderr
            return None
        try:
            index = tantivy.Index.open(str(self.tantivy_dir))
        except BaseException as exc:
            if not is_damage(exc):
                raise
            return None
        self._index, self._generation = index, int(meta["generation"])
        return index

    # -- catching up -------------------------------------------------------------------------
    def _scan(self) -> dict[str, tuple[str, int, int, int]]:
        """Every transcript: conversation id → (path, size, inode, mtime ns); one ``stat`` each."""
        found: dict[str, tuple[str, int, int, int]] = {}
        try:
            entries = os.scandir(self.transcripts_dir)
        except OSError:
            return found
        with entries:
            for entry in entries:
                if not entry.name.endswith(SUFFIX):
                    continue
                try:
                    stat = entry.stat()
                except OSError:
                    continue
                if S_ISREG(stat.st_mode):
                    found[entry.name[: -len(SUFFIX)]] = (entry.path, stat.st_size, stat.st_ino, stat.st_mtime_ns)
        return found

    def _work(self, offsets: dict[str, list[int]]) -> tuple[list[_Work], list[str], int]:
        """What to index, what to drop (transcripts gone), how many transcripts there are.

        Appended bytes of transcripts already indexed come first (a turn just written: cheap), then
        the transcripts to index whole, the most recently written first — so that a first build cut
        short by its budget (a partial answer) already holds the latest conversations."""
        work: list[tuple[bool, int, str, _Work]] = []
        files = self._scan()
        for cid, (path, size, inode, mtime) in files.items():
            known = offsets.get(cid)
            if known is None or known[1] != inode or size < known[0]:
                work.append((True, -mtime, cid, _Work(Path(path), cid, 0, True, inode)))
            elif size > known[0]:
                work.append((False, -mtime, cid, _Work(Path(path), cid, known[0], False, inode)))
        gone = sorted(set(offsets) - set(files))
        return [item for *_, item in sorted(work, key=lambda w: w[:3])], gone, len(files)

    def coverage(self) -> Coverage:
        """How much is indexed, without taking any lock or writing anything."""
        offsets = self._offsets() if self._meta() is not None else None
        work, _, total = self._work(offsets or {})
        return Coverage(total - len(work), total)

    def catch_up(
        self,
        *,
        budget_s: float | None = None,
        wait_s: float = 0.0,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
    ) -> Coverage:
        """Index what was appended to the transcripts since the last catch-up (rebuilding first when
        the index is missing or damaged); stop after ``budget_s`` seconds or when ``cancel`` is set.

        Takes the writer lock, waiting up to ``wait_s``; while another process holds it, nothing is
        written and the coverage is what is there."""
        if not self._take_writer(wait_s):
            return self.coverage()
        try:
            with self._lock:
                return self._catch_up(budget_s, progress, cancel)
        finally:
            self.locks.release_writer()

    def _take_writer(self, wait_s: float) -> bool:
        """Take the writer lock, waiting up to ``wait_s``; while waiting, ask its holder to let it go
        (:meth:`wanted`: a budgeted catch-up — the background build's slice — ends after its file)."""
        deadline = time.monotonic() + wait_s
        asked = False
        while not self.locks.try_writer():
            if time.monotonic() >= deadline:
                return False
            if not asked:
                self._ask_for_writer()
                asked = True
            time.sleep(0.02)
        return True

    @property
    def wanted_path(self) -> Path:
        return self.locks.directory / f"{NAME}.writer.wanted"

    def _ask_for_writer(self) -> None:
        try:
            self.wanted_path.parent.mkdir(parents=True, exist_ok=True)
            self.wanted_path.touch()
        except OSError:
            pass  # a read-only cache: the waiting search answers partial, as it would anyway

    def wanted(self, since_s: float) -> bool:
        """Whether a catch-up waited for the writer lock in the last ``since_s`` seconds (any process)."""
        try:
            return time.time() - self.wanted_path.stat().st_mtime < since_s
        except OSError:
            return False

    def _catch_up(self, budget_s: float | None, progress: Progress | None, cancel: threading.Event | None) -> Coverage:
        from services.history_search.redaction import redact_secrets

        index = self._open()
        offsets = self._offsets() if index is not None else None
        rebuilt = ""
        if index is None or offsets is None:
            rebuilt = self._damage()
            index, offsets = self._reset(), {}
        work, gone, total = self._work(offsets)
        if not work and not gone:
            return Coverage(total, total, rebuilt=rebuilt)
        redact_secrets("")  # the detectors load on first use: not counted in the budget
        started = time.monotonic()
        batch = _Batch(self, index, offsets)
        for cid in gone:
            batch.delete("conversation", cid)
            offsets.pop(cid, None)
        done = 0
        for item in work:
            if cancel is not None and cancel.is_set():
                break
            if budget_s is not None and done and time.monotonic() - started > budget_s:
                break
            if budget_s is not None and done and self.wanted(time.monotonic() - started):
                break  # a search waits for the writer lock: it goes first
            batch.add_file(item, redact_secrets)
            done += 1
            if progress is not None:
                progress(done, len(work))
        batch.commit()
        return Coverage(total - len(work) + done, total, batch.entries_total, rebuilt)

    def _damage(self) -> str:
        """Why the index folder cannot be used as it is ('' when there is none yet: a first build)."""
        if not self.directory.is_dir() or not any(self.directory.iterdir()):
            return ""
        try:
            meta = json.loads(self.meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "meta.json is missing or unreadable"
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            found = meta.get("format") if isinstance(meta, dict) else None
            return f"it is of another format ({found!r}, this Aries writes {FORMAT})"
        if self._offsets() is None:
            return "offsets.json is missing or unreadable"
        damaged = damaged_files(self.tantivy_dir)
        if damaged:
            more = f" and {len(damaged) - 1} more" if len(damaged) > 1 else ""
            return f"its Tantivy files are missing or damaged ({damaged[0]}{more})"
        return "its Tantivy files are missing or damaged"

    def rebuild(self, reason: str = "", *, wait_s: float = 30.0) -> Coverage:
        """Throw the index away and build it again from the transcripts (a damaged segment found
        while searching); as :meth:`catch_up`, nothing happens while another process writes.
        Raises :class:`SearchIndexError` when even the new index cannot be written."""
        if not self._take_writer(wait_s):
            return self.coverage()
        try:
            with self._lock:
                self._reset()
                coverage = self._catch_up(None, None, None)
                return replace(coverage, rebuilt=reason or coverage.rebuilt)
        except BaseException as exc:
            if not is_damage(exc):
                raise
            raise SearchIndexError(
                f"the conversation search index in {self.directory} cannot be built: {exc}"
            ) from None
        finally:
            self.locks.release_writer()

    # -- reading -----------------------------------------------------------------------------
    def searcher(self) -> tuple[tantivy.Index, tantivy.Searcher] | None:
        """The index and a searcher over it as last committed (None when there is no index yet),
        opened under the store lock so that no merge removes a segment while it opens. A searcher
        keeps the segments it opened: it is used without the lock."""
        with self._lock, self.locks.store(reader=True):
            index = self._open()
            if index is None:
                return None
            index.reload()
            return index, index.searcher()


class _Batch:
    """Documents added through one Tantivy writer, committed every :data:`BATCH_ENTRIES` entries
    (offsets saved after each commit)."""

    def __init__(self, owner: HistoryIndex, index: tantivy.Index, offsets: dict[str, list[int]]) -> None:
        self.owner = owner
        self.index = index
        self.offsets = offsets
        self.writer: Any = None
        self.entries = 0
        self.entries_total = 0

    def _writer(self) -> Any:
        if self.writer is None:
            self.writer = self.index.writer(heap_size=WRITER_HEAP, num_threads=1)
        return self.writer

    def delete(self, field: str, value: str) -> None:
        self._writer().delete_documents_by_term(field, value)

    def add_file(self, item: _Work, redact: Callable[[str], str]) -> None:
        with item.path.open("rb") as handle:
            handle.seek(item.start)
            data = handle.read()
        end = data.rfind(b"\n") + 1  # a torn last line waits for its newline (or its repair)
        writer = self._writer()
        if item.whole:
            writer.delete_documents_by_term("conversation", item.conversation_id)
        for raw in data[:end].split(b"\n"):
            entry = _entry(raw)
            if entry is None:
                continue
            if not item.whole:  # indexed before a crash lost its offset? replaced, never doubled
                writer.delete_documents_by_term("entry", str(entry.get("message_id", "")))
            for document in documents_for(entry, redact):
                writer.add_document(_tantivy_document(document))
            self.entries += 1
        self.offsets[item.conversation_id] = [item.start + end, item.inode]
        if self.entries >= BATCH_ENTRIES:
            self.commit()

    def commit(self) -> None:
        if self.writer is None:
            self.owner._save_offsets(self.offsets)
            return
        with self.owner.locks.store():
            self.writer.commit()
            self.writer.wait_merging_threads()
        self.writer = None
        self.owner._save_offsets(self.offsets)
        self.entries_total += self.entries
        self.entries = 0


def is_damage(exc: BaseException) -> bool:
    """Whether Tantivy's error says the files are damaged: its I/O and data errors, and a Rust panic
    (``pyo3_runtime.PanicException``, a ``BaseException``) on a file that is not what it wrote."""
    return isinstance(exc, (ValueError, OSError)) or type(exc).__name__ == "PanicException"


def _entry(raw: bytes) -> dict[str, Any] | None:
    if not raw.strip():
        return None
    try:
        entry = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None  # an unreadable line is reported by the transcript's own readers
    return entry if isinstance(entry, dict) else None


def _tantivy_document(document: SearchDocument) -> tantivy.Document:
    import tantivy

    doc = tantivy.Document()
    doc.add_text("key", document.key)
    doc.add_text("entry", document.entry)
    doc.add_text("conversation", document.conversation_id)
    doc.add_integer("seq", document.seq)
    doc.add_integer("turn", document.turn)
    doc.add_text("role", document.role)
    doc.add_text("kind", document.kind)
    doc.add_text("tool", document.tool)
    doc.add_text("timestamp", document.timestamp)
    doc.add_integer("epoch", document.epoch)
    doc.add_text("text", document.text)
    return doc


__all__ = [
    "BATCH_ENTRIES",
    "FORMAT",
    "NAME",
    "Coverage",
    "HistoryIndex",
    "SearchIndexError",
    "is_damage",
    "schema",
]
