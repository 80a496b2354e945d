"""Reconcile: bring the tree, the queue and the index back to a consistent state after a crash.

``ContextService.reconcile`` runs the steps; this module holds their report and the look-ups on the
tree's folder that need no service.  In order (each step idempotent; running reconcile twice
changes nothing the second time):

1. stale staging folders of ``context add`` and of removals under ``axiom://temp`` (their process is
   gone: the lock is free) are removed — a resource killed mid-add never appears half-moved;
2. stale staging folders of package imports (``.package-import-*`` beside their destination) are
   removed, a destination moved aside by a killed ``--force`` import put back first;
3. session commits left with a journal are finished (:func:`recover_commit`);
4. queue jobs left ``running`` or ``failed`` are made ``pending`` and the queue is processed;
5. tier files of every folder of ``resources``, ``user``, ``agent`` are regenerated where out of date
   (a resource moved into place just before a crash, with no job enqueued yet, is caught here);
6. the index is brought in line with the tree (``indexer(tree)``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.context.session_commit import JOURNAL, META

_PACKAGE_SCOPES = ("resources", "user", "agent")


@dataclass
class ReconcileReport:
    staging_removed: list[str] = field(default_factory=list)
    package_staging_removed: list[str] = field(default_factory=list)
    commits_recovered: list[str] = field(default_factory=list)
    jobs_rerun: list[str] = field(default_factory=list)
    jobs_processed: int = 0
    jobs_failed: list[dict[str, str]] = field(default_factory=list)
    tiers_changed: list[str] = field(default_factory=list)
    index: Any = None
    queue_remaining: int = 0

    @property
    def consistent(self) -> bool:
        return self.queue_remaining == 0 and not self.jobs_failed

    @property
    def changed(self) -> bool:
        return bool(
            self.staging_removed
            or self.package_staging_removed
            or self.commits_recovered
            or self.jobs_rerun
            or self.jobs_processed
            or self.tiers_changed
        )

    def to_dict(self) -> dict[str, Any]:
        index = self.index
        return {
            "staging_removed": self.staging_removed,
            "package_staging_removed": self.package_staging_removed,
            "commits_recovered": self.commits_recovered,
            "jobs_rerun": self.jobs_rerun,
            "jobs_processed": self.jobs_processed,
            "jobs_failed": self.jobs_failed,
            "tiers_changed": self.tiers_changed,
            "index": index_dict(index),
            "queue_remaining": self.queue_remaining,
            "consistent": self.consistent,
        }


def package_staging(root: Path) -> list[str]:
    from services.context.packages import PACKAGE_STAGING_PREFIX, clean_stale_package_staging

    removed: list[str] = []
    for scope in _PACKAGE_SCOPES:
        for where, dirnames, filenames in os.walk(root / scope, followlinks=False):
            names = dirnames + filenames
            if any(name.startswith(PACKAGE_STAGING_PREFIX) for name in names):
                base = Path(where)
                removed.extend((base / name).relative_to(root).as_posix() for name in clean_stale_package_staging(base))
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
    return removed


def pending_commits(root: Path) -> list[str]:
    folder = root / "session"
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if (p / JOURNAL).is_file() and (p / META).is_file())


__all__ = ["ReconcileReport", "index_dict", "package_staging", "pending_commits"]


def index_dict(index: object) -> Any:
    """The indexer's report as JSON data (an IngestReport's ``to_dict``)."""
    to_dict = getattr(index, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return index if isinstance(index, dict | list | str | int | type(None)) else repr(index)
