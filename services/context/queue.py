"""The context queue: jobs that follow a content change (tiers, index), one JSON file per job.

A job lives in ``<context root>/queue/<id>.json`` (``axiom://queue/<id>.json``), so it can be listed
and read through the tree like any file, while only ``system`` may write there
(:mod:`services.context.scopes`).  Ids sort in the order the jobs were made:
``<nanoseconds since the epoch, 20 digits>-<6 hex>-<kind>``.

Kinds:

* ``tiers``  — regenerate the tier files of ``target`` (a folder URI), its subfolders and parents;
* ``index``  — bring the index in line with the tree (``indexer(tree)``);
* ``commit-index`` — after a session commit: the tiers of the memory folders, then the index.

States: ``pending`` → ``running`` (written before the work starts) → the file is removed when the
work is done (a drained queue is an empty folder).  ``failed`` keeps the file with the error.

Replay safety: the work of every kind is idempotent (tier files are rewritten only when their inputs
changed; the indexer re-embeds nothing unchanged), so a job run twice — the process was killed after
the work but before the file was removed — changes nothing the second time.  One worker at a time
holds ``queue/.worker.lock``; a ``running`` job seen by the worker that holds the lock was left by a
process that died, and is simply run again.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from services.clock import utc_now
from services.context.errors import ContextError
from services.context.tree import ContextTree
from services.context.uri import AxiomUri

JobKind = Literal["tiers", "index", "commit-index"]
JOB_KINDS: tuple[str, ...] = ("tiers", "index", "commit-index")
QUEUE = AxiomUri("queue")
WORKER_LOCK = ".worker.lock"
WORKER_WAIT_S = 120.0


class QueueError(ContextError):
    """A job file that cannot be read, or a worker that could not start."""

    code = "queue_error"


class QueueBusy(QueueError):
    """Another process holds the queue worker lock for longer than the wait allows."""

    code = "queue_busy"


@dataclass
class Job:
    """One job of the queue (its JSON file is :meth:`to_dict`)."""

    id: str
    kind: str
    target: str | None = None
    state: str = "pending"
    created_at: str = ""
    attempts: int = 0
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def uri(self) -> AxiomUri:
        return AxiomUri("queue", (f"{self.id}.json",))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Job:
        if not isinstance(data, dict) or data.get("kind") not in JOB_KINDS or not isinstance(data.get("id"), str):
            raise QueueError(f"{where}: not a queue job")
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


def new_job_id(kind: str) -> str:
    return f"{time.time_ns():020d}-{secrets.token_hex(3)}-{kind}"


class JobQueue:
    """The jobs of one context tree."""

    def __init__(self, tree: ContextTree) -> None:
        self.tree = tree

    @property
    def folder(self) -> Any:
        return self.tree.path_of(QUEUE)

    def _save(self, job: Job) -> None:
        data = json.dumps(job.to_dict(), sort_keys=True, indent=2) + "\n"
        self.tree.write_text(job.uri, data, actor="system")

    def enqueue(self, kind: JobKind, target: AxiomUri | None = None, **detail: Any) -> Job:
        """Persist a new ``pending`` job and return it."""
        if kind not in JOB_KINDS:
            raise QueueError(f"unknown job kind {kind!r}")
        job = Job(
            id=new_job_id(kind),
            kind=kind,
            target=str(target) if target is not None else None,
            created_at=utc_now(),
            detail=dict(detail),
        )
        self._save(job)
        return job

    def jobs(self) -> list[Job]:
        """Every job still in the queue (pending, running, failed), oldest first."""
        out: list[Job] = []
        for entry in self.tree.ls(QUEUE):
            if entry.kind != "file" or not entry.name.endswith(".json"):
                continue
            try:
                raw = self.tree.read_text(entry.uri)
                out.append(Job.from_dict(json.loads(raw), str(entry.uri)))
            except (ValueError, ContextError):
                continue  # a job file torn or removed meanwhile: not a job
        return out

    def mark(self, job: Job, state: str, error: str | None = None) -> None:
        job.state = state
        job.error = error
        if state == "running":
            job.attempts += 1
        self._save(job)

    def done(self, job: Job) -> None:
        """The job's work is complete: its file goes (idempotent)."""
        if self.tree.exists(job.uri):
            self.tree.remove(job.uri, actor="system")

    @contextmanager
    def worker(self, wait_s: float = WORKER_WAIT_S) -> Iterator[None]:
        """Hold the one worker lock of this queue (waits up to ``wait_s`` for another worker)."""
        from filelock import FileLock, Timeout

        lock = FileLock(str(self.folder / WORKER_LOCK), timeout=wait_s, thread_local=False)
        try:
            lock.acquire()
        except Timeout:
            raise QueueBusy(f"another Aries is processing the context queue (waited {wait_s:.0f} s)") from None
        try:
            yield
        finally:
            lock.release()


__all__ = ["JOB_KINDS", "QUEUE", "Job", "JobKind", "JobQueue", "QueueBusy", "QueueError", "new_job_id"]
