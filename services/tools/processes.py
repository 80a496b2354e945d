"""Process management on psutil for the shell tools: start, observe and end process trees.

Each process gets its own session/process group and an environment marker ``ARIES_PROC_TAG``;
ending a process ends its whole tree: the process group, psutil's view of its descendants,
and every process still carrying the marker (which finds grandchildren that double-forked or
called ``setsid``).  Termination is graceful (SIGTERM, ``grace_s``) then forced (SIGKILL),
repeated until nothing is left.  Children get the policy's resource limits
(``services.tools.childlimits``) and run in the OS sandbox the policy chose
(``services.tools.sandbox``): the sandbox is the child, so the tree is managed the same way.

A ``ProcessManager`` belongs to a session, not to a policy binding: rebinding the policy (an
approval-mode change) keeps it and its background processes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import psutil

from services.clock import utc_now
from services.errors import NotFound, TooLarge
from services.policy.model import ToolPermissionDenied
from services.tools.childlimits import ChildLimits, preexec
from services.tools.sandbox import child_steps as _child_steps
from services.tools.sandbox import discard as _discard

if TYPE_CHECKING:
    from services.tools.sandbox import SandboxPlan

ENV_TAG = "ARIES_PROC_TAG"
_KEEP_FINISHED = 64
_POSIX = os.name == "posix"
_WATCH_INTERVAL_S = 0.02


class _Tail:
    """The last ``cap`` bytes of a stream, plus how much went by."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buffer = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.buffer += chunk
        if len(self.buffer) > self.cap:
            del self.buffer[: len(self.buffer) - self.cap]

    def text(self, limit: int | None = None) -> str:
        data = bytes(self.buffer if limit is None else self.buffer[-limit:])
        return data.decode("utf-8", errors="replace")

    @property
    def truncated(self) -> bool:
        return self.total > len(self.buffer)


@dataclass
class ManagedProcess:
    process_id: str
    popen: subprocess.Popen[bytes]
    argv: list[str]
    cwd: str
    tag: str
    started_at: str
    started_mono: float
    create_time: float | None
    stdout: _Tail
    stderr: _Tail
    stall_after_s: float
    last_output_mono: float
    readers: list[threading.Thread] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    killed: bool = False
    limits: ChildLimits | None = None
    limit_hit: str | None = None  # set when the manager stopped the tree for a limit (watchdog)
    sandbox: SandboxPlan | None = None  # the OS sandbox it runs in (None: policy and rlimits only)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    @property
    def exit_code(self) -> int | None:
        """The exit code, -N for signal N (also when a bwrap sandbox reported it as 128+N)."""
        code = self.popen.returncode
        return self.sandbox.exit_signal(code) if self.sandbox is not None else code


def _spawn(
    argv: list[str],
    executable: str,
    cwd: str,
    env: dict[str, str],
    limits: ChildLimits | None,
    sandbox: SandboxPlan | None,
    stdin: IO[bytes] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session (the sandbox, bwrap or Landlock, runs it when there is one),
    with the child's limits applied before it runs; a failure to start is a typed error. ``stdin``:
    an open file the child reads (a hook's call as JSON); none: ``/dev/null``."""
    command, program = argv, executable
    if sandbox is not None:  # the sandbox (bwrap) or its restriction (Landlock) runs the command
        command, program, env = sandbox.argv, sandbox.executable, {**sandbox.env, ENV_TAG: env[ENV_TAG]}
    kwargs: dict[str, Any] = {}
    if _POSIX:
        kwargs["start_new_session"] = True
        apply = _child_steps(preexec(limits) if limits is not None else None, sandbox)
        if apply is not None:
            kwargs["preexec_fn"] = apply  # setrlimit + prctl + Landlock only: resolved before the fork
    else:  # pragma: no cover - Windows
        kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    try:
        popen = subprocess.Popen(  # argv only (no shell); the executable comes from the allowlist
            command,
            executable=program,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
            **kwargs,
        )
    except FileNotFoundError:
        _discard(sandbox)
        raise NotFound(f"executable {argv[0]!r} was not found") from None
    except PermissionError:
        _discard(sandbox)
        raise ToolPermissionDenied(f"executable {argv[0]!r} cannot be run (permission denied)") from None
    except subprocess.SubprocessError as exc:  # the preexec step failed in the child
        _discard(sandbox)
        raise ToolPermissionDenied(f"executable {argv[0]!r} could not be started with its limits: {exc}") from None
    if sandbox is not None:
        sandbox.started()
    return popen


class ProcessManager:
    """The processes one gateway session started. ``close()`` ends all of them."""

    def __init__(self) -> None:
        self.session = f"aries-{os.getpid()}-{secrets.token_hex(4)}"
        self._procs: dict[str, ManagedProcess] = {}
        self._lock = threading.Lock()
        self._counter = 0

    # -- start -------------------------------------------------------------------------
    def start(
        self,
        argv: list[str],
        *,
        executable: str,
        cwd: str,
        env: dict[str, str],
        output_cap: int,
        stall_after_s: float,
        max_processes: int,
        limits: ChildLimits | None = None,
        sandbox: SandboxPlan | None = None,
        stdin: IO[bytes] | None = None,
    ) -> ManagedProcess:
        process_id = self._next_id(max_processes)
        tag = f"{self.session}:{process_id}"
        popen = _spawn(argv, executable, cwd, {**env, ENV_TAG: tag}, limits, sandbox, stdin)
        try:
            create_time: float | None = psutil.Process(popen.pid).create_time()
        except psutil.Error:
            create_time = None
        now = time.monotonic()
        proc = ManagedProcess(
            process_id=process_id,
            popen=popen,
            argv=list(argv),
            cwd=cwd,
            tag=tag,
            started_at=utc_now(),
            started_mono=now,
            create_time=create_time,
            stdout=_Tail(output_cap),
            stderr=_Tail(output_cap),
            stall_after_s=stall_after_s,
            last_output_mono=now,
            limits=limits,
            sandbox=sandbox,
        )
        self._observe(proc)
        with self._lock:
            self._procs[process_id] = proc
            finished = [k for k, p in self._procs.items() if p.popen.returncode is not None]
            for key in finished[:-_KEEP_FINISHED] if len(finished) > _KEEP_FINISHED else []:
                _discard(self._procs.pop(key).sandbox)
        return proc

    def _next_id(self, max_processes: int) -> str:
        """A new process id; ``TooLarge`` when ``max_processes`` of this session's already run."""
        with self._lock:
            running = sum(1 for p in self._procs.values() if p.popen.poll() is None)
            if running >= max_processes:
                raise TooLarge(f"{running} processes are running; the limit is {max_processes}")
            self._counter += 1
            return f"p{self._counter}-{secrets.token_hex(3)}"

    def _observe(self, proc: ManagedProcess) -> None:
        """The threads that follow a started process: one reader per stream, and the process-count
        watchdog where its limits ask for one."""
        popen, limits = proc.popen, proc.limits
        for stream, tail in ((popen.stdout, proc.stdout), (popen.stderr, proc.stderr)):
            reader = threading.Thread(
                target=self._pump, args=(proc, stream, tail), daemon=True, name=f"aries-{proc.process_id}-reader"
            )
            reader.start()
            proc.readers.append(reader)
        if limits is not None and limits.watchdog_processes and limits.processes > 0:
            threading.Thread(
                target=self._watch_processes,
                args=(proc, limits.processes),
                daemon=True,
                name=f"aries-{proc.process_id}-watch",
            ).start()

    def _watch_processes(self, proc: ManagedProcess, limit: int) -> None:
        """Where the kernel does not enforce RLIMIT_NPROC (root): end the tree past ``limit``."""
        while proc.running():
            try:
                count = 1 + len(psutil.Process(proc.pid).children(recursive=True))
            except psutil.Error:
                count = 0
            if count > limit:
                proc.limit_hit = "processes"
                _stop_group_now(proc.pid)
                self.kill(proc, grace_s=0)
                return
            time.sleep(_WATCH_INTERVAL_S)

    @staticmethod
    def _pump(proc: ManagedProcess, stream: IO[bytes] | None, tail: _Tail) -> None:
        if stream is None:
            return
        read = getattr(stream, "read1", stream.read)
        try:
            while True:
                chunk = read(65536)
                if not chunk:
                    break
                with proc.lock:
                    tail.feed(chunk)
                    proc.last_output_mono = time.monotonic()
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError):
                stream.close()

    # -- queries -----------------------------------------------------------------------
    def get(self, process_id: str) -> ManagedProcess:
        with self._lock:
            proc = self._procs.get(process_id)
        if proc is None:
            raise NotFound(f"no process {process_id!r} in this session", process_id=process_id)
        return proc

    def processes(self) -> list[ManagedProcess]:
        with self._lock:
            return list(self._procs.values())

    def status(self, proc: ManagedProcess, tail_bytes: int | None = None) -> dict[str, Any]:
        running = proc.running()
        now = time.monotonic()
        with proc.lock:
            since = now - proc.last_output_mono
            data = {
                "process_id": proc.process_id,
                "running": running,
                "exit_code": proc.exit_code,
                "stdout_tail": proc.stdout.text(tail_bytes),
                "stderr_tail": proc.stderr.text(tail_bytes),
                "stdout_bytes": proc.stdout.total,
                "stderr_bytes": proc.stderr.total,
                "seconds_since_output": round(since, 3),
                "stalled": running and since >= proc.stall_after_s,
                "stall_after_s": proc.stall_after_s,
                "runtime_s": round(now - proc.started_mono, 3),
            }
            truncated = proc.stdout.truncated or proc.stderr.truncated
        return {**data, "_truncated": truncated}

    def wait_for_change(
        self, proc: ManagedProcess, wait_s: float, *, cancelled: Callable[[], bool] | None = None
    ) -> None:
        """Block up to ``wait_s`` until new output, exit or cancellation, polling with backoff."""
        deadline = time.monotonic() + wait_s
        with proc.lock:
            seen = (proc.stdout.total, proc.stderr.total)
        delay = 0.01
        while time.monotonic() < deadline:
            if not proc.running() or (cancelled is not None and cancelled()):
                return
            with proc.lock:
                if (proc.stdout.total, proc.stderr.total) != seen:
                    return
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.25)

    # -- ending process trees -----------------------------------------------------------
    def tree(self, proc: ManagedProcess) -> list[psutil.Process]:
        """Every live process that belongs to ``proc``: its descendants, its process group, and
        anything carrying its environment marker (daemons that left the group)."""
        found: dict[int, psutil.Process] = {}
        me = os.getpid()
        root_pid = proc.pid
        try:
            root = psutil.Process(root_pid)
            if proc.create_time is None or abs(root.create_time() - proc.create_time) < 0.01:
                if proc.popen.returncode is None:
                    found[root_pid] = root
                for child in root.children(recursive=True):
                    found[child.pid] = child
        except psutil.Error:
            pass
        for candidate in psutil.process_iter():
            pid = candidate.pid
            if pid in found or pid == me or pid == root_pid:
                continue
            try:
                if _POSIX and os.getpgid(pid) == root_pid:
                    found[pid] = candidate
                    continue
            except OSError:
                continue
            try:
                if candidate.environ().get(ENV_TAG) == proc.tag:
                    found[pid] = candidate
            except (psutil.Error, OSError):
                continue
        for parent in list(found.values()):
            try:
                for child in parent.children(recursive=True):
                    if child.pid != me:
                        found.setdefault(child.pid, child)
            except psutil.Error:
                continue
        return [p for p in found.values() if _alive(p)]

    def wait(self, proc: ManagedProcess, timeout: float, cancelled: Callable[[], bool]) -> str | None:
        """Wait for ``proc`` to exit: None when it did, "timeout" or "cancelled" otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            if cancelled():
                return "cancelled"
            try:
                proc.popen.wait(timeout=min(0.05, remaining))
                return None
            except subprocess.TimeoutExpired:
                continue

    def kill(self, proc: ManagedProcess, *, grace_s: float) -> dict[str, Any]:
        proc.killed = True
        terminated: set[int] = set()
        forced: set[int] = set()
        targets = self.tree(proc)
        if targets:
            if _POSIX:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGTERM)
            _signal_all(targets, force=False)
            terminated.update(p.pid for p in targets)
            _wait_gone(proc, targets, grace_s)
        for _ in range(10):
            survivors = self.tree(proc)
            if not survivors:
                break
            if _POSIX:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
            _signal_all(survivors, force=True)
            forced.update(p.pid for p in survivors)
            _wait_gone(proc, survivors, 2.0)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=5)
        for reader in proc.readers:
            reader.join(timeout=2)
        left = [p.pid for p in self.tree(proc)]
        if not left:
            _discard(proc.sandbox)
        return {
            "process_id": proc.process_id,
            "exit_code": proc.exit_code,
            "terminated": sorted(terminated - forced),
            "forced": sorted(forced),
            "survivors": sorted(left),
        }

    def close(self) -> None:
        for proc in self.processes():
            if proc.running() or self.tree(proc):
                self.kill(proc, grace_s=1.0)
            _discard(proc.sandbox)


def _stop_group_now(pgid: int) -> None:
    """SIGKILL a process group at once and again until it is empty: a fork bomb must not get
    time to grow while its tree is being listed."""
    if not _POSIX:  # pragma: no cover - Windows: the tree kill below does the work
        return
    for _ in range(50):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            return
        time.sleep(0.002)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal_all(processes: list[psutil.Process], *, force: bool) -> None:
    for process in processes:
        try:
            if force:
                process.kill()
            else:
                process.terminate()
        except psutil.Error:
            continue


def _wait_gone(proc: ManagedProcess, processes: list[psutil.Process], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.01
    while time.monotonic() < deadline:
        proc.popen.poll()  # reap our own child so it does not linger as a zombie
        if not any(_alive(p) for p in processes):
            return
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
