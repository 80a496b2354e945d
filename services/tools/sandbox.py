"""The OS sandbox of shell commands (``builtin:shell:run`` and ``builtin:shell:start``).

The policy's ``shell.sandbox`` chooses it: ``auto`` (the default) takes bubblewrap when ``bwrap``
is installed and can create its namespaces here, else Landlock when the kernel offers it (Linux
>= 5.13), else none; ``bubblewrap`` or ``landlock`` require that one (absent: the call fails with
``SandboxUnavailable``, naming what is missing); ``off`` runs commands with the policy and the
rlimits only (``services.tools.childlimits``), which is also the documented fallback when no
sandbox is available — ``aries tool doctor`` says which applies.

Inside either sandbox the policy's allowed roots are writable and the rest of the file system is
read-only, or hidden except ``shell.visible_paths`` when ``shell.outside_root: hidden``; ``/tmp``
is private; the network is off unless ``shell.network: true``.

- bubblewrap: new mount, pid, ipc, uts (and, without network, net) namespaces; ``/`` (or only the
  visible paths) bound read-only, the roots bound writable, a fresh tmpfs on ``/tmp``, the
  workspace's own files (audit store, policy, transcripts...) bound read-only on top, all
  capabilities dropped.  ``bwrap`` reports a command killed by
  signal N as exit code 128+N (``SandboxPlan.exit_signal`` maps it back).  The pid namespace is
  what keeps ``/proc/<host pid>/root`` (a way around read-only binds) out of reach; so the pids a
  command sees are not the host's, and the ``pid`` of ``shell:start`` is bwrap's.
- Landlock: the roots and a fresh private directory (``TMPDIR``) writable, everything else
  readable or (hidden) not even that; TCP bind/connect refused without network (ABI >= 4; UDP and
  unix sockets are not covered); signals and abstract unix sockets scoped to the sandbox (ABI
  >= 6).  Landlock rules only add rights, so the workspace's own files inside a writable root stay
  writable for commands; the policy still refuses tools that name them.

The process tree is still the process manager's (psutil): the sandbox is the child it starts.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.policy.model import WORKSPACE_INTERNAL, ShellSandbox, ToolPermissionDenied
from services.policy.paths import operator_store_files
from services.tools import landlock

if TYPE_CHECKING:
    from services.policy import BoundPolicy

__all__ = [
    "SandboxPlan",
    "SandboxSupport",
    "SandboxUnavailable",
    "child_steps",
    "describe_choice",
    "discard",
    "prepare",
    "select",
    "support",
]

FALLBACK = "none: commands run under the policy and the rlimits only (no OS sandbox)"


class SandboxUnavailable(ToolPermissionDenied):
    """The policy requires a sandbox this machine cannot provide."""

    code = "sandbox_unavailable"


@dataclass(frozen=True)
class SandboxSupport:
    """What this machine offers (probed once per process)."""

    bwrap: str | None  # the bwrap executable, if installed
    bwrap_error: str | None  # why it cannot run here (None: it can, or it is not installed)
    bwrap_argv0: bool  # bwrap knows --argv0 (0.9+)
    landlock_abi: int  # 0: no Landlock

    @property
    def bwrap_usable(self) -> bool:
        return self.bwrap is not None and self.bwrap_error is None


def _probe_bwrap(bwrap: str) -> tuple[str | None, bool]:
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    argv += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    if os.geteuid() == 0:
        argv += ["--cap-drop", "ALL"]
    try:
        probe = subprocess.run([*argv, "true"], capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
        helptext = subprocess.run([bwrap, "--help"], capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap could not be run: {exc}", False
    if probe.returncode != 0:
        first = (probe.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[0]
        return f"bwrap cannot create its namespaces here: {first}", False
    return None, b"--argv0" in helptext.stdout + helptext.stderr


@functools.cache
def support() -> SandboxSupport:
    """Probe bubblewrap and Landlock (cached; ``support.cache_clear()`` to probe again)."""
    if not sys.platform.startswith("linux"):
        return SandboxSupport(None, None, False, 0)
    bwrap = shutil.which("bwrap")
    error, argv0 = _probe_bwrap(bwrap) if bwrap else (None, False)
    return SandboxSupport(bwrap, error, argv0, landlock.abi_version())


def select(mode: str, found: SandboxSupport | None = None) -> tuple[str | None, str]:
    """The sandbox ``mode`` (a ``shell.sandbox`` value) gives on this machine, and why.
    Raises ``SandboxUnavailable`` when the policy requires one that cannot run."""
    found = found or support()
    if mode == "off":
        return None, "shell.sandbox is off: " + FALLBACK
    if mode in ("auto", "bubblewrap") and found.bwrap_usable:
        return "bubblewrap", f"bubblewrap ({found.bwrap})"
    if mode == "bubblewrap":
        why = found.bwrap_error or "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
        raise SandboxUnavailable(f"the policy requires the bubblewrap sandbox (shell.sandbox) but {why}")
    if found.landlock_abi >= 1:
        skipped = f" (bubblewrap not used: {found.bwrap_error})" if found.bwrap_error and mode == "auto" else ""
        return "landlock", f"Landlock ABI {found.landlock_abi}{skipped}"
    if mode == "landlock":
        raise SandboxUnavailable(
            "the policy requires the Landlock sandbox (shell.sandbox) but this kernel does not offer Landlock"
        )
    bwrap_note = found.bwrap_error or "bwrap is not installed"
    return None, f"{FALLBACK}; {bwrap_note}, and the kernel offers no Landlock"


def describe_choice(settings: ShellSandbox) -> tuple[bool, str]:
    """For the doctor: (ok, one line saying which sandbox is active or which fallback applies)."""
    try:
        kind, why = select(settings.mode)
    except SandboxUnavailable as exc:
        return False, exc.message
    if kind is None:
        return True, why
    network = "network allowed" if settings.network else "no network"
    outside = "outside the roots read-only" if settings.outside_root == "read_only" else "outside the roots hidden"
    tmp = "private /tmp" if kind == "bubblewrap" else "a private TMPDIR (/tmp itself not writable)"
    return True, f"{why}: allowed roots writable, {outside}, {tmp}, {network}"


@dataclass
class SandboxPlan:
    """How one command is started: the argv/executable/env to use and a step for the child."""

    kind: str
    argv: list[str]
    executable: str
    env: dict[str, str]
    preexec: Callable[[], None] | None = None
    writable: list[str] = field(default_factory=list)
    outside_root: str = "read_only"
    network: bool = False
    notes: list[str] = field(default_factory=list)
    private_tmp: str | None = None  # Landlock: a directory to remove when the command ends
    ruleset: landlock.Ruleset | None = None

    def started(self) -> None:
        """The child has exec'd (or failed): the parent's copy of the ruleset is not needed."""
        if self.ruleset is not None:
            self.ruleset.close()
            self.ruleset = None

    def cleanup(self) -> None:
        self.started()
        if self.private_tmp is not None:
            shutil.rmtree(self.private_tmp, ignore_errors=True)
            self.private_tmp = None

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "writable": list(self.writable),
            "outside_root": self.outside_root,
            "network": self.network,
            "private_tmp": True,
            "notes": list(self.notes),
        }

    def exit_signal(self, returncode: int | None) -> int | None:
        """The returncode as Popen would give it without the sandbox (bwrap: 128+N is signal N)."""
        if self.kind == "bubblewrap" and returncode is not None and 128 < returncode < 128 + 65:
            return -(returncode - 128)
        return returncode


def prepare(
    bound: BoundPolicy,
    *,
    argv: list[str],
    executable: str,
    cwd: str,
    env: dict[str, str],
    readable: tuple[str, ...] = (),
) -> SandboxPlan | None:
    """The sandbox plan for one command under ``bound`` (None: no sandbox; raises
    ``SandboxUnavailable`` when the policy requires one that cannot run). ``readable``: files the
    command must see read-only even where the sandbox hides them (a hook's script under ``/tmp``)."""
    settings = bound.policy.sandbox
    kind, _why = select(settings.mode)
    if kind is None:
        return None
    writable = [str(root) for root in bound.roots]
    if kind == "bubblewrap":
        return _bubblewrap(bound, argv, executable, cwd, env, writable, readable)
    return _landlock(bound, argv, executable, env, writable, readable)


def _bubblewrap(
    bound: BoundPolicy,
    argv: list[str],
    executable: str,
    cwd: str,
    env: dict[str, str],
    writable: list[str],
    readable: tuple[str, ...] = (),
) -> SandboxPlan:
    settings = bound.policy.sandbox
    found = support()
    assert found.bwrap is not None
    # No --die-with-parent: its parent-death signal fires when the *thread* that started bwrap
    # ends (a gateway worker thread), which would end every shell:start process.
    args = [found.bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not settings.network:
        args.append("--unshare-net")
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]
    if settings.outside_root == "hidden":
        for path in [*bound.sandbox_visible, executable]:
            args += ["--ro-bind-try", path, path]
    else:
        args += ["--ro-bind", "/", "/"]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in readable:
        args += ["--ro-bind-try", path, path]
    for root in writable:
        args += ["--bind", root, root]
    workspace = str(bound.workspace_root) if bound.workspace_root is not None else None
    if workspace is not None and any(_within(workspace, root) for root in writable):
        for name in WORKSPACE_INTERNAL:  # the audit store, the policy, transcripts: read-only
            path = os.path.join(workspace, name)
            if os.path.lexists(path):
                args += ["--ro-bind", path, path]
    for path in operator_store_files():  # lasting grants: never writable by a command
        if any(_within(path, root) for root in writable) and os.path.lexists(path):
            args += ["--ro-bind", path, path]
    args += ["--chdir", cwd]
    notes: list[str] = []
    if found.bwrap_argv0:
        args += ["--argv0", argv[0]]
    else:
        notes.append("bwrap has no --argv0: the command sees its full path as argv[0]")
    args += ["--", executable, *argv[1:]]
    return SandboxPlan(
        "bubblewrap",
        args,
        found.bwrap,
        {**env, "TMPDIR": "/tmp"},
        writable=writable,
        outside_root=settings.outside_root,
        network=settings.network,
        notes=notes,
    )


def _landlock(
    bound: BoundPolicy,
    argv: list[str],
    executable: str,
    env: dict[str, str],
    writable: list[str],
    readable: tuple[str, ...] = (),
) -> SandboxPlan:
    settings = bound.policy.sandbox
    private = tempfile.mkdtemp(prefix="aries-shell-tmp-")
    hidden = [*bound.sandbox_visible, "/proc", executable, *readable]
    read = ["/"] if settings.outside_root == "read_only" else hidden
    try:
        ruleset = landlock.build_ruleset(
            read=read, write=[*writable, private], devices=["/dev"], network=settings.network
        )
    except OSError as exc:
        shutil.rmtree(private, ignore_errors=True)
        raise SandboxUnavailable(f"the Landlock sandbox could not be set up: {exc}") from None
    notes = [*ruleset.notes, "the workspace's own files inside a writable root are protected by the policy only"]
    return SandboxPlan(
        "landlock",
        list(argv),
        executable,
        {**env, "TMPDIR": private},
        preexec=landlock.restrictor(ruleset.fd),
        writable=writable,
        outside_root=settings.outside_root,
        network=settings.network,
        notes=notes,
        private_tmp=private,
        ruleset=ruleset,
    )


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def child_steps(limits: Callable[[], None] | None, sandbox: SandboxPlan | None) -> Callable[[], None] | None:
    """The limits first (rlimits, no-new-privileges), then the sandbox's step (Landlock)."""
    confine = sandbox.preexec if sandbox is not None else None
    if confine is None:
        return limits
    if limits is None:
        return confine

    def both() -> None:
        limits()
        confine()

    return both


def discard(sandbox: SandboxPlan | None) -> None:
    if sandbox is not None:
        sandbox.cleanup()
