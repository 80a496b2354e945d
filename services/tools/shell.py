"""Builtin shell tools: start, poll, kill, run (process management in ``processes``).

Commands run without a shell (``argv`` only), with the executable resolved from the policy's
allowlist, a cwd inside the allowed roots, an environment reduced to the policy's pass-through
list plus the variables the call may set (``shell.env_allow``), and the policy's resource
limits (rlimits, no-new-privileges), inside the OS sandbox the policy's ``shell.sandbox`` chooses
(``services.tools.sandbox``: bubblewrap or Landlock; the allowed roots writable, the rest read-only
or hidden, a private ``/tmp``, no network unless ``shell.network``).  ``run`` watches the call's
cancel token: when the gateway cancels the call or its deadline passes, the whole process tree is
ended, so a timed-out call leaves nothing running.  Processes from ``start`` live until ``kill`` or the session ends.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Any

from services.errors import InvalidInput, NotFound, TooLarge
from services.grants.store import TOOL_CALL_MARKER
from services.policy import CommandUse, Resource, RiskTier
from services.tools import schemas
from services.tools.args import ShellKillArgs, ShellPollArgs, ShellRunArgs, ShellStartArgs, given
from services.tools.childlimits import plan, stopped_by
from services.tools.outputs import ShellRunOutput, ShellStartOutput
from services.tools.processes import ManagedProcess, ProcessManager
from services.tools.registry import ToolContext, ToolSpec, tool
from services.tools.results import ToolOutput, ToolTimeout
from services.tools.sandbox import SandboxPlan, discard, prepare

__all__ = ["TOOLS", "kill", "poll", "run", "start"]

TOOLS: list[ToolSpec] = []
# Approving an exec-capable command "for the session" covers that exact argv only.
_SESSION_KEYS = ("command.executable", "command.cwd", "command.exec_argv")


def _command(args: ShellStartArgs | ShellRunArgs) -> CommandUse:
    return CommandUse(list(args.argv), given(args.cwd, None), given(args.env, None))


def _command_resources(args: ShellStartArgs | ShellRunArgs) -> list[Resource]:
    return [_command(args)]


# Set in every child: no pager can run (its shell escapes), git never prompts, a repository's
# own config cannot start a file-system monitor program from an otherwise inert ``git status``, and
# ``aries grants add`` knows it runs inside a tool call and refuses (services.grants.store).
HARDENED_ENV = {
    TOOL_CALL_MARKER: "1",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "core.fsmonitor",
    "GIT_CONFIG_VALUE_0": "false",
}


def _child_env(ctx: ToolContext, extra: dict[str, str] | None) -> dict[str, str]:
    patterns = ctx.policy.policy.env_passthrough
    env = {k: v for k, v in os.environ.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
    env.update(HARDENED_ENV)
    env.update(extra or {})  # names already checked against shell.env_allow by the policy
    return env


def _start(ctx: ToolContext, args: ShellStartArgs | ShellRunArgs) -> ManagedProcess:
    facts = ctx.policy.check_command(_command(args))
    if facts["executable"] is None:
        raise NotFound(f"executable {facts['executable_name']!r} is not on the search path")
    stall = ctx.limits.shell_stall_after_s
    if isinstance(args, ShellStartArgs):
        stall = given(args.stall_after_s, stall)
    manager: ProcessManager = ctx.processes
    env = _child_env(ctx, given(args.env, None))
    argv = list(args.argv)
    sandbox = prepare(ctx.policy, argv=argv, executable=facts["executable"], cwd=facts["cwd"], env=env)
    try:
        return _launch(ctx, manager, argv, facts, env, stall, sandbox)
    except BaseException:
        discard(sandbox)
        raise


def _launch(
    ctx: ToolContext,
    manager: ProcessManager,
    argv: list[str],
    facts: dict[str, Any],
    env: dict[str, str],
    stall: float,
    sandbox: SandboxPlan | None,
) -> ManagedProcess:
    return manager.start(
        argv,
        executable=facts["executable"],
        cwd=facts["cwd"],
        env=env,
        output_cap=ctx.limits.shell_output_max_bytes,
        stall_after_s=stall,
        max_processes=ctx.limits.shell_max_processes,
        limits=plan(ctx.limits),
        sandbox=sandbox,
    )


def _preview_command(ctx: ToolContext, args: ShellStartArgs | ShellRunArgs) -> dict[str, Any]:
    facts = ctx.policy.check_command(_command(args))
    import shlex

    return {
        "kind": "command",
        "command": shlex.join(args.argv),
        "executable": facts["executable"],
        "cwd": facts["cwd"],
        "env": sorted(given(args.env, {}).keys()),
        "timeout_s": given(args.timeout_s, None) if isinstance(args, ShellRunArgs) else None,
    }


@tool(
    "builtin:shell:start",
    tier=RiskTier.EXEC_USERSPACE,
    description="Start a command (argv, no shell) in the background; returns a stable process_id.",
    args=ShellStartArgs,
    output_schema=schemas.SHELL_START_OUT,
    registry=TOOLS,
    resources=_command_resources,
    session_keys=_SESSION_KEYS,
    preview=_preview_command,
)
def start(ctx: ToolContext, args: ShellStartArgs) -> ToolOutput:
    proc = _start(ctx, args)
    started = ShellStartOutput(
        process_id=proc.process_id, pid=proc.pid, argv=proc.argv, cwd=proc.cwd, started_at=proc.started_at
    )
    return ToolOutput.of(started)


@tool(
    "builtin:shell:poll",
    tier=RiskTier.READ_ONLY,
    description="Status of a started process: running flag, exit code, stdout/stderr tails, stall metadata. "
    "wait_s blocks (with backoff) until new output or exit.",
    args=ShellPollArgs,
    output_schema=schemas.SHELL_POLL_OUT,
    registry=TOOLS,
)
def poll(ctx: ToolContext, args: ShellPollArgs) -> ToolOutput:
    manager: ProcessManager = ctx.processes
    proc = manager.get(args.process_id)
    if args.wait_s > 0:
        manager.wait_for_change(proc, args.wait_s, cancelled=ctx.cancelled)
    status = manager.status(proc, given(args.tail_bytes, None))
    truncated = status.pop("_truncated")
    meta: dict[str, Any] = {"truncated": truncated}
    if proc.limits is not None and not status["running"]:
        hit = stopped_by(proc.limits, proc.exit_code, status["stderr_tail"], watchdog_hit=proc.limit_hit == "processes")
        if hit is not None:
            meta["limit"] = hit  # e.g. {"limit": "cpu", "message": "stopped: CPU time limit of 2 s"}
    return ToolOutput(status, meta)


@tool(
    "builtin:shell:kill",
    tier=RiskTier.EXEC_USERSPACE,
    description="End a started process and its whole tree: SIGTERM, grace period, then SIGKILL.",
    args=ShellKillArgs,
    output_schema=schemas.SHELL_KILL_OUT,
    registry=TOOLS,
)
def kill(ctx: ToolContext, args: ShellKillArgs) -> ToolOutput:
    manager: ProcessManager = ctx.processes
    proc = manager.get(args.process_id)
    grace = min(given(args.grace_s, ctx.limits.shell_kill_grace_s), 60.0)
    return ToolOutput(manager.kill(proc, grace_s=grace))


@tool(
    "builtin:shell:run",
    tier=RiskTier.EXEC_USERSPACE,
    description="Run a command to completion with a timeout; on timeout the whole tree is ended. Background "
    "processes left behind are ended too.",
    args=ShellRunArgs,
    output_schema=schemas.SHELL_RUN_OUT,
    registry=TOOLS,
    resources=_command_resources,
    session_keys=_SESSION_KEYS,
    preview=_preview_command,
)
def run(ctx: ToolContext, args: ShellRunArgs) -> ToolOutput:
    timeout = given(args.timeout_s, ctx.limits.shell_timeout_s)
    timeout = min(timeout, ctx.limits.shell_max_timeout_s)
    if timeout <= 0:
        raise InvalidInput("timeout_s must be positive")
    manager: ProcessManager = ctx.processes
    proc = _start(ctx, args)
    try:
        outcome = manager.wait(proc, timeout, ctx.cancelled)
    except BaseException:
        manager.kill(proc, grace_s=0.5)
        raise
    if outcome is not None:
        # Timed out, or the gateway cancelled the call (its deadline passed, the operator cancelled
        # it, the session is closing): end the whole tree now, children first, then the leader.
        grace = ctx.limits.shell_kill_grace_s if outcome == "timeout" else min(1.0, ctx.limits.shell_kill_grace_s)
        report = manager.kill(proc, grace_s=grace)
        status = manager.status(proc, 4096)
        what = f"did not finish within {timeout:g} s" if outcome == "timeout" else "was cancelled"
        raise ToolTimeout(
            f"{args.argv[0]} {what}; its process tree was ended",
            process_id=proc.process_id,
            stdout_tail=status["stdout_tail"],
            stderr_tail=status["stderr_tail"],
            terminated=report["terminated"],
            forced=report["forced"],
            cancelled=outcome == "cancelled",
        )
    leftovers = manager.tree(proc)
    cleaned: list[int] = []
    if leftovers:
        report = manager.kill(proc, grace_s=min(1.0, ctx.limits.shell_kill_grace_s))
        cleaned = sorted(set(report["terminated"]) | set(report["forced"]))
    for reader in proc.readers:
        reader.join(timeout=2)
    if not leftovers:
        discard(proc.sandbox)  # its private directory (kill() discards it otherwise)
    with proc.lock:
        ran = ShellRunOutput(
            exit_code=proc.exit_code,
            stdout=proc.stdout.text(),
            stderr=proc.stderr.text(),
            stdout_bytes=proc.stdout.total,
            stderr_bytes=proc.stderr.total,
            process_id=proc.process_id,
            cleaned_up=cleaned,
        )
        truncated = proc.stdout.truncated or proc.stderr.truncated
        stdout_tail, stderr_tail = proc.stdout.text(4096), proc.stderr.text(4096)
    if proc.limits is not None:
        hit = stopped_by(proc.limits, proc.exit_code, stderr_tail, watchdog_hit=proc.limit_hit == "processes")
        if hit is not None:
            raise TooLarge(
                f"{args.argv[0]} {hit['message']}",
                limit=hit["limit"],
                exit_code=proc.exit_code,
                process_id=proc.process_id,
                stdout_tail=stdout_tail,
                stderr_tail=stderr_tail,
            )
    meta = {"truncated": truncated, "bytes": proc.stdout.total + proc.stderr.total}
    return ToolOutput.of(ran, {**meta, "sandbox": _sandbox_meta(proc)})


def _sandbox_meta(proc: ManagedProcess) -> dict[str, Any] | None:
    """The limits the command ran under, and its OS sandbox (``os``: None when there was none)."""
    if proc.limits is None and proc.sandbox is None:
        return None
    described: dict[str, Any] = proc.limits.describe() if proc.limits is not None else {}
    described["os"] = proc.sandbox.describe() if proc.sandbox is not None else None
    return described
