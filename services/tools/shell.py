"""Builtin shell tools on psutil: start, poll, kill, run.

Commands run without a shell (``argv`` only), with the executable resolved from the policy's
allowlist, a cwd inside the allowed roots and an environment reduced to the policy's
pass-through list.  Each process gets its own session/process group and an environment
marker ``ARIES_PROC_TAG``; ending a process ends its whole tree: the process group, psutil's
view of its descendants, and every process still carrying the marker (which finds
grandchildren that double-forked or called ``setsid``).  Termination is graceful (SIGTERM,
``grace_s``) then forced (SIGKILL), repeated until nothing is left.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

import psutil

from services.clock import utc_now
from services.errors import InvalidInput, NotFound, TooLarge
from services.policy import CommandUse, Resource, RiskTier
from services.tools import schemas
from services.tools.registry import ToolContext, ToolSpec, tool
from services.tools.results import ToolOutput, ToolPermissionDenied, ToolTimeout

TOOLS: list[ToolSpec] = []
ENV_TAG = "ARIES_PROC_TAG"
_KEEP_FINISHED = 64
_POSIX = os.name == "posix"


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

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None


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
    ) -> ManagedProcess:
        with self._lock:
            running = sum(1 for p in self._procs.values() if p.popen.poll() is None)
            if running >= max_processes:
                raise TooLarge(f"{running} processes are running; the limit is {max_processes}")
            self._counter += 1
            process_id = f"p{self._counter}-{secrets.token_hex(3)}"
        tag = f"{self.session}:{process_id}"
        env = {**env, ENV_TAG: tag}
        kwargs: dict[str, Any] = {}
        if _POSIX:
            kwargs["start_new_session"] = True
        else:  # pragma: no cover - Windows
            kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        try:
            popen = subprocess.Popen(  # argv only (no shell); the executable comes from the allowlist
                argv,
                executable=executable,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                close_fds=True,
                **kwargs,
            )
        except FileNotFoundError:
            raise NotFound(f"executable {argv[0]!r} was not found") from None
        except PermissionError:
            raise ToolPermissionDenied(f"executable {argv[0]!r} cannot be run (permission denied)") from None
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
        )
        for stream, tail in ((popen.stdout, proc.stdout), (popen.stderr, proc.stderr)):
            reader = threading.Thread(
                target=self._pump, args=(proc, stream, tail), daemon=True, name=f"aries-{process_id}-reader"
            )
            reader.start()
            proc.readers.append(reader)
        with self._lock:
            self._procs[process_id] = proc
            finished = [k for k, p in self._procs.items() if p.popen.returncode is not None]
            for key in finished[:-_KEEP_FINISHED] if len(finished) > _KEEP_FINISHED else []:
                del self._procs[key]
        return proc

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
                "exit_code": proc.popen.returncode,
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

    def wait_for_change(self, proc: ManagedProcess, wait_s: float) -> None:
        """Block up to ``wait_s`` until new output or exit, polling with backoff."""
        deadline = time.monotonic() + wait_s
        with proc.lock:
            seen = (proc.stdout.total, proc.stderr.total)
        delay = 0.01
        while time.monotonic() < deadline:
            if not proc.running():
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
        return {
            "process_id": proc.process_id,
            "exit_code": proc.popen.returncode,
            "terminated": sorted(terminated - forced),
            "forced": sorted(forced),
            "survivors": sorted(left),
        }

    def close(self) -> None:
        for proc in self.processes():
            if proc.running() or self.tree(proc):
                self.kill(proc, grace_s=1.0)


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


# -- the tools ----------------------------------------------------------------------------------
def _command_resources(args: dict[str, Any]) -> list[Resource]:
    return [CommandUse(args.get("argv"), args.get("cwd"), args.get("env"))]


def _child_env(ctx: ToolContext, extra: dict[str, str] | None) -> dict[str, str]:
    patterns = ctx.policy.policy.env_passthrough
    env = {k: v for k, v in os.environ.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
    env.update(extra or {})
    return env


def _start(ctx: ToolContext, args: dict[str, Any]) -> ManagedProcess:
    facts = ctx.policy.check_command(CommandUse(args.get("argv"), args.get("cwd"), args.get("env")))
    if facts["executable"] is None:
        raise NotFound(f"executable {facts['executable_name']!r} is not on the search path")
    stall = float(args.get("stall_after_s", ctx.limits.shell_stall_after_s))
    manager: ProcessManager = ctx.processes
    return manager.start(
        list(args["argv"]),
        executable=facts["executable"],
        cwd=facts["cwd"],
        env=_child_env(ctx, args.get("env")),
        output_cap=ctx.limits.shell_output_max_bytes,
        stall_after_s=stall,
        max_processes=ctx.limits.shell_max_processes,
    )


def _preview_command(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    facts = ctx.policy.check_command(CommandUse(args.get("argv"), args.get("cwd"), args.get("env")))
    import shlex

    return {
        "kind": "command",
        "command": shlex.join(args["argv"]),
        "executable": facts["executable"],
        "cwd": facts["cwd"],
        "env": sorted((args.get("env") or {}).keys()),
        "timeout_s": args.get("timeout_s"),
    }


@tool(
    "builtin:shell:start",
    tier=RiskTier.EXEC_USERSPACE,
    description="Start a command (argv, no shell) in the background; returns a stable process_id.",
    input_schema=schemas.SHELL_START_IN,
    output_schema=schemas.SHELL_START_OUT,
    registry=TOOLS,
    resources=_command_resources,
    session_keys=("command.executable", "command.cwd"),
    preview=_preview_command,
)
def start(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    proc = _start(ctx, args)
    return ToolOutput(
        {
            "process_id": proc.process_id,
            "pid": proc.pid,
            "argv": proc.argv,
            "cwd": proc.cwd,
            "started_at": proc.started_at,
        }
    )


@tool(
    "builtin:shell:poll",
    tier=RiskTier.READ_ONLY,
    description="Status of a started process: running flag, exit code, stdout/stderr tails, stall metadata. "
    "wait_s blocks (with backoff) until new output or exit.",
    input_schema=schemas.SHELL_POLL_IN,
    output_schema=schemas.SHELL_POLL_OUT,
    registry=TOOLS,
)
def poll(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    manager: ProcessManager = ctx.processes
    proc = manager.get(str(args["process_id"]))
    wait_s = float(args.get("wait_s", 0))
    if wait_s > 0:
        manager.wait_for_change(proc, wait_s)
    status = manager.status(proc, args.get("tail_bytes"))
    truncated = status.pop("_truncated")
    return ToolOutput(status, {"truncated": truncated})


@tool(
    "builtin:shell:kill",
    tier=RiskTier.EXEC_USERSPACE,
    description="End a started process and its whole tree: SIGTERM, grace period, then SIGKILL.",
    input_schema=schemas.SHELL_KILL_IN,
    output_schema=schemas.SHELL_KILL_OUT,
    registry=TOOLS,
)
def kill(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    manager: ProcessManager = ctx.processes
    proc = manager.get(str(args["process_id"]))
    grace = min(float(args.get("grace_s", ctx.limits.shell_kill_grace_s)), 60.0)
    return ToolOutput(manager.kill(proc, grace_s=grace))


@tool(
    "builtin:shell:run",
    tier=RiskTier.EXEC_USERSPACE,
    description="Run a command to completion with a timeout; on timeout the whole tree is ended. Background "
    "processes left behind are ended too.",
    input_schema=schemas.SHELL_RUN_IN,
    output_schema=schemas.SHELL_RUN_OUT,
    registry=TOOLS,
    resources=_command_resources,
    session_keys=("command.executable", "command.cwd"),
    preview=_preview_command,
)
def run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    timeout = float(args.get("timeout_s", ctx.limits.shell_timeout_s))
    timeout = min(timeout, ctx.limits.shell_max_timeout_s)
    if timeout <= 0:
        raise InvalidInput("timeout_s must be positive")
    manager: ProcessManager = ctx.processes
    proc = _start(ctx, args)
    try:
        proc.popen.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        report = manager.kill(proc, grace_s=ctx.limits.shell_kill_grace_s)
        status = manager.status(proc, 4096)
        raise ToolTimeout(
            f"{args['argv'][0]} did not finish within {timeout:g} s; its process tree was ended",
            process_id=proc.process_id,
            stdout_tail=status["stdout_tail"],
            stderr_tail=status["stderr_tail"],
            terminated=report["terminated"],
            forced=report["forced"],
        ) from None
    except BaseException:
        manager.kill(proc, grace_s=0.5)
        raise
    leftovers = manager.tree(proc)
    cleaned: list[int] = []
    if leftovers:
        report = manager.kill(proc, grace_s=min(1.0, ctx.limits.shell_kill_grace_s))
        cleaned = sorted(set(report["terminated"]) | set(report["forced"]))
    for reader in proc.readers:
        reader.join(timeout=2)
    with proc.lock:
        data = {
            "exit_code": proc.popen.returncode,
            "stdout": proc.stdout.text(),
            "stderr": proc.stderr.text(),
            "stdout_bytes": proc.stdout.total,
            "stderr_bytes": proc.stderr.total,
            "process_id": proc.process_id,
            "cleaned_up": cleaned,
        }
        truncated = proc.stdout.truncated or proc.stderr.truncated
    return ToolOutput(data, {"truncated": truncated, "bytes": proc.stdout.total + proc.stderr.total})
