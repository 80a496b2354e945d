"""Staging folders: a tree is built in a hidden folder beside its destination, then renamed into place.

One implementation for every import that unpacks an archive (workspace bundles, context packages).
A staging folder ``<parent>/<prefix><token>/`` holds:

- ``tree/``    the tree being written; renamed to the destination in one step when it is whole;
- ``old/``     with ``replace``: the destination that was there, moved aside for the moment between
               the two renames, then deleted;
- ``target``   the destination's name (written before ``old/`` exists, so a crash can be undone).

The importer holds ``<parent>/<prefix><token>.lock`` (acquired before the folder exists) for as long
as it works. A staging folder whose lock nobody holds belongs to an importer that was killed:
:func:`clean_stale_staging` removes it, first putting ``old/`` back where it was if the crash came
between the two renames (so a replaced destination is never lost).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from pathlib import Path
from types import TracebackType

from services.files.atomic import atomic_write_text, fsync_dir

TREE = "tree"
OLD = "old"
TARGET = "target"


class StagingArea:
    """A live staging folder, locked while the ``with`` block runs and removed when it ends."""

    def __init__(self, parent: Path, prefix: str) -> None:
        self.parent = Path(parent)
        self.prefix = prefix
        self.path = self.parent / f"{prefix}{secrets.token_hex(6)}"
        self.tree = self.path / TREE
        self.lock_path = self.parent / f"{self.path.name}.lock"
        self._lock: object | None = None

    def __enter__(self) -> StagingArea:
        from filelock import FileLock

        lock = FileLock(str(self.lock_path), timeout=0)
        lock.acquire()
        self._lock = lock
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        from filelock import FileLock

        try:
            shutil.rmtree(self.path, ignore_errors=True)
        finally:
            if isinstance(self._lock, FileLock):
                self._lock.release()
            with contextlib.suppress(FileNotFoundError):
                self.lock_path.unlink()

    def create(self) -> Path:
        """Make the folder and its empty ``tree/`` (call it only once the input has been checked)."""
        self.tree.mkdir(parents=True)
        return self.tree

    def install(self, destination: Path) -> bool:
        """Move ``tree/`` to ``destination`` (same parent); an existing destination is swapped out.

        Returns whether something was replaced. Readers see the old tree or the new one; a crash
        between the two renames is undone by :func:`clean_stale_staging` (the old tree comes back).
        """
        fsync_dir(self.tree)
        if not os.path.lexists(destination):
            os.rename(self.tree, destination)
            fsync_dir(destination.parent)
            return False
        atomic_write_text(self.path / TARGET, destination.name)
        os.rename(destination, self.path / OLD)
        os.rename(self.tree, destination)
        fsync_dir(destination.parent)
        shutil.rmtree(self.path / OLD, ignore_errors=True)
        return True


def _recover(staging: Path) -> None:
    """Put a destination moved aside by a killed importer back, if nothing took its place."""
    old, target = staging / OLD, staging / TARGET
    if not old.is_dir() or not target.is_file():
        return
    name = target.read_text(encoding="utf-8").strip()
    if not name or "/" in name or name in (".", ".."):
        return
    destination = staging.parent / name
    if not os.path.lexists(destination):
        os.rename(old, destination)
        fsync_dir(staging.parent)


def clean_stale_staging(parent: Path, prefix: str) -> list[str]:
    """Remove staging folders (and their locks) under ``parent`` left by importers that were killed."""
    from filelock import FileLock, Timeout

    removed: list[str] = []
    if not parent.is_dir():
        return removed
    for entry in sorted(parent.iterdir()):
        if not entry.name.startswith(prefix) or entry.name.endswith(".lock"):
            continue
        lock = FileLock(str(parent / f"{entry.name}.lock"), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            continue  # an import in progress
        try:
            if entry.is_dir() and not entry.is_symlink():
                _recover(entry)
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink()
            removed.append(entry.name)
        finally:
            lock.release()
            with contextlib.suppress(FileNotFoundError):
                (parent / f"{entry.name}.lock").unlink()
    for lock_file in sorted(parent.glob(f"{prefix}*.lock")):
        if lock_file.with_suffix("").exists():
            continue
        orphan = FileLock(str(lock_file), timeout=0)
        try:
            orphan.acquire()
        except Timeout:
            continue  # an importer that has not made its folder yet
        try:
            with contextlib.suppress(FileNotFoundError):
                lock_file.unlink()
        finally:
            orphan.release()
    return removed
