"""Time to first paint of ``aries`` against a bare Textual app (Header, Static, Footer), same run.

Each command runs in a real pseudo-terminal of 160×48. The clock starts just before the
process is spawned and stops when the marker text of the first full frame appears in the
terminal output ("Artifacts", the last pane title Aries paints; "Bare Textual baseline" for
the baseline). Runs alternate between the two so that machine noise hits both alike.

    .venv/bin/python bench/startup.py [--runs 9]

Prints each median and the ratio aries / bare (target: at most 1.5). Aries paints its first frame,
then opens the workspace; the time until the workspace is in the panes ("new conversation" in the
Transcript pane's title) is printed too, as "ws ready".
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import signal
import statistics
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def first_paint(argv: list[str], marker: bytes, env: dict[str, str], timeout: float = 60.0) -> float:
    return paint_times(argv, [marker], env, timeout)[0]


def paint_times(argv: list[str], markers: list[bytes], env: dict[str, str], timeout: float = 60.0) -> list[float]:
    """Seconds from spawn until each marker has appeared in the terminal output (in order)."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    start = time.perf_counter()
    seen = b""
    found: list[float] = []
    try:
        while time.perf_counter() - start < timeout:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            while len(found) < len(markers) and markers[len(found)] in seen:
                found.append(time.perf_counter() - start)
            if len(found) == len(markers):
                break
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    if len(found) < len(markers):
        raise RuntimeError(f"{argv} never painted {markers[len(found)]!r}; output tail: {seen[-400:]!r}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="aries-bench-home-")
    env = {**os.environ, "TERM": "xterm-256color", "ARIES_HOME": home, "COLUMNS": "160", "LINES": "48"}
    aries = [str(VENV_BIN / "aries")]
    bare = [sys.executable, str(ROOT / "bench" / "bare_app.py")]
    # one warm-up each: the first run pays for cold .pyc compilation and page cache
    first_paint(aries, b"Artifacts", env)
    first_paint(bare, b"Bare Textual baseline", env)
    aries_times, ready_times, bare_times = [], [], []
    for _ in range(args.runs):
        bare_times.append(first_paint(bare, b"Bare Textual baseline", env))
        painted, ready = paint_times(aries, [b"Artifacts", b"new conversation"], env)
        aries_times.append(painted)
        ready_times.append(ready)
    a, b = statistics.median(aries_times), statistics.median(bare_times)
    print(f"runs: {args.runs} each, interleaved, 160x48 pty")
    r = statistics.median(ready_times)
    for label, median, times in (
        ("bare Textual app", b, bare_times),
        ("aries", a, aries_times),
        ("aries, ws ready", r, ready_times),
    ):
        spread = f"min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}"
        print(f"{label:<17} median {median * 1000:7.1f} ms  ({spread})")
    print(f"ratio aries/bare  {a / b:.2f}  (target <= 1.50)")
    print(f"ratio ready/bare  {r / b:.2f}  (first frame, then the workspace opens: lease, repair, transcript)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
