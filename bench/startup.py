"""Time to first paint of ``aries`` against a bare Textual app (Header, Static, Footer), same run.

Each command runs in a real pseudo-terminal of 160×48. The clock starts just before the
process is spawned and stops when the marker text of the first full frame appears in the
terminal output ("Artifacts", the last pane title Aries paints; "Bare Textual baseline" for
the baseline). Runs alternate between the two so that machine noise hits both alike.

    .venv/bin/python bench/startup.py [--runs 9]

Prints each median and the ratio aries / bare (target: at most 1.5), in wall time and in the CPU
time the process used until then (the steadier figure when other work loads the machine). Aries paints its first frame,
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


def cpu_seconds(pid: int) -> float:
    """CPU time the process has used so far, all threads (``/proc/PID/task/*/schedstat``, ns)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue  # a thread that just ended
    return total / 1e9


def first_paint(argv: list[str], marker: bytes, env: dict[str, str], timeout: float = 60.0) -> tuple[float, float]:
    return paint_times(argv, [marker], env, timeout)[0]


def paint_times(
    argv: list[str], markers: list[bytes], env: dict[str, str], timeout: float = 60.0
) -> list[tuple[float, float]]:
    """(wall seconds from spawn, CPU seconds the process used) when each marker appeared, in order.

    The CPU time is what the process itself spent to get there: on a loaded machine the wall time
    also counts the time it waited for a core, the CPU time does not."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    start = time.perf_counter()
    seen = b""
    found: list[tuple[float, float]] = []
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
                found.append((time.perf_counter() - start, cpu_seconds(pid)))
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
    # As on a user's machine: bytecode is cached after the warm-up run (some shells and CI set this).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    aries = [str(VENV_BIN / "aries")]
    bare = [sys.executable, str(ROOT / "bench" / "bare_app.py")]
    # one warm-up each: the first run pays for cold .pyc compilation and page cache
    first_paint(aries, b"Artifacts", env)
    first_paint(bare, b"Bare Textual baseline", env)
    runs: dict[str, list[tuple[float, float]]] = {"bare Textual app": [], "aries": [], "aries, ws ready": []}
    for _ in range(args.runs):
        runs["bare Textual app"].append(first_paint(bare, b"Bare Textual baseline", env))
        painted, ready = paint_times(aries, [b"Artifacts", b"new conversation"], env)
        runs["aries"].append(painted)
        runs["aries, ws ready"].append(ready)
    print(f"runs: {args.runs} each, interleaved, 160x48 pty; load average {os.getloadavg()[0]:.1f}")
    medians: dict[str, tuple[float, float]] = {}
    for label, times in runs.items():
        wall = statistics.median(t[0] for t in times)
        cpu = statistics.median(t[1] for t in times)
        medians[label] = (wall, cpu)
        spread = f"min {min(t[0] for t in times) * 1000:.0f}, max {max(t[0] for t in times) * 1000:.0f}"
        print(f"{label:<17} wall median {wall * 1000:7.1f} ms ({spread})   cpu median {cpu * 1000:7.1f} ms")
    b, a, r = medians["bare Textual app"], medians["aries"], medians["aries, ws ready"]
    print(f"ratio aries/bare  wall {a[0] / b[0]:.2f}  cpu {a[1] / b[1]:.2f}  (target <= 1.50)")
    print(
        f"ratio ready/bare  wall {r[0] / b[0]:.2f}  cpu {r[1] / b[1]:.2f}  "
        "(first frame, then the workspace opens: lease, repair, transcript)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
