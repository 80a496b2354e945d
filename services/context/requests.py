"""Request logs of the context service (spec FR-007): one ``context_requests`` row per operation.

Every :class:`~services.context.service.ContextService` operation and every find/search appends a
row to the ``context_requests`` table of the workspace's ``audit.db`` (the file the retrieval audit
and the traces share; this module touches only its own table): request id, operation, target URI,
time, duration, outcome (``ok`` or the error's code), counts/sizes, and the trace id of a
retrieval — never file contents or queries.

A failed write (a read-only workspace, a locked or broken ``audit.db``) never fails the operation:
the row is dropped, :attr:`RequestLog.warning` says why, and ``on_warning`` is called once.
"""

from __future__ import annotations

import contextlib
import functools
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from services.audit.db import CONTEXT_REQUESTS_SCHEMA, open_audit_db
from services.clock import utc_now


@dataclass
class Request:
    """One operation being logged: set ``counts``/``trace_id``/``target`` while it runs."""

    operation: str
    target: str | None = None
    id: str = field(default_factory=lambda: secrets.token_hex(6))
    ts: str = field(default_factory=utc_now)
    counts: dict[str, int | float] = field(default_factory=dict)
    trace_id: str | None = None


class RequestLog:
    """The ``context_requests`` table of one ``audit.db``."""

    def __init__(self, db_path: Path, *, on_warning: Callable[[str], None] | None = None) -> None:
        self.db_path = Path(db_path)
        self.on_warning = on_warning
        self.warning: str | None = None
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = open_audit_db(self.db_path, tables=[CONTEXT_REQUESTS_SCHEMA])
        return self._db

    @contextlib.contextmanager
    def request(self, operation: str, target: object = None) -> Iterator[Request]:
        """Log the block as one request: ``ok``, or the code of the error it raised (re-raised)."""
        req = Request(operation, None if target is None else str(target))
        started = time.perf_counter()
        outcome = "ok"
        try:
            yield req
        except BaseException as exc:
            outcome = str(getattr(exc, "code", None) or type(exc).__name__)
            raise
        finally:
            self.record(req, outcome, (time.perf_counter() - started) * 1000)

    def record(self, req: Request, outcome: str, duration_ms: float) -> bool:
        """Append the row; False (and a warning, said once) when it cannot be written."""
        row = (
            req.id,
            req.ts,
            req.operation,
            req.target,
            round(duration_ms, 3),
            outcome,
            req.trace_id,
            json.dumps(req.counts, sort_keys=True),
        )
        with self._lock:
            try:
                self._connect().execute(
                    "INSERT INTO context_requests (id, ts, operation, target, duration_ms, outcome, trace_id, counts) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
                return True
            except Exception as exc:  # never fail the operation for its log
                self._warn(exc)
                return False

    def _warn(self, exc: Exception) -> None:
        if self.warning is not None:
            return
        detail = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        self.warning = f"context request log not written ({self.db_path}): {detail}"
        if self.on_warning is not None:
            self.on_warning(self.warning)

    def recent(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest rows first (none when there is no ``audit.db`` yet)."""
        if not self.db_path.exists():
            return []
        with self._lock:
            db = open_audit_db(self.db_path, readonly=True, timeout=5)
            try:
                exists = db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'context_requests'"
                ).fetchone()
                if not exists:
                    return []
                rows = db.execute(
                    "SELECT id, ts, operation, target, duration_ms, outcome, trace_id, counts "
                    "FROM context_requests ORDER BY seq DESC LIMIT ?",
                    (max(0, limit),),
                ).fetchall()
            finally:
                db.close()
        keys = ("id", "ts", "operation", "target", "duration_ms", "outcome", "trace_id", "counts")
        out = [dict(zip(keys, row, strict=True)) for row in rows]
        for item in out:
            item["counts"] = json.loads(item["counts"])
        return out

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


F = TypeVar("F", bound=Callable[..., Any])


def counts_of(result: Any) -> dict[str, int | float]:
    """Counts and sizes of an operation's result (never contents)."""
    if isinstance(result, list):
        return {"items": len(result)}
    if isinstance(result, str):
        return {"chars": len(result)}
    if isinstance(result, int):
        return {"messages": result}
    if isinstance(result, tuple):
        result = result[0]
    out: dict[str, int | float] = {}
    for name in ("files", "skipped", "processed", "failed", "memories", "archived", "members", "written", "jobs"):
        value = getattr(result, name, None)
        if isinstance(value, list | tuple | dict):
            out[name] = len(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            out[name] = value
    size = getattr(result, "bytes", None)
    if isinstance(size, int):
        out["bytes"] = size
    return out


def logged(operation: str) -> Callable[[F], F]:
    """Log every call of a method of an object with a ``requests`` :class:`RequestLog` as one row
    (the call's first argument is the target)."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            with self.requests.request(operation, args[0] if args else None) as req:
                result = method(self, *args, **kwargs)
                req.counts = counts_of(result)
                return result

        return cast("F", run)

    return decorate


def log_retrieval(db_path: Path, kind: str, target: object, run: Callable[[], Any]) -> Any:
    """``run()`` (a find or search returning a ``RetrievalResult``) logged as one request with its
    trace id and hit count: the CLI and the TUI call find/search through this."""
    log = RequestLog(db_path)
    try:
        with log.request(kind, target) as req:
            result = run()
            req.trace_id, req.counts = result.trace.id, {"hits": len(result.hits)}
        return result
    finally:
        log.close()


__all__ = ["Request", "RequestLog", "counts_of", "log_retrieval", "logged"]
