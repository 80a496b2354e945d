"""Start-up of ``aries`` against a bare Textual app (Header, Static, Footer), in the same run.

Each command runs in a real pseudo-terminal of 160×48. The clock starts just before the process is
spawned and stops when a marker appears in the terminal output: the first full frame ("Artifacts",
the last pane title Aries paints; "Bare Textual baseline" for the baseline), then, for Aries, the
workspace ready ("new conversation" in the Transcript pane's title: lease taken, session open,
panes filled). At each marker the script reads the CPU time the process used until then
(``/proc/PID/task/*/schedstat``: the steadier figure when other work loads the machine) and, at
the last one, its resident memory (``VmRSS``). Runs alternate between the programs so that machine
noise hits them alike. Aries runs with a model configured (``--model``, default
``ollama:llama3.2``; nothing is contacted at start-up, and no server listens) unless ``--model ''``.

Aries runs twice per round: on an ephemeral workspace (``aries``, the figures of the earlier rows of
docs/BENCHMARKS.md) and where the user lives, on a *named* workspace (``aries -w bench``, made once
with ``aries workspace new bench`` in a temp ARIES_HOME before the runs; each run is ended with
SIGTERM, as a closed terminal ends it, so the next one finds the workspace closed cleanly; before
each run ``aries -w bench ask …`` answers one question offline, so that each start has a conversation
of the last session to add to the conversation search index, as a user's has).
Memory is measured three times: at the workspace-ready marker; *settled*, once the deferred start-up
work has finished (the last retrieved set, a profile check); and *idle*, once the work that waits for
that has finished too (the conversation search index's build, the MCP servers, vectors left pending):
the workbench the user lives in. Aries marks both moments itself (``ARIES_STARTUP_MARK=FILE``: the
lines ``settled`` then ``idle`` are appended to FILE, ``app/settling.py``), so a slow machine cannot
make a fixed delay pass before the loads.

    .venv/bin/python bench/startup.py [--runs 9]                 # this checkout against the bare app
    .venv/bin/python bench/startup.py --base HEAD~1 [--runs 9]   # … and side by side with a base commit

``--base REF`` measures the commit REF too, from a git worktree under /tmp with its own venv
(``--base-dir`` to choose the folder; made on first use — ``pip install torch==2.13.0`` then
``pip install -e .`` from the local caches, a few minutes — and kept for the next run). Targets:
first frame ≤ 1.3× the bare app's first paint; workspace ready ≤ 1.8×; resident memory of the
idle workbench on a named workspace ≤ 45 MB.
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
import subprocess
import sys
import tempfile
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
BARE_MARK = b"Bare Textual baseline"
FRAME_MARK = b"Artifacts"
READY_MARK = b"new conversation"


def cpu_seconds(pid: int) -> float:
    """CPU time the process has used so far, all threads (``/proc/PID/task/*/schedstat``, ns)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue  # a thread that just ended
    return total / 1e9


def resident_mb(pid: int) -> float:
    """The process's resident set (``VmRSS``), in MB (MiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Run:
    times: list[tuple[float, float]]  # (wall s, cpu s) at each marker
    rss_mb: float  # at the last marker
    marks: dict[str, tuple[float, float]] = field(default_factory=dict)  # settled/idle: (wall s, resident MB)


MARKS = ("settled", "idle")


def wait_marks(pid: int, fd: int, mark: Path, start: float, timeout: float) -> dict[str, tuple[float, float]]:
    """Wait (draining the terminal) until ``mark`` says ``settled`` then ``idle``; (wall s, resident MB)
    at each."""
    seen: dict[str, tuple[float, float]] = {}
    while time.perf_counter() - start < timeout:
        said = mark.read_text(encoding="utf-8").split() if mark.exists() else []
        for name in MARKS:
            if name in said and name not in seen:
                seen[name] = (time.perf_counter() - start, resident_mb(pid))
        if len(seen) == len(MARKS):
            return seen
        ready, _, _ = select.select([fd], [], [], 0.02)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                break
    raise RuntimeError(f"the app never marked itself {' and '.join(m for m in MARKS if m not in seen)} in {mark}")


def end(pid: int, fd: int, wait_s: float = 10.0) -> None:
    """SIGTERM (as a closed terminal: Aries closes its session and lease), draining the terminal while
    it ends; SIGKILL after ``wait_s``."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.perf_counter() + wait_s
    while time.perf_counter() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                pass
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def paint_times(
    argv: list[str], markers: list[bytes], env: dict[str, str], timeout: float = 60.0, *, settles: bool = False
) -> Run:
    """Spawn ``argv`` in a 160×48 pty; (wall seconds from spawn, CPU seconds used) at each marker, in
    order, and the resident memory when the last one appeared."""
    mark = Path(tempfile.mkdtemp(prefix="aries-bench-mark-")) / "mark" if settles else None
    if mark is not None:
        env = {**env, "ARIES_STARTUP_MARK": str(mark)}
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    start = time.perf_counter()
    seen = b""
    found: list[tuple[float, float]] = []
    rss = float("nan")
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
                    rss = resident_mb(pid)
            if len(found) == len(markers):
                break
        complete = mark is not None and len(found) == len(markers)
        marks = wait_marks(pid, fd, mark, start, timeout) if mark is not None and complete else {}
    finally:
        end(pid, fd)
        os.close(fd)
    if len(found) < len(markers):
        raise RuntimeError(f"{argv} never painted {markers[len(found)]!r}; output tail: {seen[-400:]!r}")
    return Run(found, rss, marks)


@dataclass
class Program:
    label: str
    argv: list[str]
    markers: list[bytes]
    env: dict[str, str]
    settles: bool = False  # the program marks itself settled (this tree's Aries)
    runs: list[Run] = field(default_factory=list)
    before: list[str] | None = None  # a command run before each run (not timed)

    def run(self) -> Run:
        if self.before is not None:
            done = subprocess.run(self.before, env={**self.env, "ARIES_MODEL": "offline"}, capture_output=True)
            if done.returncode:
                raise SystemExit(f"{self.before} failed: {done.stdout!r}{done.stderr!r}")
        return paint_times(self.argv, self.markers, self.env, settles=self.settles)

    def median(self, marker: int) -> tuple[float, float]:
        return (
            statistics.median(r.times[marker][0] for r in self.runs),
            statistics.median(r.times[marker][1] for r in self.runs),
        )

    def rss(self) -> float:
        return statistics.median(r.rss_mb for r in self.runs)

    def at(self, mark: str) -> tuple[float, float]:
        """Median (wall s, resident MB) at ``mark`` (settled, idle)."""
        return (
            statistics.median(r.marks[mark][0] for r in self.runs),
            statistics.median(r.marks[mark][1] for r in self.runs),
        )


def base_checkout(ref: str, folder: str | None) -> Path:
    """A worktree of ``ref`` with its own venv (made once, kept)."""
    sha = subprocess.run(["git", "rev-parse", ref], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    sha = sha.strip()
    where = Path(folder or f"/tmp/aries-startup-base-{sha[:10]}")
    if not where.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(where), sha], cwd=ROOT, check=True)
    aries = where / ".venv" / "bin" / "aries"
    if not aries.exists():
        print(f"making the base's venv in {where}/.venv (torch, then the project; a few minutes)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(where / ".venv")], check=True)
        pip = [str(where / ".venv" / "bin" / "pip"), "install", "--quiet"]
        for step in (["torch==2.13.0"], ["-e", str(where)]):
            done = subprocess.run([*pip, *step], capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"pip install {' '.join(step)} failed:\n{done.stdout}{done.stderr}")
    return where


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--model", default="ollama:llama3.2", help="ARIES_MODEL for Aries ('' for none)")
    parser.add_argument("--base", help="a commit to measure side by side (e.g. HEAD~1, main)")
    parser.add_argument("--base-dir", help="the base's worktree (default /tmp/aries-startup-base-SHA)")
    args = parser.parse_args()

    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "48"}
    # As on a user's machine: bytecode is cached after the warm-up run (some shells and CI set this).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for name in [n for n in env if n.startswith(("ARIES_", "AXIOMME_", "OLLAMA_", "OPENAI_", "TEXTUAL_"))]:
        del env[name]  # the developer's own settings would measure something else
    if args.model:
        env["ARIES_MODEL"] = args.model
        env["OLLAMA_HOST"] = "127.0.0.1:9"  # never contacted at start-up; a closed port if it were

    def home() -> dict[str, str]:
        return {**env, "ARIES_HOME": tempfile.mkdtemp(prefix="aries-bench-home-")}

    def named(aries: Path) -> dict[str, str]:
        """A home with the workspace ``bench`` made in it (as a user would, by the same aries)."""
        at = home()
        made = subprocess.run([str(aries), "workspace", "new", "bench"], env=at, capture_output=True, text=True)
        if made.returncode:
            raise SystemExit(f"{aries} workspace new bench failed: {made.stdout}{made.stderr}")
        return at

    def ask(aries: Path) -> list[str]:
        """One question answered offline before each run: every start finds a conversation of the last
        session to add to the conversation search index, as a user's does."""
        return [str(aries), "-w", "bench", "ask", "which bird dives for fish? a grebe, a coot or a tern"]

    this = VENV_BIN / "aries"
    marks = [FRAME_MARK, READY_MARK]
    programs = [Program("bare Textual app", [sys.executable, str(ROOT / "bench" / "bare_app.py")], [BARE_MARK], env)]
    if args.base:
        base = base_checkout(args.base, args.base_dir) / ".venv" / "bin" / "aries"
        programs.append(Program(f"aries {args.base}", [str(base)], marks, home()))
        programs.append(
            Program(f"aries {args.base} -w", [str(base), "-w", "bench"], marks, named(base), before=ask(base))
        )
    programs.append(Program("aries (ephemeral)", [str(this)], marks, home(), True))
    programs.append(Program("aries -w bench", [str(this), "-w", "bench"], marks, named(this), True, before=ask(this)))

    load_before = os.getloadavg()[0]
    for program in programs:  # one warm-up each: the first run pays for cold .pyc compilation and page cache
        program.run()
    for _ in range(args.runs):
        for program in programs:
            program.runs.append(program.run())
    load_after = os.getloadavg()[0]

    print(
        f"runs: {args.runs} each, interleaved, 160x48 pty; ARIES_MODEL={args.model or '(unset)'}; "
        f"load average {load_before:.1f} before, {load_after:.1f} after"
    )
    bare = programs[0]
    b_wall, b_cpu = bare.median(0)
    shown = f"wall {b_wall * 1000:6.0f} ms  cpu {b_cpu * 1000:6.0f} ms   rss {bare.rss():5.1f} MB"
    print(f"{bare.label:<22} first paint  {shown}")
    for program in programs[1:]:
        for marker, name in ((0, "first frame"), (1, "ws ready")):
            wall, cpu = program.median(marker)
            walls = [r.times[marker][0] * 1000 for r in program.runs]
            rss = f"rss {program.rss():5.1f} MB" if marker == 1 else ""
            print(
                f"{program.label:<22} {name:<12} wall {wall * 1000:6.0f} ms  cpu {cpu * 1000:6.0f} ms   "
                f"{rss:<15} ratio to bare: wall {wall / b_wall:.2f}  cpu {cpu / b_cpu:.2f}  "
                f"(min {min(walls):.0f}, max {max(walls):.0f} ms)"
            )
        if not program.settles:
            continue
        for mark in MARKS:
            wall, mb = program.at(mark)
            line = f"{program.label:<22} {mark:<12} wall {wall * 1000:6.0f} ms"
            print(
                f"{line}{'':18}rss {mb:5.1f} MB" + ("  (the idle workbench, target ≤ 45 MB)" if mark == "idle" else "")
            )
    print("targets: first frame <= 1.30x, ws ready <= 1.80x the bare app's first paint; idle rss (-w bench) <= 45 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
