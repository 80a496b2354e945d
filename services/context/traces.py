"""Retrieval traces of find/search: what they are, and the ``context_traces`` table that keeps them.

A :class:`Trace` says how one call reached its hits: the query as typed and as normalized (with
the terms a session added), the start points (directories and their scores), every recursive step
(the directory, its score, its own tier score, the hits it gave and the children kept, with their
scores), the budget (limits and what was used), the stop reason and the timings.

Stop reasons (:data:`STOP_REASONS`): ``exhausted`` (nothing left to visit), ``limit`` (enough hits,
and nothing left could beat them), ``max_ms``, ``max_nodes``, ``max_depth`` (the budget ran out:
time, directories visited, levels below a start point).

Traces are kept in the ``context_traces`` table of the workspace's ``audit.db`` (the file the
retrieval audit shares; this module touches only its own table), so they survive restarts and can
be listed (:meth:`TraceStore.recent`) and read by id (:meth:`TraceStore.get`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from services.audit.db import CONTEXT_TRACES_SCHEMA, OwnTable
from services.clock import utc_now
from services.context.errors import ContextError
from services.errors import InvalidInput, NotFound

STOP_REASONS: tuple[str, ...] = ("exhausted", "limit", "max_ms", "max_nodes", "max_depth")
DEFAULT_MAX_MS = 10_000.0
"""A safety net (a cold first query opens the index: seconds on a loaded machine); set tighter per call."""
DEFAULT_MAX_NODES = 2000
DEFAULT_MAX_DEPTH = 32


class TraceNotFound(ContextError, NotFound):
    """No trace with that id."""

    code = "trace_not_found"


@dataclass(frozen=True)
class Budget:
    """Per-request limits: wall time (ms), directories visited, levels below a start point."""

    max_ms: float = DEFAULT_MAX_MS
    max_nodes: int = DEFAULT_MAX_NODES
    max_depth: int = DEFAULT_MAX_DEPTH

    def __post_init__(self) -> None:
        if not self.max_ms > 0:
            raise InvalidInput(f"max_ms must be more than 0 (got {self.max_ms})")
        if self.max_nodes < 1:
            raise InvalidInput(f"max_nodes must be at least 1 (got {self.max_nodes})")
        if self.max_depth < 0:
            raise InvalidInput(f"max_depth must be 0 or more (got {self.max_depth})")


@dataclass
class Trace:
    """How one find/search call went; JSON-ready with :meth:`to_dict`."""

    id: str
    kind: str
    query: str
    normalized: str
    ts: str = field(default_factory=utc_now)
    expansion: list[str] = field(default_factory=list)
    target: str | None = None
    filter: dict[str, Any] = field(default_factory=dict)
    limit: int = 10
    settings: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)
    start_points: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    budget_used: dict[str, Any] = field(default_factory=dict)
    stop_reason: str = "exhausted"
    timings: dict[str, float] = field(default_factory=dict)
    hits: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        known = {name for name in cls.__dataclass_fields__}
        return cls(**{key: value for key, value in data.items() if key in known})


class TraceStore(OwnTable):
    """The ``context_traces`` table of one ``audit.db``."""

    SCHEMA = CONTEXT_TRACES_SCHEMA

    def record(self, trace: Trace) -> None:
        with self._connect() as db:
            db.execute(
                "INSERT INTO context_traces (id, ts, kind, query, stop_reason, hits, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    trace.id,
                    trace.ts,
                    trace.kind,
                    trace.query,
                    trace.stop_reason,
                    len(trace.hits),
                    json.dumps(trace.to_dict(), sort_keys=True),
                ),
            )

    def get(self, trace_id: str) -> Trace:
        row = None
        if self.db_path.exists():
            with self._connect() as db:
                row = db.execute("SELECT data FROM context_traces WHERE id = ?", (trace_id,)).fetchone()
        if row is None:
            raise TraceNotFound(f"no trace {trace_id!r}; see: aries context trace")
        return Trace.from_dict(json.loads(row[0]))

    def recent(self, limit: int = 20) -> list[Trace]:
        """The newest traces first."""
        if not self.db_path.exists():
            return []
        with self._connect() as db:
            rows = db.execute("SELECT data FROM context_traces ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
        return [Trace.from_dict(json.loads(row[0])) for row in rows]
