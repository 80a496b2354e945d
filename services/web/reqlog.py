"""The viewer's request log: one JSON line per document load or save in ``<workspace>/logs/web.ndjson``.

A file of its own rather than ``audit.db``: a line is appended (and fsynced) whole, with no SQLite
writer lock shared with the TUI's audit writes, so logging a save never waits behind another Aries;
and ``tail -f``/``jq`` read it as it grows.  Each line: ``ts, method, id, status, save_ms,
reindex_ms, total_ms, content_bytes`` (and ``error`` when the request was refused).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from services.clock import utc_now
from services.workspace.paths import WorkspacePaths

LOG_NAME = "web.ndjson"


class WebRequestLog:
    def __init__(self, workspace_root: Path) -> None:
        self.path = WorkspacePaths(workspace_root).logs / LOG_NAME
        self._lock = threading.Lock()
        self.warning: str | None = None

    def write(self, record: dict[str, Any]) -> None:
        """Append one line; a log that cannot be written is remembered in :attr:`warning`, never raised."""
        line = json.dumps({"ts": utc_now(), **record}, ensure_ascii=True, sort_keys=False) + "\n"
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, line.encode("utf-8"))
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                self.warning = f"the web request log {self.path} cannot be written: {exc.strerror}"
