"""The context tree on disk: :class:`ContextTree` maps ``axiom://`` URIs to files under one root.

``axiom://resources/a/b.md`` is ``<root>/resources/a/b.md``; ``axiom://resources`` is the scope
folder.  The six scope folders are created when the tree is opened.

Safety:

* every path goes through :meth:`ContextTree.path_of`, whose last step resolves the path (following
  symlinks) and refuses it (:class:`NotInTree`) unless it stays inside its *scope* folder: a symlink
  out of the tree, or into another scope (which would dodge the scope's write rules), is refused.
  Writes and removals check the folder they change (the entry itself is replaced or unlinked, never
  followed);
* every write is checked by :func:`services.context.scopes.check_write` and is atomic
  (:func:`services.files.atomic.atomic_write_bytes`): a reader sees the old or the new file;
* whole resources are built in a staging folder under ``temp`` (:meth:`ContextTree.stage`) and moved
  into place with one rename (:meth:`ContextTree.finalize`), so a half-written resource is never
  visible outside ``temp``.  A staging folder is guarded by a lock file (``temp/.staging-<id>.lock``)
  that its process holds; one whose lock nobody holds (its process was killed) is removed by
  :meth:`ContextTree.clean_stale_staging`.  Folders are removed the same way: renamed into
  ``temp/trash-<id>`` (gone from view at once), then deleted.

Entries whose names begin with ``.`` (tier files, state, locks) are hidden from :meth:`ls` unless
``hidden=True``; entries whose names are not valid URI names (made outside Aries) are skipped.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat as stat_module
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from services.context.errors import (
    DirectoryNotEmpty,
    InvalidUri,
    NotInTree,
    NotText,
    ResourceExists,
    ResourceNotFound,
    ScopeReadOnly,
    StagingError,
    WrongKind,
)
from services.context.scopes import ACTORS, Actor, check_write
from services.context.uri import SCOPES, AxiomUri
from services.files.atomic import atomic_write_bytes, fsync_dir, remove_stale_temp_files

if TYPE_CHECKING:
    from filelock import BaseFileLock

Kind = Literal["file", "dir", "link", "other"]
STAGING_PREFIX = "staging-"
TRASH_PREFIX = "trash-"
PAYLOAD = "payload"


@dataclass(frozen=True)
class Entry:
    """One entry of the tree (from ``lstat``: a symlink is a ``link``, not what it points to)."""

    uri: AxiomUri
    kind: Kind
    size: int
    mtime_ns: int

    @property
    def name(self) -> str:
        return self.uri.name


class Staging:
    """A staging folder under ``temp``: write the resource at :attr:`path`, then ``finalize`` it.

    :attr:`path` does not exist yet: create a file there, or a folder (and files below it).
    """

    def __init__(self, token: str, folder: Path, actor: Actor, lock: BaseFileLock) -> None:
        self.token = token
        self.folder = folder
        self.path = folder / PAYLOAD
        self.uri = AxiomUri("temp", (folder.name, PAYLOAD))
        self.actor: Actor = actor
        self._lock = lock
        self.done = False

    def release(self) -> None:
        """Delete the staging folder and its lock (idempotent)."""
        if self.done:
            return
        self.done = True
        shutil.rmtree(self.folder, ignore_errors=True)
        _unlock(self._lock)


def _unlock(lock: BaseFileLock) -> None:
    lock.release()
    with contextlib.suppress(FileNotFoundError):
        Path(lock.lock_file).unlink()


def _file_lock(path: Path) -> BaseFileLock:
    from filelock import FileLock

    return FileLock(str(path), timeout=0, thread_local=False)


def _kind(mode: int) -> Kind:
    if stat_module.S_ISLNK(mode):
        return "link"
    if stat_module.S_ISDIR(mode):
        return "dir"
    if stat_module.S_ISREG(mode):
        return "file"
    return "other"


class ContextTree:
    """The context tree under ``root`` (a workspace's ``context/`` folder)."""

    def __init__(self, root: Path) -> None:
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        self.root = root.resolve()
        for scope in SCOPES:
            folder = self.root / scope
            if folder.is_symlink():
                raise NotInTree(f"the scope folder {scope}/ is a symlink; the context tree refuses it")
            folder.mkdir(exist_ok=True)

    # -- paths -------------------------------------------------------------------------

    def _raw_path(self, uri: AxiomUri) -> Path:
        if not isinstance(uri, AxiomUri):
            raise InvalidUri(f"not an AxiomUri: {type(uri).__name__}")
        return self.root.joinpath(uri.scope, *uri.segments)

    def _contain(self, uri: AxiomUri, path: Path) -> None:
        scope_dir = self.root / uri.scope
        resolved = Path(os.path.realpath(path))
        if resolved != scope_dir and not resolved.is_relative_to(scope_dir):
            raise NotInTree(f"{uri} leads outside axiom://{uri.scope} (a symlink?); refused", uri=str(uri))

    def path_of(self, uri: AxiomUri, *, follow: bool = True) -> Path:
        """The file-system path of ``uri``, after the containment check.

        With ``follow=False`` only the containing folder is checked (for operations that replace
        or unlink the entry itself rather than what a symlink there points to).
        """
        path = self._raw_path(uri)
        if follow or uri.is_root:
            self._contain(uri, path)
        else:
            self._contain(uri.parent, path.parent)
        return path

    def uri_of(self, path: Path) -> AxiomUri:
        """The URI of a path inside the tree (the inverse of :meth:`path_of`)."""
        try:
            parts = Path(os.path.abspath(path)).relative_to(self.root).parts
        except ValueError:
            raise NotInTree(f"{path} is not inside the context tree") from None
        if not parts:
            raise NotInTree("the context root itself has no URI")
        return AxiomUri(parts[0], tuple(parts[1:]))

    def _lstat(self, uri: AxiomUri) -> os.stat_result | None:
        try:
            return os.lstat(self.path_of(uri, follow=False))
        except (FileNotFoundError, NotADirectoryError):
            return None

    # -- reading -----------------------------------------------------------------------

    def exists(self, uri: AxiomUri) -> bool:
        return self._lstat(uri) is not None

    def stat(self, uri: AxiomUri) -> Entry:
        """The entry at ``uri`` (:class:`ResourceNotFound` when there is none)."""
        info = self._lstat(uri)
        if info is None:
            raise ResourceNotFound(f"nothing at {uri}", uri=str(uri))
        return Entry(uri, _kind(info.st_mode), info.st_size, info.st_mtime_ns)

    def ls(self, uri: AxiomUri, *, hidden: bool = False) -> list[Entry]:
        """The entries of the folder ``uri``, sorted by name; ``.`` names only with ``hidden=True``."""
        path = self.path_of(uri)
        try:
            names = os.listdir(path)
        except FileNotFoundError:
            raise ResourceNotFound(f"nothing at {uri}", uri=str(uri)) from None
        except NotADirectoryError:
            raise WrongKind(f"{uri} is a file, not a folder", uri=str(uri)) from None
        entries: list[Entry] = []
        for name in sorted(names):
            if name.startswith(".") and not hidden:
                continue
            try:
                child = AxiomUri(uri.scope, (*uri.segments, name))
                info = os.lstat(path / name)
            except (InvalidUri, FileNotFoundError):
                continue
            entries.append(Entry(child, _kind(info.st_mode), info.st_size, info.st_mtime_ns))
        return entries

    def read_bytes(self, uri: AxiomUri, *, limit: int | None = None) -> bytes:
        """The file's bytes (at most ``limit`` of them, from the start, when given)."""
        path = self.path_of(uri)
        try:
            with open(path, "rb") as handle:
                return handle.read(-1 if limit is None else max(0, limit))
        except FileNotFoundError:
            raise ResourceNotFound(f"nothing at {uri}", uri=str(uri)) from None
        except IsADirectoryError:
            raise WrongKind(f"{uri} is a folder, not a file", uri=str(uri)) from None

    def read_text(self, uri: AxiomUri) -> str:
        data = self.read_bytes(uri)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotText(f"{uri} is not UTF-8 text (byte {exc.start})", uri=str(uri)) from None

    # -- writing -----------------------------------------------------------------------

    def _make_parents(self, uri: AxiomUri) -> None:
        for ancestor in reversed(uri.ancestors):
            path = self.path_of(ancestor)
            if not path.exists():
                with contextlib.suppress(FileExistsError):
                    path.mkdir()
            elif not path.is_dir():
                raise WrongKind(f"{ancestor} is a file, not a folder", uri=str(ancestor))

    def write_bytes(self, uri: AxiomUri, data: bytes, *, actor: Actor) -> None:
        """Create or replace the file ``uri`` atomically (its folders are created as needed)."""
        check_write(uri, actor)
        if uri.is_root:
            raise WrongKind(f"{uri} is a scope folder, not a file", uri=str(uri))
        self._make_parents(uri)
        path = self.path_of(uri, follow=False)
        if path.is_dir() and not path.is_symlink():
            raise WrongKind(f"{uri} is a folder, not a file", uri=str(uri))
        atomic_write_bytes(path, bytes(data))

    def write_text(self, uri: AxiomUri, text: str, *, actor: Actor) -> None:
        self.write_bytes(uri, text.encode("utf-8"), actor=actor)

    def mkdir(self, uri: AxiomUri, *, actor: Actor, exist_ok: bool = True) -> None:
        """Create the folder ``uri`` and its parents."""
        if uri.is_root:
            return
        check_write(uri, actor)
        self._make_parents(uri)
        path = self.path_of(uri, follow=False)
        try:
            path.mkdir()
        except FileExistsError:
            if not exist_ok or not path.is_dir() or path.is_symlink():
                raise ResourceExists(f"{uri} already exists", uri=str(uri)) from None

    def remove(self, uri: AxiomUri, *, actor: Actor, recursive: bool = False) -> None:
        """Remove the file, link or folder ``uri`` (a folder with entries only with ``recursive``).

        A folder leaves the view in one rename (into ``temp``) before it is deleted.
        """
        check_write(uri, actor)
        if uri.is_root:
            raise WrongKind(f"{uri} is a scope folder; it cannot be removed", uri=str(uri))
        path = self.path_of(uri, follow=False)
        info = self._lstat(uri)
        if info is None:
            raise ResourceNotFound(f"nothing at {uri}", uri=str(uri))
        if not stat_module.S_ISDIR(info.st_mode):
            path.unlink()
        elif not recursive:
            try:
                path.rmdir()
            except OSError:
                raise DirectoryNotEmpty(f"{uri} is not empty", uri=str(uri)) from None
        else:
            self._trash(path)
        fsync_dir(path.parent)

    # -- staging -----------------------------------------------------------------------

    def _temp(self) -> Path:
        return self.path_of(AxiomUri("temp"))

    def _workdir(self, prefix: str) -> tuple[str, Path, BaseFileLock]:
        temp = self._temp()
        token = secrets.token_hex(8)
        lock = _file_lock(temp / f".{prefix}{token}.lock")
        lock.acquire()
        folder = temp / f"{prefix}{token}"
        folder.mkdir()
        return token, folder, lock

    def _trash(self, path: Path) -> None:
        _token, folder, lock = self._workdir(TRASH_PREFIX)
        try:
            os.rename(path, folder / PAYLOAD)
            fsync_dir(path.parent)
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            _unlock(lock)

    def stage(self, actor: Actor) -> Staging:
        """A new staging folder under ``temp`` for a resource ``actor`` will :meth:`finalize`."""
        if actor not in ACTORS:
            raise ScopeReadOnly(f"unknown actor {actor!r}")
        token, folder, lock = self._workdir(STAGING_PREFIX)
        return Staging(token, folder, actor, lock)

    @contextlib.contextmanager
    def staging(self, actor: Actor) -> Iterator[Staging]:
        """:meth:`stage` as a context manager: the staging folder is removed unless finalized."""
        staging = self.stage(actor)
        try:
            yield staging
        finally:
            staging.release()

    def finalize(self, staging: Staging, dest: AxiomUri, *, replace: bool = False) -> AxiomUri:
        """Move the staged resource to ``dest`` in one rename; the staging folder is then removed.

        ``dest`` is checked against the write rules for the staging's actor.  An existing ``dest``
        is :class:`ResourceExists` unless ``replace``: a file is then swapped in one ``os.replace``;
        a folder is first moved aside into ``temp`` (``dest`` is briefly absent, never half-written).
        Symlinks and special files in the staged resource are refused (:class:`StagingError`).
        """
        if staging.done:
            raise StagingError(f"staging {staging.token} was already finalized or discarded")
        if staging.folder.parent != self._temp():
            raise StagingError(f"{staging.folder} is not a staging folder of this tree")
        check_write(dest, staging.actor)
        if dest.scope == "temp" or dest.is_root:
            raise StagingError(f"cannot finalize into {dest}")
        _check_payload(staging.path)
        self._make_parents(dest)
        target = self.path_of(dest, follow=False)
        existing = self._lstat(dest)
        if existing is not None and not replace:
            raise ResourceExists(f"{dest} already exists", uri=str(dest))
        if existing is not None and (stat_module.S_ISDIR(existing.st_mode) or staging.path.is_dir()):
            self._trash(target)
        os.replace(staging.path, target)
        fsync_dir(target.parent)
        staging.release()
        return dest

    def discard(self, staging: Staging) -> None:
        """Drop a staging folder without finalizing it."""
        staging.release()

    def clean_stale_staging(self, *, sweep_temp_files: bool = False) -> list[str]:
        """Remove staging and trash folders whose process is gone (their lock is free).

        Returns the names removed from ``temp``.  With ``sweep_temp_files`` the ``.name.*.tmp``
        leftovers of killed atomic writes are removed from every folder of the tree too; use it
        only when no other process is writing this tree (at start-up, under the workspace lease).
        """
        from filelock import Timeout

        temp = self._temp()
        removed: list[str] = []
        for name in sorted(os.listdir(temp)):
            is_lock = name.startswith(".") and name.endswith(".lock")
            base = name[1:-5] if is_lock else name
            if not base.startswith((STAGING_PREFIX, TRASH_PREFIX)):
                continue
            lock = _file_lock(temp / f".{base}.lock")
            try:
                lock.acquire()
            except Timeout:  # its process is alive and holds it
                continue
            try:
                folder = temp / base
                if folder.exists():
                    shutil.rmtree(folder, ignore_errors=True)
                    removed.append(base)
            finally:
                _unlock(lock)
        if sweep_temp_files:
            for where, _dirs, _files in os.walk(self.root):
                removed.extend(p.name for p in remove_stale_temp_files(Path(where)))
        return removed


def _check_payload(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise StagingError("nothing was staged (the payload is missing)") from None
    if stat_module.S_ISDIR(info.st_mode):
        for folder, dirs, files in os.walk(path):
            for name in dirs + files:
                mode = os.lstat(Path(folder) / name).st_mode
                if not (stat_module.S_ISDIR(mode) or stat_module.S_ISREG(mode)):
                    raise StagingError(f"staged entry {name!r} is not a plain file or folder")
    elif not stat_module.S_ISREG(info.st_mode):
        raise StagingError("the staged payload is not a plain file or folder")


__all__ = ["ContextTree", "Entry", "Staging"]
