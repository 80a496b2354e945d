"""The background build of the conversation search index, in a child process.

Building the index in the TUI's own process left what it loaded resident for the rest of the session:
Tantivy and its writer heap, the secret detectors (detect-secrets, 58 modules) and the models they
import — about 24 MB after catching up three transcripts, 15 MB even with nothing to index, which
neither ``gc.collect()`` nor ``malloc_trim`` gives back (the modules stay imported; issue 29: idle
memory ≤ 45 MB). :func:`build_in_child` runs :func:`services.history_search.background.build` in
``python -m services.history_search.child ROOT TRANSCRIPTS`` instead: its memory goes back to the
system when it ends. A search in the TUI still opens the index itself, on first use.

The child writes one JSON object a line on stdout: ``{"v": 1, "coverage": {…}}`` after each slice
that moved the index on (the same reports as in-process), then ``{"v": 1, "done": {…}}`` or
``{"v": 1, "error": "one line"}``. The parent cancels by closing the child's stdin; a parent that dies
(even killed) closes it too, so the child never outlives it by more than the file it is on. The
writer lock is the index's own (``HistoryIndex``), as for ``aries history search`` in another process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.errors import AriesError
from services.history_search.coverage import Coverage, SearchIndexError

PROTOCOL = 1
"""The version of the lines the child writes (``v``)."""
_STDERR_KEPT = 2000
_PROJECT = Path(__file__).resolve().parents[2]  # the folder holding ``services``


def _coverage(data: Any) -> Coverage:
    """A coverage line's object as a :class:`Coverage` (a SearchIndexError when it is not one)."""
    if not isinstance(data, dict):
        raise SearchIndexError("the conversation index build sent an unreadable report")
    counts = [data.get(key, 0) for key in ("indexed", "total", "entries_added")]
    rebuilt = data.get("rebuilt", "")
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in counts) or not isinstance(rebuilt, str):
        raise SearchIndexError("the conversation index build sent an unreadable report")
    return Coverage(counts[0], counts[1], counts[2], rebuilt)


def _line(kind: str, value: Any) -> None:
    sys.stdout.write(json.dumps({"v": PROTOCOL, kind: value}, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _as_dict(coverage: Coverage) -> dict[str, Any]:
    return {
        "indexed": coverage.indexed,
        "total": coverage.total,
        "entries_added": coverage.entries_added,
        "rebuilt": coverage.rebuilt,
    }


def main(argv: list[str]) -> int:
    """The child: build the index of the workspace folder ``argv[0]`` (transcripts in ``argv[1]``)
    until it is complete or stdin closes."""
    from services.history_search.background import build
    from services.history_search.store import HistoryIndex

    if len(argv) != 2:
        _line("error", "usage: python -m services.history_search.child ROOT TRANSCRIPTS")
        return 2
    cancel = threading.Event()

    def watch_stdin() -> None:  # os.read, not sys.stdin: a daemon thread blocked holding its lock aborts the exit
        try:
            while os.read(0, 1):
                pass
        except OSError:
            pass
        cancel.set()  # the parent closed it, or ended

    threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        done = build(
            HistoryIndex(Path(argv[0]), Path(argv[1])), cancel, report=lambda c: _line("coverage", _as_dict(c))
        )
    except AriesError as exc:
        _line("error", exc.message)
        return 1
    _line("done", _as_dict(done))
    return 0


def _drain(stream: Any, kept: list[bytes]) -> None:
    for chunk in iter(lambda: stream.read(4096), b""):
        kept.append(chunk)
        while sum(map(len, kept)) > _STDERR_KEPT and len(kept) > 1:
            kept.pop(0)


def build_in_child(
    root: Path,
    transcripts_dir: Path,
    cancel: threading.Event,
    *,
    report: Callable[[Coverage], None] | None = None,
) -> Coverage:
    """Catch the index of the workspace folder ``root`` up in a child process (see the module
    docstring); ``report`` hears each coverage it reports. Returns the last coverage; raises a
    :class:`SearchIndexError` (one line) when the child fails."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_PROJECT), os.environ.get("PYTHONPATH")]))}
    child = subprocess.Popen(
        [sys.executable, "-m", "services.history_search.child", str(root), str(transcripts_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    stdin, errors = child.stdin, list[bytes]()
    drain = threading.Thread(target=_drain, args=(child.stderr, errors), daemon=True)
    drain.start()

    ended = threading.Event()

    def cancel_when_asked() -> None:
        while not cancel.wait(0.2):
            if ended.is_set():
                return
        try:
            stdin.close()  # the child stops after the file it is on
        except OSError:
            pass

    watcher = threading.Thread(target=cancel_when_asked, daemon=True)
    watcher.start()
    try:
        last, error = _read(child.stdout, report)
    finally:
        code = child.wait()
        ended.set()
        watcher.join()
        drain.join(timeout=5)
        if not stdin.closed:
            stdin.close()
    if error is not None:
        raise SearchIndexError(f"conversation search index: {error}")
    if last is None or code != 0:
        said = b"".join(errors).decode("utf-8", "replace").strip().splitlines()
        raise SearchIndexError(
            f"the conversation search index build ended unexpectedly (exit {code})" + (f": {said[-1]}" if said else "")
        )
    return last


def _read(stdout: Any, report: Callable[[Coverage], None] | None) -> tuple[Coverage | None, str | None]:
    """The child's lines until it ends: (the final coverage, or None; its error, or None)."""
    last: Coverage | None = None
    for raw in stdout:
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # not one of ours (a library printing on stdout)
        if not isinstance(line, dict) or line.get("v") != PROTOCOL:
            continue
        if "error" in line:
            return None, str(line["error"]).splitlines()[0] if str(line["error"]) else "failed"
        if "coverage" in line:
            coverage = _coverage(line["coverage"])
            if report is not None:
                report(coverage)
        elif "done" in line:
            last = _coverage(line["done"])
    return last, None


__all__ = ["PROTOCOL", "build_in_child", "main"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
