"""The indexes of a workspace: opening their stores, listing, choosing, checking, repairing, dropping.

:class:`Indexes` is one part of the :class:`~services.retrieval.engine.RetrievalEngine` (which
holds it as ``engine.indexes``); the engine's ingest is :class:`~services.retrieval.engine_ingest.Ingestor`.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from services.errors import AriesError, InvalidInput, InvalidName
from services.retrieval.embedders import Embedder
from services.retrieval.engine_spaces import SPACE_KEYS, VectorSpaces
from services.retrieval.errors import IndexBusy, IndexNotFound, IndexStorageError, IngestError
from services.retrieval.faults import storage_guard
from services.retrieval.models import FileIssue, IndexInfo, IndexStatus, ProgressEvent
from services.retrieval.settings import RetrievalSettings
from services.retrieval.store import IndexStore
from services.retrieval.store_check import Consistency
from services.retrieval.store_locks import DEFAULT_WRITE_WAIT_S, IndexLocks, WaitCancelled
from services.retrieval.store_manifest import MANIFEST, read_index_info
from services.retrieval.store_vectors import VectorHealth
from services.retrieval.store_writer import recover
from services.text.names import validate_name

if TYPE_CHECKING:
    from services.workspace.manager import Workspace

ProgressCallback = Callable[[ProgressEvent], None]
MAX_K = 1000


def file_issue(path: str, error: IngestError) -> FileIssue:
    """The report line for ``path`` skipped or failed with ``error``."""
    return FileIssue(path=path, code=error.code, error=type(error).__name__, message=error.message)


def derive_index_name(path: Path) -> str:
    """An index name from a folder or file name, tidied for handles (``My Docs!/`` → ``My-Docs``)."""
    base = path.stem if path.is_file() else path.name
    cleaned = re.sub(r"[^\w.-]+", "-", base, flags=re.UNICODE).strip(".-")[:64].strip(".-")
    try:
        return validate_name(cleaned, "index")
    except InvalidName:
        return "index"


def parse_handle(handle: str) -> tuple[str, str]:
    index, sep, chunk_id = handle.strip().partition(":")
    if not sep or not index or not re.fullmatch(r"[0-9a-f]{16}", chunk_id):
        raise InvalidInput(f"{handle!r} is not a citation handle; expected <index>:<16 hex digits>")
    return index, chunk_id


class Indexes:
    """The indexes under ``<workspace>/indexes/<name>/`` (or in RAM: backend ``memory``) and their open stores."""

    def __init__(self, workspace: Workspace, settings: RetrievalSettings, spaces: VectorSpaces) -> None:
        self.workspace = workspace
        self.settings = settings
        self.spaces = spaces
        self._stores: dict[str, IndexStore] = {}
        self._lock = threading.RLock()
        self._memory_active: str | None = None

    def close(self) -> None:
        with self._lock:
            for store in self._stores.values():
                store.close()
            self._stores.clear()

    def index_dir(self, name: str) -> Path:
        return self.workspace.indexes_dir / validate_name(name, "index")

    def exists(self, name: str) -> bool:
        if self.settings.backend == "memory":
            return name in self._stores
        return (self.index_dir(name) / MANIFEST).is_file()

    def store(self, name: str, *, create: bool = False) -> IndexStore:
        validate_name(name, "index")
        with self._lock:
            store = self._stores.get(name)
            if store is not None:
                return store
            if not create and not self.exists(name):
                raise IndexNotFound(f"no index named {name!r}; see: rag index list", index=name)
            if self.settings.backend == "memory":
                store = IndexStore(name, None, chroma_url=self.settings.chroma_url)
            else:
                # A new index is created only by a writer (index_add holds the writer lock), as a
                # whole manifest renamed into place: a reader never sees a half-made one.
                directory = self.index_dir(name)
                info = read_index_info(directory) or {}
                chroma_url = info.get("chroma_url", self.settings.chroma_url)
                existed = directory.exists()
                try:
                    with storage_guard(name, directory, "open it"):
                        store = IndexStore(name, directory, chroma_url=chroma_url, create=create)
                        try:
                            recover(store)  # a journal left by an interrupted writer
                        except BaseException:
                            store.close()
                            raise
                except BaseException:
                    if not existed and create:  # the writer lock is held: leave no half-created index
                        import shutil

                        shutil.rmtree(directory, ignore_errors=True)
                    raise
            self._stores[name] = store
            return store

    def embedder_for(self, store: IndexStore) -> Embedder:
        """The embedder for ``store``'s vectors (see :class:`~services.retrieval.engine_spaces.VectorSpaces`)."""
        return self.spaces.embedder_for(store)

    def check_model(self, store: IndexStore, *, record: bool = False) -> Embedder:
        """The embedder for ``store``, or :class:`IndexMismatch` (see :meth:`VectorSpaces.check`)."""
        return self.spaces.check(store, record=record)

    # -- index lifecycle -------------------------------------------------------------------
    def list(self, *, check: bool = True) -> list[IndexInfo]:
        """The indexes; with ``check`` each one is opened and its vector store checked (``status``)."""
        active = self.active
        if self.settings.backend == "memory":
            return [self._from_store(name, store, active) for name, store in sorted(self._stores.items())]
        directory = self.workspace.indexes_dir
        if not directory.is_dir():
            return []
        infos: list[IndexInfo] = []
        for entry in sorted(directory.iterdir()):
            if entry.name.startswith("."):  # lock files, an index being created
                continue
            if entry.is_dir() and (entry / MANIFEST).is_file():
                infos.append(self._describe(entry, active, check))
        return infos

    def _describe(self, entry: Path, active: str | None, check: bool) -> IndexInfo:
        name = entry.name
        info = read_index_info(entry)
        if info is None:  # it exists: say so (and why), never hide it
            try:
                return self._from_store(name, self.store(name), active)
            except AriesError as exc:
                return IndexInfo(
                    name, name == active, "sqlite", None, 0, 0, [], None, None, IndexStatus.UNREADABLE, exc.message
                )
        status, detail = self._health(name) if check else (IndexStatus.UNCHECKED, None)
        return IndexInfo(
            name=name,
            active=name == active,
            backend="sqlite",
            embedding_model=info.get("embedding_model"),
            files=int(info.get("files", 0)),
            chunks=int(info.get("chunks", 0)),
            roots=list(info.get("roots", [])),
            created_at=info.get("created_at"),
            updated_at=info.get("updated_at"),
            status=status,
            status_detail=detail,
            failed=list(info.get("failed", [])),
            vectors_pending=int(info.get("pending") or 0),
            **self.spaces.describe(*(info.get(key) for key in SPACE_KEYS)),
        )

    def _from_store(self, name: str, store: IndexStore, active: str | None) -> IndexInfo:
        files, chunks = store.manifest.counts()
        health = self.vector_health(store)
        return IndexInfo(
            name=name,
            active=name == active,
            backend=self.settings.backend,
            embedding_model=store.manifest.get_meta("embedding_model"),
            files=files,
            chunks=chunks,
            roots=store.manifest.roots(),
            created_at=store.manifest.get_meta("created_at"),
            updated_at=store.manifest.get_meta("updated_at"),
            status=IndexStatus.of_vectors(health.status),
            status_detail=None if health.ok else health.detail,
            failed=[failure.to_dict() for failure in store.manifest.failures()],
            vectors_pending=store.manifest.pending_count(),
            **self.spaces.describe(*(store.manifest.get_meta(key) for key in SPACE_KEYS)),
        )

    def _health(self, name: str) -> tuple[IndexStatus, str | None]:
        """``ok`` or ``vectors missing|damaged`` with the reason; ``unreadable`` when the index does not open."""
        try:
            health = self.vector_health(self.store(name))
        except AriesError as exc:
            return IndexStatus.UNREADABLE, exc.message
        return IndexStatus.of_vectors(health.status), None if health.ok else health.detail

    @staticmethod
    def vector_health(store: IndexStore) -> VectorHealth:
        """The store's vector health, current with what other processes wrote (under its store lock)."""
        with store.reading():
            return store.vector_health

    def repair(
        self,
        name: str,
        *,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        wait_s: float = DEFAULT_WRITE_WAIT_S,
    ) -> int:
        """Rebuild the vectors of index ``name`` from its manifest; returns the vectors written.

        Holds the index's writer lock (waiting for another writer like ``index_add``: a ``wait``
        progress event, up to ``wait_s``, then :class:`IndexBusy`).  Raises
        :class:`~services.retrieval.ingest.Cancelled` when ``cancel`` is set (nothing changed).
        """
        from services.retrieval.ingest import Cancelled
        from services.retrieval.store_health import rebuild_vectors

        store = self.store(name)
        embedder = self.check_model(store)

        def step(done: int, total: int) -> None:
            if progress is not None:
                progress(ProgressEvent("repair", done, total))

        def waiting(message: str) -> None:
            if progress is not None:
                progress(ProgressEvent("wait", 0, 0, message))

        with storage_guard(name, store.directory, "rebuild its vectors"):
            try:
                return rebuild_vectors(store, embedder, progress=step, cancel=cancel, wait_s=wait_s, on_wait=waiting)
            except WaitCancelled:
                raise Cancelled from None
            except (IndexStorageError, IndexBusy):
                raise
            except Exception:
                self.forget(name)
                raise

    def forget(self, name: str) -> None:
        """Close and drop the cached store (after a failed write: the next use reopens and recovers)."""
        with self._lock:
            store = self._stores.pop(name, None)
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()

    def info(self, name: str, *, check: bool = True) -> IndexInfo:
        validate_name(name, "index")
        if self.settings.backend == "memory":
            if name in self._stores:
                return self._from_store(name, self._stores[name], self.active)
        elif self.exists(name):
            return self._describe(self.index_dir(name), self.active, check)
        raise IndexNotFound(f"no index named {name!r}; see: rag index list", index=name)

    @property
    def active(self) -> str | None:
        """The index queries go to: the workspace's ``active_index`` setting, if that index exists.

        With the ``memory`` backend the choice lives in this engine only (its indexes do not
        outlive it, so the workspace file is not touched).
        """
        if self.settings.backend == "memory":
            value = self._memory_active
        else:
            value = self.workspace.setting("active_index")
        if not value:
            return None
        name = str(value)
        try:
            return name if self.exists(name) else None
        except InvalidName:
            return None

    def active_setting(self) -> str | None:
        value = self._memory_active if self.settings.backend == "memory" else self.workspace.setting("active_index")
        return str(value) if value else None

    def set_active(self, name: str | None) -> None:
        if self.settings.backend == "memory":
            self._memory_active = name
        else:
            self.workspace.update(active_index=name)

    def use(self, name: str) -> IndexInfo:
        validate_name(name, "index")
        if not self.exists(name):
            raise IndexNotFound(f"no index named {name!r}; see: rag index list", index=name)
        self.set_active(name)
        return self.info(name)

    def check(self, name: str) -> Consistency:
        """Compare the manifest, Tantivy and Chroma of index ``name`` (every chunk id in all three)."""
        validate_name(name, "index")
        with storage_guard(name, self.index_dir(name) if self.settings.backend != "memory" else None, "check it"):
            return self.store(name).consistency()

    def locks(self, name: str) -> IndexLocks | None:
        if self.settings.backend == "memory":
            return None
        return IndexLocks(self.workspace.indexes_dir, validate_name(name, "index"))

    def drop(self, name: str) -> None:
        validate_name(name, "index")
        locks = self.locks(name)
        with storage_guard(name, self.index_dir(name) if locks else None, "drop it"):
            if locks is not None and not locks.try_writer():
                raise IndexBusy(f"index {name!r} is being written by another Aries ({locks.holder()}); drop it later")
            try:
                self._drop(name)
            finally:
                if locks is not None:
                    locks.release_writer()

    def _drop(self, name: str) -> None:
        with self._lock:
            store = self._stores.pop(name, None)
            if store is None and self.exists(name):
                try:
                    store = self.store(name)
                    self._stores.pop(name, None)
                except Exception:
                    store = None
            if store is not None:
                store.destroy()
            elif self.settings.backend == "memory" or not self.index_dir(name).exists():
                raise IndexNotFound(f"no index named {name!r}", index=name)
            else:
                import shutil

                shutil.rmtree(self.index_dir(name))
        if self.active_setting() == name:
            self.set_active(None)
