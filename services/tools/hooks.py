"""Hooks around tool calls: the policy's ``hooks.before`` / ``hooks.after`` commands, run for every
matching call — the model's, the operator's, a plan's, the CLI's — by the gateway's pipeline
(``services.tools.pipeline``; which hooks match: ``services.policy.hooks``).

A hook runs as a shell command does (``services.tools.shell``): argv without a shell, its program
resolved on the policy's search path, in the workspace folder, with the policy's environment
pass-through and the hardened variables, the child rlimits (``childlimits``), the OS sandbox
(``sandbox``) and the process manager's tree kill (``processes``), with its own time limit
(``timeout_s``, at most 60 s). The call reaches it as one JSON object on its standard input —
``{"hook", "when", "tool", "call_id", "source", "arguments"}`` and, after the call, ``"result"``
(``status``, ``data``, ``error``) — never in its argv. Each run is one audit row (tool name
``hook:<when>:<id>``, source ``hook``) with its outcome.

``before`` hooks run once the policy has not denied the call, before the operator is asked: exit 0
lets the call go on (unless stdout is ``{"decision": "deny", "reason": …}``); exit 2 denies it with
the reason on stdout (a JSON ``reason`` or the text), which the model receives as a structured
``PolicyDenied`` result (rule ``hooks.before.<id>``). Any other ending — another exit code, a
signal, the time limit, a program that cannot start — denies the call too (fail closed). ``after``
hooks run once the tool ran; a failure is reported (the result's ``meta.hooks``, a transcript
notice, the audit row) and the call's result stands. With ``add_to_context: true`` an after hook's
stdout, cut at :data:`HOOK_CONTEXT_CHARS`, goes to the model beside the tool result as untrusted
data (``services.assistant.context.tool_result_text``).

Hooks do not run on hooks: a hook is not a tool call, and a tool call made from inside a hook (the
``ARIES_HOOK`` marker in its environment, e.g. a hook that runs ``aries tool call``) runs none.
A hook whose program or script lies inside the allowed roots (outside the workspace's own records)
is refused: the tools it guards could rewrite it. Its program and script are readable inside the
sandbox even where it hides them (bubblewrap's private ``/tmp``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from services.clock import monotonic, utc_now
from services.errors import AriesError
from services.hashing import canonical_json, content_hash
from services.policy import WORKSPACE_INTERNAL, PolicyDecision
from services.policy.hooks import When, matching
from services.tools.calls import new_id
from services.tools.results import ErrorType, ToolError

if TYPE_CHECKING:
    from services.audit.log import AuditStore
    from services.conversation import Conversation
    from services.policy import BoundPolicy, Policy
    from services.policy.document import Hook
    from services.tools.processes import ManagedProcess, ProcessManager
    from services.workspace.manager import Workspace
    from services.workspace.transcripts import Transcript

HOOK_MARKER = "ARIES_HOOK"
"""Set (to the hook's id) in every hook's environment; a call made where it is set runs no hooks."""
DENY_EXIT = 2
HOOK_CONTEXT_CHARS = 4_000
"""Of one after hook's stdout, what the model is given at most."""
HOOK_OUTPUT_BYTES = 64 << 10
REASON_CHARS = 500


class HookHost(Protocol):
    """What hooks need of the gateway call site (``services.tools.pipeline.CallSite``)."""

    @property
    def workspace(self) -> Workspace: ...
    @property
    def bound(self) -> BoundPolicy: ...
    @property
    def audit(self) -> AuditStore: ...
    @property
    def processes(self) -> Callable[[], ProcessManager]: ...
    @property
    def next_step(self) -> Callable[[], int]: ...


@dataclass(frozen=True)
class HookCall:
    """The call hooks run around."""

    tool_id: str
    args: Any
    call_id: str
    run_id: str
    source: str


@dataclass(frozen=True)
class HookRun:
    hook: str
    when: When
    outcome: str  # allowed | denied | failed (before); ran | failed (after)
    message: str
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_ms: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {"hook": self.hook, "when": self.when, "outcome": self.outcome, "message": self.message}


@dataclass
class HookLog:
    """What the hooks of one call did, for the result's meta, the model and the transcript."""

    runs: list[HookRun] = field(default_factory=list)
    context: list[dict[str, str]] = field(default_factory=list)

    def annotate(self, meta: dict[str, Any]) -> None:
        if self.runs:
            meta["hooks"] = [run.summary() for run in self.runs]
        if self.context:
            meta["hook_context"] = list(self.context)

    def notify(self, recorder: Conversation | Transcript) -> None:
        """A transcript notice for each after hook that failed (the call's result stands)."""
        failed = [run for run in self.runs if run.when == "after" and run.outcome == "failed"]
        if not failed:
            return
        from services.conversation import Conversation

        conversation = recorder if isinstance(recorder, Conversation) else Conversation(recorder)
        for run in failed:
            try:
                conversation.notice(run.message, level="warning", title="hook")
            except (AriesError, OSError):
                return  # the audit row has it


def hooks_disabled() -> bool:
    """True inside a hook: calls made there run no hooks."""
    return bool(os.environ.get(HOOK_MARKER))


# -- running one hook -------------------------------------------------------------------------
def _one_line(text: str, limit: int = REASON_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit] + "…"


def _executable(bound: BoundPolicy, program: str) -> str:
    from services.errors import NotFound

    found = program if program.startswith("/") else bound.resolve_executable(program)
    if found is None or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise NotFound(f"the hook's program {program!r} is not an executable on the search path")
    return os.path.realpath(found)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _hook_files(bound: BoundPolicy, argv: list[str], executable: str, cwd: str) -> tuple[str, ...]:
    """The files a hook runs (its program, a script it names by a path: an argument with a ``/``),
    which the sandbox lets it read; refused when one lies where tools may write (the allowed roots,
    except the workspace's own records). A plain word is an argument, never a file: a tool that makes
    a file of that name cannot stop the hook."""
    from services.policy import ToolPermissionDenied

    internal = [os.path.join(str(bound.workspace_root), name) for name in WORKSPACE_INTERNAL]
    files: list[str] = []
    for token in [executable, *(arg for arg in argv[1:] if "/" in arg)]:
        path = os.path.realpath(os.path.join(cwd, token))
        if not os.path.isfile(path):
            continue
        files.append(path)
        if any(_inside(path, own) for own in internal):
            continue
        if any(_inside(path, str(root)) for root in bound.roots):
            raise ToolPermissionDenied(
                f"the hook's file {token!r} is inside the allowed roots, where tools can rewrite it; "
                "keep hook programs outside them"
            )
    return tuple(files)


def _cwd(bound: BoundPolicy, workspace: Workspace) -> str:
    """The workspace folder when it is an allowed root or inside one (the default), else the first
    root: a folder the sandbox shows (bubblewrap's ``/tmp`` is private)."""
    own = str(bound.workspace_root or workspace.root)
    roots = [str(root) for root in bound.roots]
    return own if not roots or any(_inside(own, root) for root in roots) else roots[0]


def _env(bound: BoundPolicy, hook: Hook, when: When, tool_id: str) -> dict[str, str]:
    import fnmatch

    from services.tools.shell import HARDENED_ENV

    patterns = bound.policy.env_passthrough
    env = {k: v for k, v in os.environ.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
    env.update(HARDENED_ENV)
    env.update({HOOK_MARKER: hook.id, "ARIES_HOOK_WHEN": when, "ARIES_HOOK_TOOL": tool_id})
    return env


def _start(host: HookHost, hook: Hook, when: When, tool_id: str, payload: bytes) -> ManagedProcess:
    from services.tools.childlimits import plan
    from services.tools.sandbox import discard, prepare

    bound = host.bound
    cwd = _cwd(bound, host.workspace)
    argv = list(hook.command)
    executable = _executable(bound, argv[0])
    files = _hook_files(bound, argv, executable, cwd)
    env = _env(bound, hook, when, tool_id)
    sandbox = prepare(bound, argv=argv, executable=executable, cwd=cwd, env=env, readable=files)
    with tempfile.TemporaryFile() as stdin:
        stdin.write(payload)
        stdin.flush()
        stdin.seek(0)
        try:
            return host.processes().start(
                argv,
                executable=executable,
                cwd=cwd,
                env=env,
                output_cap=HOOK_OUTPUT_BYTES,
                stall_after_s=hook.timeout_s,
                max_processes=bound.limits.shell_max_processes,
                limits=plan(bound.limits),
                sandbox=sandbox,
                stdin=stdin,
            )
        except BaseException:
            discard(sandbox)
            raise


def _run(host: HookHost, hook: Hook, when: When, tool_id: str, payload: bytes, cancel: threading.Event) -> HookRun:
    """Run one hook to its end (or its time limit) and read what it said."""
    from services.tools.sandbox import discard

    started = monotonic()
    try:
        proc = _start(host, hook, when, tool_id, payload)
    except AriesError as exc:
        return HookRun(hook.id, when, "failed", f"hook {hook.id} could not start: {exc.message}")
    except OSError as exc:
        return HookRun(hook.id, when, "failed", f"hook {hook.id} could not start: {exc}")
    manager = host.processes()
    ending = manager.wait(proc, hook.timeout_s, cancel.is_set)
    if ending is not None:
        manager.kill(proc, grace_s=0.5)
        what = f"did not finish within {hook.timeout_s:g} s" if ending == "timeout" else "was cancelled"
        elapsed = round((monotonic() - started) * 1000, 3)
        return HookRun(hook.id, when, "failed", f"hook {hook.id} {what}; it was ended", None, "", "", elapsed)
    for reader in proc.readers:
        reader.join(timeout=2)
    if not manager.tree(proc):
        discard(proc.sandbox)
    else:
        manager.kill(proc, grace_s=0.5)  # what it left running in the background
    with proc.lock:
        stdout, stderr = proc.stdout.text(), proc.stderr.text()
    elapsed = round((monotonic() - started) * 1000, 3)
    return _read(hook, when, proc.exit_code, stdout, stderr, elapsed)


def _deny_reason(stdout: str, stderr: str) -> str:
    try:
        said = json.loads(stdout)
    except ValueError:
        said = None
    if isinstance(said, dict) and isinstance(said.get("reason"), str) and said["reason"].strip():
        return _one_line(said["reason"])
    return _one_line(stdout) or _one_line(stderr) or "no reason given"


def _asks_deny(stdout: str) -> bool:
    try:
        said = json.loads(stdout)
    except ValueError:
        return False
    return isinstance(said, dict) and said.get("decision") == "deny"


def _read(hook: Hook, when: When, code: int | None, stdout: str, stderr: str, elapsed: float) -> HookRun:
    """The outcome of a finished hook by its exit code (and, before a call, its JSON decision)."""

    def run(outcome: str, message: str) -> HookRun:
        return HookRun(hook.id, when, outcome, message, code, stdout, stderr, elapsed)

    if when == "before" and (code == DENY_EXIT or (code == 0 and _asks_deny(stdout))):
        return run("denied", f"denied by hook {hook.id}: {_deny_reason(stdout, stderr)}")
    if code == 0:
        return run("allowed" if when == "before" else "ran", f"hook {hook.id} exited 0")
    ended = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited {code}"
    detail = _one_line(stderr) or _one_line(stdout)
    return run("failed", f"hook {hook.id} failed: it {ended}" + (f" ({detail})" if detail else ""))


# -- audit ---------------------------------------------------------------------------------------
def _record_start(host: HookHost, hook: Hook, when: When, call: HookCall, started_at: str) -> str:
    hook_call_id = new_id("hook")
    host.audit.record_call(
        call_id=hook_call_id,
        run_id=call.run_id,
        step_index=host.next_step(),
        tool_name=f"hook:{when}:{hook.id}",
        args={"for_call": call.call_id, "tool_id": call.tool_id, "command": list(hook.command)},
        created_at=started_at,
        source="hook",
        tier=None,
    )
    return hook_call_id


def _record_end(host: HookHost, hook_call_id: str, call: HookCall, run: HookRun, payload: bytes, started: str) -> None:
    refused = run.outcome == "denied" or (run.when == "before" and run.outcome == "failed")
    status = {"denied": "denied", "failed": "error"}.get(run.outcome, "success")
    tails = {"stdout": run.stdout[-4096:], "stderr": run.stderr[-4096:]}
    output = {"outcome": run.outcome, "exit_code": run.exit_code, **tails}
    decision = {
        "action": "deny" if refused else "allow",
        "rule": f"hooks.{run.when}.{run.hook}",
        "reason": run.message,
        "tool_id": call.tool_id,
        "tier": "EXEC_USERSPACE",
        "mode": host.bound.mode,
        "approved_by": "policy",
        "facts": {"hook": run.hook, "for_call": call.call_id},
    }
    error = None if status == "success" else {"type": "HookFailed", "message": run.message}
    host.audit.record_result(
        call_id=hook_call_id,
        run_id=call.run_id,
        status=status,
        output_json=canonical_json(output),
        error_json=canonical_json(error) if error is not None else None,
        decision=decision,
        started_at=started,
        ended_at=utc_now(),
        duration_ms=run.duration_ms,
        input_hash=content_hash({"hook": run.hook, "input": payload.decode("utf-8", "replace")}),
        output_hash=None,
        workspace=host.workspace.name,
    )


async def _audited(host: HookHost, hook: Hook, when: When, call: HookCall, payload: bytes) -> HookRun:
    """One hook run, between its two audit rows (no row, no run: a refused row is a failure)."""
    started = utc_now()
    try:
        hook_call_id = _record_start(host, hook, when, call, started)
    except Exception as exc:
        return HookRun(hook.id, when, "failed", f"hook {hook.id} not run: the audit store refused its record: {exc}")
    cancel = threading.Event()
    try:
        run = await asyncio.to_thread(_run, host, hook, when, call.tool_id, payload, cancel)
    except asyncio.CancelledError:  # the call was cancelled: its hook's tree is ended, its row closed
        cancel.set()
        ended = HookRun(hook.id, when, "failed", f"hook {hook.id} was cancelled with its call")
        with contextlib.suppress(Exception):
            _record_end(host, hook_call_id, call, ended, payload, started)
        raise
    try:
        _record_end(host, hook_call_id, call, run, payload, started)
    except Exception as exc:  # the run happened; say the record is missing
        run = HookRun(
            run.hook, when, run.outcome, f"{run.message} (audit: {exc})", run.exit_code, run.stdout, run.stderr
        )
    return run


def _payload(hook: Hook, when: When, call: HookCall, result: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {
        "hook": hook.id,
        "when": when,
        "tool": call.tool_id,
        "call_id": call.call_id,
        "source": call.source,
        "arguments": call.args,
    }
    if result is not None:
        body["result"] = result
    return (json.dumps(body, ensure_ascii=False, default=str) + "\n").encode("utf-8")


def describe_hooks(policy: Policy) -> tuple[bool, str] | None:
    """For the doctor: (ok, one line) on the policy's hooks — how many, and a program that cannot be
    found (a before hook's makes every call it matches fail closed); None when there are none."""
    import shutil

    hooks = policy.hooks
    if not hooks.before and not hooks.after:
        return None
    search = os.pathsep.join(policy.search_path) if policy.search_path else os.environ.get("PATH")
    missing = []
    for when, listed in (("before", hooks.before), ("after", hooks.after)):
        for hook in listed:
            program = hook.command[0]
            found = program if program.startswith("/") else shutil.which(program, path=search)
            if found is None or not os.access(found, os.X_OK):
                missing.append(f"{when} hook {hook.id}: {program!r} not found")
    counted = f"{len(hooks.before)} before, {len(hooks.after)} after"
    if missing:
        return False, f"{counted}; {'; '.join(missing)} (a before hook's calls are all denied)"
    return True, f"{counted}; every program found"


# -- the pipeline's two steps -------------------------------------------------------------------
async def run_before(
    host: HookHost, call: HookCall, decision: PolicyDecision, log: HookLog
) -> tuple[PolicyDecision, ToolError] | None:
    """The before hooks of a call the policy did not deny, in order; the first that denies or fails
    ends the call (its decision and error), else None."""
    if hooks_disabled():
        return None
    for hook in matching(host.bound.policy.hooks, "before", call.tool_id, call.args):
        run = await _audited(host, hook, "before", call, _payload(hook, "before", call))
        log.runs.append(run)
        if run.outcome == "allowed":
            continue
        reason = run.message if run.outcome == "denied" else f"{run.message}; the call is denied (fail closed)"
        rule = f"hooks.before.{hook.id}"
        facts = {**decision.facts, "policy_rule": decision.rule, "hook": hook.id}
        denied = PolicyDecision("deny", rule, reason, call.tool_id, decision.tier, decision.mode, "PolicyDenied", facts)
        details = {"rule": rule, "policy_rule": decision.rule, "hook": hook.id, "hook_outcome": run.outcome}
        return denied, ToolError(ErrorType.POLICY_DENIED, reason, False, details)
    return None


async def run_after(host: HookHost, call: HookCall, result: dict[str, Any], log: HookLog) -> None:
    """The after hooks of a call the tool ran, in order; their failures and added context go to ``log``."""
    if hooks_disabled():
        return
    for hook in matching(host.bound.policy.hooks, "after", call.tool_id, call.args):
        run = await _audited(host, hook, "after", call, _payload(hook, "after", call, result))
        log.runs.append(run)
        if run.outcome == "ran" and getattr(hook, "add_to_context", False) and run.stdout.strip():
            text = run.stdout
            entry = {"hook": hook.id, "text": text[:HOOK_CONTEXT_CHARS]}
            if len(text) > HOOK_CONTEXT_CHARS:
                entry["note"] = f"cut at {HOOK_CONTEXT_CHARS} of {len(text)} characters"
            log.context.append(entry)


__all__ = [
    "DENY_EXIT",
    "HOOK_CONTEXT_CHARS",
    "HOOK_MARKER",
    "HookCall",
    "HookHost",
    "HookLog",
    "HookRun",
    "describe_hooks",
    "hooks_disabled",
    "run_after",
    "run_before",
]
