"""The documents the web viewer serves, and how one is found, read, validated, written and reindexed.

Two sources, each with its own stable ids:

* ``rag/<index>/<relative path>``: the files under the folder (or the one file) each ``/rag`` index
  of the workspace was built from (the roots its manifest records; the ``context`` index is served
  as ``axiom://`` documents instead).  Saving one re-reads that one file into its index
  (:meth:`RetrievalEngine.index_update`: incremental, whole-file atomic; the rest of the index is not
  touched).
* ``axiom://resources|user|agent/...``: the files of the context tree.  Saving one goes through
  :meth:`ContextService.replace_file` (scope rules, atomic write, its ``tiers`` and ``index`` jobs)
  and :meth:`ContextService.process_queue`, so the ``context`` index and the L0/L1 tiers follow.

Kinds come from the extension: markdown (``.md``, ``.markdown``), json and yaml (``.yaml``, ``.yml``)
are editable (full-document replace); jsonl, xml and txt are shown read-only; pdf, html (``.html``,
``.htm``) and epub are shown read-only as the text indexing extracts from them (the same loaders, in
the loader sandbox), page by page or section by section (:meth:`DocumentSet.extracted`).  An id is checked before
anything is opened: an index name by :func:`services.text.names.validate_name`, a relative path by
:meth:`PathGuard.check_syntax` plus no ``.``/``..``/empty/hidden names (:class:`BadDocumentId`, 400), an
``axiom://`` id by :func:`services.context.uri.parse_uri`; then the real path must be a regular file
inside its root (a link out of it is :class:`DocumentNotFound`, 404).  Files are opened without
following a last-moment link (``O_NOFOLLOW``).

Crash safety: before a save writes, a marker ``<workspace>/web/pending/<hash>.json`` names the
document; it is removed once the reindex is done.  :meth:`DocumentSet.reconcile` (run before the server
answers any document request) reindexes every document left marked by a killed save.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.errors import AriesError
from services.files.atomic import atomic_write_bytes
from services.hashing import sha256_hex
from services.web.errors import (
    BadDocumentId,
    DocumentNotFound,
    DocumentTooLarge,
    InvalidDocument,
    NotText,
    ReadOnlyDocument,
    ReindexFailed,
)

if TYPE_CHECKING:
    from services.context.service import ContextService
    from services.context.uri import AxiomUri
    from services.retrieval.engine import RetrievalEngine
    from services.workspace.manager import Workspace

KINDS: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".jsonl": "jsonl",
    ".xml": "xml",
    ".txt": "txt",
    ".pdf": "pdf",
    ".html": "html",
    ".htm": "html",
    ".epub": "epub",
}
EDITABLE_KINDS = frozenset({"markdown", "json", "yaml"})
EXTRACTED_KINDS: dict[str, str] = {"pdf": "application/pdf", "html": "text/html", "epub": "application/epub+zip"}
"""Kinds shown as their extracted text (the content type their loader reads)."""
MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
"""The largest document the viewer opens or saves (the request body cap is the same, plus JSON framing)."""
MAX_TREE_DOCUMENTS = 10_000
RAG_PREFIX = "rag/"
CONTEXT_SCOPES = ("resources", "user", "agent")
CONTEXT_INDEX = "context"
Progress = Callable[[str], None]


def kind_of(name: str) -> str | None:
    return KINDS.get(os.path.splitext(name.lower())[1])


def etag_of(data: bytes) -> str:
    """The etag of a document: the SHA-256 of the bytes on disk, in hex."""
    return sha256_hex(data)


@dataclass(frozen=True)
class Document:
    id: str
    path: str
    """What the tree and the title show: ``<index>/<relative path>`` or the ``axiom://`` URI."""
    kind: str
    editable: bool
    size: int
    file: Path
    index: str | None = None
    root: Path | None = None
    rel: str = ""
    uri: AxiomUri | None = None
    note: str | None = None
    """Why a document of an editable kind is read-only (a read-only scope, an inconsistent index)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "path": self.path,
            "kind": self.kind,
            "editable": self.editable,
            "bytes": self.size,
        }
        if self.note:
            out["note"] = self.note
        return out


def validate_content(kind: str, text: str) -> None:
    """Refuse JSON or YAML that does not parse (:class:`InvalidDocument` with 1-based line and column)."""
    if kind == "json":
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidDocument(f"invalid JSON: {exc.msg}", line=exc.lineno, column=exc.colno) from None
    elif kind == "yaml":
        from ruamel.yaml import YAML
        from ruamel.yaml.error import MarkedYAMLError, YAMLError

        try:
            for _ in YAML(typ="safe", pure=True).load_all(text):
                pass
        except MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line, column = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
            problem = exc.problem or exc.context or "cannot be parsed"
            raise InvalidDocument(f"invalid YAML: {problem}", line=line, column=column) from None
        except YAMLError as exc:
            raise InvalidDocument(f"invalid YAML: {exc}", line=None, column=None) from None


def read_file(path: Path, cap: int = MAX_DOCUMENT_BYTES) -> bytes:
    """A regular file's bytes, opened without following a link at ``path`` itself, at most ``cap``."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        raise DocumentNotFound("no such document (it may have been removed)") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise DocumentNotFound("no such document (not a regular file)")
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise DocumentTooLarge(f"the document is over the viewer's {cap}-byte limit")
    return data


def extracted_note(kind: str) -> str:
    part = "page" if kind == "pdf" else "section"
    return f"read-only: the text extracted from the {kind.upper()} for its index, {part} by {part}"


def extracted_text(segments: list[dict[str, Any]]) -> str:
    """The extracted segments as one text, each under a ``[page N · section]`` line."""
    blocks = []
    for segment in segments:
        where = " · ".join(
            part for part in (f"page {segment['page']}" if segment["page"] else "", segment["section"] or "") if part
        )
        blocks.append(f"[{where}]\n{segment['text']}" if where else str(segment["text"]))
    return "\n\n".join(blocks) + "\n"


def _inside(path: Path, root: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == root or real.is_relative_to(root)


def _regular(path: Path) -> os.stat_result | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info if stat.S_ISREG(info.st_mode) else None


def _walk(root: Path) -> Iterator[tuple[str, Path]]:
    """(relative POSIX path, path) of the files of a known kind under ``root``: no hidden names, no
    folder links followed, no file whose real path leaves ``root``; sorted."""
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(directory)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (base / d).is_symlink())
        for filename in sorted(filenames):
            path = base / filename
            if filename.startswith(".") or kind_of(filename) is None or not _inside(path, root):
                continue
            yield path.relative_to(root).as_posix(), path


def _check_rel(rel: str) -> str:
    from services.policy.paths import PathGuard

    try:
        PathGuard.check_syntax(rel, "document path")
    except AriesError as exc:
        raise BadDocumentId(f"bad document id: {exc.message}") from None
    if rel.startswith("/") or any(part in ("", ".", "..") or part.startswith(".") for part in rel.split("/")):
        raise BadDocumentId("bad document id: a path relative to its index folder, without '.', '..' or hidden names")
    return rel


class DocumentSet:
    """The documents of one workspace (see the module docstring)."""

    def __init__(self, workspace: Workspace, engine: RetrievalEngine, context: ContextService) -> None:
        self.workspace = workspace
        self.engine = engine
        self.context = context
        self.readonly_indexes: dict[str, str] = {}
        """Indexes that failed their consistency check at start-up (their documents are read-only)."""
        self.pending_dir = Path(workspace.root) / "web" / "pending"

    # -- the tree ------------------------------------------------------------------------------
    def _rag_roots(self) -> list[tuple[str, Path]]:
        context_root = Path(os.path.realpath(self.context.tree.root))
        roots: list[tuple[str, Path]] = []
        for info in self.engine.index_list(check=False):
            if info.name == CONTEXT_INDEX:
                continue
            for text in info.roots:
                root = Path(os.path.realpath(text))
                if root == context_root or root.is_relative_to(context_root) or not root.exists():
                    continue
                roots.append((info.name, root))
        return roots

    def documents(self) -> list[Document]:
        found: list[Document] = []
        for index, root in self._rag_roots():
            files = [(root.name, root)] if root.is_file() else list(_walk(root))
            for rel, path in files:
                if kind_of(rel) is not None and (info := _regular(path)) is not None:
                    found.append(self._rag_document(index, root, rel, path, info.st_size))
        tree = self.context.tree
        for scope in CONTEXT_SCOPES:
            for _rel, path in _walk(tree.root / scope):
                info = _regular(path)
                if info is None or os.path.islink(path):
                    continue
                try:
                    uri = tree.uri_of(path)
                except AriesError:
                    continue  # a name that is not a valid URI name (made outside Aries)
                found.append(self._context_document(uri, path, info.st_size))
        return found[:MAX_TREE_DOCUMENTS]

    def _rag_document(self, index: str, root: Path, rel: str, path: Path, size: int) -> Document:
        kind = kind_of(rel) or "txt"
        note = extracted_note(kind) if kind in EXTRACTED_KINDS else None
        if kind in EDITABLE_KINDS and index in self.readonly_indexes:
            note = f"read-only: {self.readonly_indexes[index]}"
        editable = kind in EDITABLE_KINDS and note is None
        doc_id, shown = f"{RAG_PREFIX}{index}/{rel}", f"{index}/{rel}"
        return Document(doc_id, shown, kind, editable, size, path, index, root, rel, note=note)

    def _context_document(self, uri: AxiomUri, path: Path, size: int) -> Document:
        from services.context.scopes import can_write

        kind = kind_of(uri.name) or "txt"
        writable = can_write(uri, "user")
        note = None if writable or kind not in EDITABLE_KINDS else f"read-only: {uri.scope} is written by Aries only"
        if kind in EXTRACTED_KINDS:
            note = extracted_note(kind)
        editable = kind in EDITABLE_KINDS and writable
        return Document(str(uri), str(uri), kind, editable, size, path, uri=uri, note=note)

    # -- one document --------------------------------------------------------------------------
    def resolve(self, doc_id: str) -> Document:
        """The document ``doc_id`` names, after every check; nothing is read before they pass."""
        if not isinstance(doc_id, str) or not doc_id:
            raise BadDocumentId("a document id is required (?id=...)")
        if doc_id.startswith(RAG_PREFIX):
            return self._resolve_rag(doc_id[len(RAG_PREFIX) :])
        if doc_id[:8].lower() == "axiom://":
            return self._resolve_context(doc_id)
        raise BadDocumentId("bad document id: expected rag/<index>/<path> or axiom://<scope>/<path>")

    def _resolve_rag(self, rest: str) -> Document:
        from services.text.names import validate_name

        index, _, rel = rest.partition("/")
        try:
            validate_name(index, "index")
        except AriesError as exc:
            raise BadDocumentId(f"bad document id: {exc.message}") from None
        _check_rel(rel)
        if kind_of(rel) is None:
            raise DocumentNotFound(f"no document rag/{index}/{rel} (not a kind the viewer shows)")
        for name, root in self._rag_roots():
            if name != index:
                continue
            path = (root if rel == root.name else None) if root.is_file() else root / rel
            if path is None or not _inside(path, root):
                continue
            info = _regular(path)
            if info is not None:
                return self._rag_document(index, root, rel, path, info.st_size)
        raise DocumentNotFound(f"no document rag/{index}/{rel}")

    def _resolve_context(self, doc_id: str) -> Document:
        from services.context.uri import parse_uri

        try:
            uri = parse_uri(doc_id)
        except AriesError as exc:
            raise BadDocumentId(f"bad document id: {exc.message}") from None
        if uri.scope not in CONTEXT_SCOPES or uri.is_root or any(s.startswith(".") for s in uri.segments):
            raise DocumentNotFound(f"no document {uri} (the viewer shows files of {', '.join(CONTEXT_SCOPES)})")
        if kind_of(uri.name) is None:
            raise DocumentNotFound(f"no document {uri} (not a kind the viewer shows)")
        tree = self.context.tree
        try:
            path = tree.path_of(uri)
            entry = tree.stat(uri)
        except AriesError:
            raise DocumentNotFound(f"no document {uri}") from None
        if entry.kind != "file":
            raise DocumentNotFound(f"no document {uri} (not a regular file)")
        return self._context_document(uri, path, entry.size)

    def read(self, doc: Document) -> bytes:
        root = doc.root if doc.root is not None else self.context.tree.root
        if not _inside(doc.file, Path(os.path.realpath(root))):
            raise DocumentNotFound(f"no document {doc.id}")
        return read_file(doc.file)

    def extracted(self, doc: Document) -> tuple[bytes, list[dict[str, Any]]]:
        """A PDF, HTML or EPUB document's bytes and the segments its loader extracts (text, page,
        section), parsed in the engine's loader sandbox (time and memory limits) as indexing does."""
        from services.retrieval.errors import IngestError

        root = doc.root if doc.root is not None else self.context.tree.root
        if not _inside(doc.file, Path(os.path.realpath(root))):
            raise DocumentNotFound(f"no document {doc.id}")
        limits = self.engine.settings.limits
        data = read_file(doc.file, limits.max_file_bytes)
        try:
            loaded = self.engine.ingestor.sandboxed().load(EXTRACTED_KINDS[doc.kind], data)
        except IngestError as exc:
            raise NotText(f"{doc.path}: its text cannot be extracted: {exc.message}") from None
        segments = [{"text": s.text, "page": s.page, "section": s.section} for s in loaded.segments]
        return data, segments

    # -- saving --------------------------------------------------------------------------------
    def check_editable(self, doc: Document) -> None:
        if not doc.editable:
            why = doc.note or f"{doc.kind} documents are shown read-only (editable: markdown, json, yaml)"
            raise ReadOnlyDocument(f"{doc.path} cannot be saved: {why}")

    def write(self, doc: Document, data: bytes) -> None:
        """Replace the document on disk atomically (the pending marker first: see the module docstring)."""
        self.check_editable(doc)
        self._mark(doc.id)
        if doc.uri is not None:
            self.context.replace_file(doc.uri, data)
        else:
            atomic_write_bytes(doc.file, data)

    def reindex(self, doc: Document) -> dict[str, Any]:
        """Bring the document's index up to date, synchronously; the pending marker is then removed."""
        try:
            if doc.uri is not None:
                queued = self.context.process_queue()
                if queued.failed:
                    raise ReindexFailed(f"saved, but the context queue failed: {queued.failed[0][1]}")
                summary: dict[str, Any] = {"index": CONTEXT_INDEX, "jobs": len(queued.processed)}
            else:
                assert doc.index is not None and doc.root is not None
                report = self.engine.index_update(doc.index, doc.root, [doc.rel])
                if report.errors:
                    raise ReindexFailed(f"saved, but {doc.rel} could not be indexed: {report.errors[0].message}")
                summary = {"index": doc.index, "updated": report.updated + report.added, "skipped": len(report.skipped)}
        except ReindexFailed:
            raise
        except AriesError as exc:
            raise ReindexFailed(f"saved, but the reindex failed: {exc.message}") from None
        self._unmark(doc.id)
        return summary

    def _marker(self, doc_id: str) -> Path:
        return self.pending_dir / f"{sha256_hex(doc_id)[:32]}.json"

    def _mark(self, doc_id: str) -> None:
        self.pending_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self._marker(doc_id), json.dumps({"id": doc_id}).encode("utf-8"))

    def _unmark(self, doc_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._marker(doc_id).unlink()

    # -- start-up ------------------------------------------------------------------------------
    def reconcile(self, progress: Progress | None = None) -> dict[str, Any]:
        """Before any document is served: the context tree's reconcile, each rag index's consistency
        check (an inconsistent one is served read-only), and the reindex of saves a crash left pending."""

        def say(message: str) -> None:
            if progress is not None:
                progress(message)

        say("reconciling the context tree")
        context = self.context.reconcile(full=False).to_dict()
        names = sorted({name for name, _root in self._rag_roots()})
        for number, name in enumerate(names, 1):
            say(f"checking index {name} ({number}/{len(names)})")
            try:
                consistency = self.engine.index_check(name)
            except AriesError as exc:
                self.readonly_indexes[name] = exc.message
                continue
            if not consistency.ok:
                self.readonly_indexes[name] = consistency.summary()
        replayed: list[str] = []
        if self.pending_dir.is_dir():
            from services.files.atomic import remove_stale_temp_files

            remove_stale_temp_files(self.pending_dir)
            for marker in sorted(self.pending_dir.glob("*.json")):
                say(f"reindexing a document whose save was interrupted ({marker.stem[:8]})")
                try:
                    doc_id = str(json.loads(marker.read_text("utf-8"))["id"])
                    doc = self.resolve(doc_id)
                    for leftover in doc.file.parent.glob(f".{doc.file.name}.*.tmp"):  # a write killed mid-way
                        with contextlib.suppress(FileNotFoundError):
                            leftover.unlink()
                    self.reindex(doc)
                    replayed.append(doc_id)
                except (AriesError, ValueError, KeyError, TypeError):
                    pass
                with contextlib.suppress(FileNotFoundError):
                    marker.unlink()
        return {"context": context, "readonly_indexes": dict(self.readonly_indexes), "replayed": replayed}
