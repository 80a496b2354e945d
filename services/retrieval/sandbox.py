"""Run the PDF/EPUB/HTML loaders in a child process with a time and a memory limit.

The limits are the per-file budget of :class:`~services.retrieval.settings.LoaderLimits`:
``timeout_s`` of wall-clock time per file and ``memory_bytes`` of address-space growth
(``RLIMIT_AS`` over the interpreter's start-up size, so the child's peak RSS stays under
``memory_bytes`` + ~100 MiB: under 1 GiB with the defaults).  Text and chunk caps
(``max_text_chars``, ``max_chunks``, ``max_pages``, ``max_zip_bytes``) are checked inside.

A malicious or broken file can make a parser loop, recurse or allocate without bound.  The
child (``python -m services.retrieval.sandbox``: a fresh interpreter that imports nothing of
the host application) is started once and reused for every file; it is killed and
restarted when a file goes over its time limit, when it crashes, or after a
``MemoryError``.  Each outcome is a typed :class:`IngestError`, never a hang.

Protocol over the child's stdin/stdout: frames of a 4-byte big-endian length and a payload.
The child first sends ``{"ready": true}``.  A request is a JSON frame (``content_type`` and
the limits) followed by a frame with the file's bytes; the answer is one JSON frame,
``{"ok": true, "document": …}`` or ``{"ok": false, "error": <class name>, "message": …}``.
"""

from __future__ import annotations

import json
import os
import queue
import struct
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from services.retrieval.errors import INGEST_ERRORS, FileTooLarge, IngestError, LoaderTimeout, MalformedDocument
from services.retrieval.models import Document
from services.retrieval.settings import LoaderLimits

STARTUP_TIMEOUT_S = 60.0
_HEADER = struct.Struct(">I")


def _write_frame(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> bytes | None:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    payload = stream.read(size)
    return payload if len(payload) == size else None


def _limit_memory(extra_bytes: int) -> None:
    """Cap the address space at its current size plus ``extra_bytes`` (POSIX only)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            current = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):  # pragma: no cover - no procfs (macOS)
        current = 0
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = current + extra_bytes
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
    except (ValueError, OSError):  # pragma: no cover - platform refuses
        pass


def _serve(memory_bytes: int) -> int:  # pragma: no cover - runs in the child
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    from services.retrieval.loaders import load_bytes

    try:  # import the parsers before the clock starts on the first file
        import ebooklib.epub  # noqa: F401
        import pypdf  # noqa: F401
    except ImportError:
        pass
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the protocol
    _limit_memory(memory_bytes)
    _write_frame(stdout, b'{"ready": true}')
    while True:
        header_bytes = _read_frame(stdin)
        data = _read_frame(stdin) if header_bytes is not None else None
        if header_bytes is None or data is None:
            return 0
        reply: dict[str, Any]
        restart = False
        try:
            header = json.loads(header_bytes)
            document = load_bytes(header["content_type"], data, LoaderLimits(**header["limits"]))
            reply = {"ok": True, "document": document.to_json()}
        except IngestError as exc:
            reply = {"ok": False, "error": type(exc).__name__, "message": exc.message}
        except MemoryError:
            restart = True
            message = "the loader went over its memory limit (limits.memory_bytes)"
            reply = {"ok": False, "error": "FileTooLarge", "message": message}
        except RecursionError:
            reply = {"ok": False, "error": "NestingTooDeep", "message": "the file is nested too deeply to parse"}
        except Exception as exc:
            reply = {"ok": False, "error": "MalformedDocument", "message": f"{type(exc).__name__}: {exc}"[:500]}
        del data
        try:
            payload = json.dumps(reply).encode("utf-8")
        except MemoryError:
            payload, restart = b'{"ok": false, "error": "FileTooLarge", "message": "the result is too large"}', True
        _write_frame(stdout, payload)
        if restart:
            return 3


class LoaderSandbox:
    """One reusable loader subprocess; thread-safe (calls are serialised)."""

    def __init__(self, limits: LoaderLimits | None = None) -> None:
        self.limits = limits or LoaderLimits()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._replies: queue.Queue[bytes | None] = queue.Queue()
        self.starts = 0

    def _start(self) -> None:
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        process = subprocess.Popen(
            [sys.executable, "-m", "services.retrieval.sandbox", str(self.limits.memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=package_root,
        )
        replies: queue.Queue[bytes | None] = queue.Queue()
        assert process.stdout is not None
        stdout = process.stdout

        def pump() -> None:
            while True:
                frame = _read_frame(stdout)
                replies.put(frame)
                if frame is None:
                    return

        threading.Thread(target=pump, name="aries-loader-sandbox-reader", daemon=True).start()
        self._process, self._replies = process, replies
        self.starts += 1
        try:
            ready = replies.get(timeout=STARTUP_TIMEOUT_S)
        except queue.Empty:
            ready = None
        if ready is None:
            code = process.poll()
            self._stop()
            raise MalformedDocument(f"the loader subprocess did not start (exit code {code})")

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover - kill did not take
            pass
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def load(self, content_type: str, data: bytes, timeout_s: float | None = None) -> Document:
        """Parse ``data`` in the child; raise the child's IngestError, or LoaderTimeout."""
        if len(data) > self.limits.max_file_bytes:
            raise FileTooLarge(f"{len(data)} bytes is over the {self.limits.max_file_bytes}-byte limit")
        timeout = self.limits.timeout_s if timeout_s is None else timeout_s
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._stop()
                self._start()
            process = self._process
            assert process is not None and process.stdin is not None
            header = {"content_type": content_type, "limits": asdict(self.limits)}
            try:
                _write_frame(process.stdin, json.dumps(header).encode("utf-8"))
                _write_frame(process.stdin, data)
            except (BrokenPipeError, OSError) as exc:
                self._stop()
                raise MalformedDocument(f"the loader subprocess died: {exc}") from None
            try:
                frame = self._replies.get(timeout=timeout)
            except queue.Empty:
                self._stop()
                raise LoaderTimeout(
                    f"reading took longer than {timeout:g} s (limits.timeout_s); the loader was stopped"
                ) from None
            if frame is None:
                code = process.wait(5)
                self._stop()
                raise MalformedDocument(f"the loader crashed on this file (exit code {code})")
            reply = json.loads(frame)
            if reply.get("ok") is False and reply.get("error") == "FileTooLarge":
                self._stop()  # the child exits after a MemoryError; start afresh next time
        if reply.get("ok"):
            return Document.from_json(reply["document"])
        error_class = INGEST_ERRORS.get(str(reply.get("error")), MalformedDocument)
        raise error_class(str(reply.get("message", "")))

    def close(self) -> None:
        with self._lock:
            self._stop()

    def __enter__(self) -> LoaderSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":  # pragma: no cover - the child process
    sys.exit(_serve(int(sys.argv[1]) if len(sys.argv) > 1 else LoaderLimits().memory_bytes))
