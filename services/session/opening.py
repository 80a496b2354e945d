"""How every surface opens a workspace's :class:`~services.session.session.Session`: ``Session.open(…)``.

One entry point, ``Session.open(workspace_or_name, *, surface=Surface.X, …)`` (a thin classmethod
delegating to :func:`open_session`), does the steps that used to be written once per surface:

1. **find** the workspace: a name is opened (or, with ``create``, created) under the workspaces
   root; ``None`` is a throw-away ephemeral workspace; a :class:`Workspace` the caller already took
   (:func:`take`) is used as it is;
2. **the lease**, where the surface holds one (the TUI: one live Aries per workspace) — taken
   *before* the repair, which must never run under another live Aries;
3. **the health check and repair** (``Workspace.recover``: temp files, torn transcript lines,
   artifacts); what it found is :attr:`Taken.warnings` (the TUI takes the workspace with
   :func:`take` and shows them; the one-shot commands do not show them);
4. **the conversation**: ``last`` (the one written to most recently), ``new`` or ``None`` (a new one,
   its file appears with its first entry), or an id (or a unique start of one) to continue;
5. **the session**: the audit ``source`` and whether the operator's approval queue decides
   (``interactive``) follow from the surface; ``approver``, ``mode``, ``policy_file`` and ``profile``
   are the caller's;
6. a named workspace whose settings need the operator's review (untrusted, changed since trusted)
   is said once through ``on_warning`` (the TUI offers the review itself instead).

The surfaces differ only where :data:`RULES` says so:

========  ========  ===========  =====  ======  ========================  =======================
surface   source    interactive  lease  create  no name                   conversation (default)
========  ========  ===========  =====  ======  ========================  =======================
tui       operator  yes (queue)  yes    yes     ephemeral, leased         ``aries``: new; later: last
cli       cli       no           no     no      ephemeral (or refused)    last
ask       cli       no           no     no      ephemeral                 new (``-c``: last, an id)
plan      plan      no           no     no      refused (``-w`` needed)   last
serve     cli       no           no     no      refused (``-w`` needed)   last
plain     operator  no           yes    yes     ephemeral, leased         new (``-c``: last, an id)
========  ========  ===========  =====  ======  ========================  =======================

* *interactive*: the session's approval queue (the TUI's modal) decides a call the policy wants
  confirmed; elsewhere the caller's approver does (``--approve``, ``HeadlessApprover``, a plan's
  per-step approver) or, without one, the call is denied (rule ``approval.no_approver``).
* *plain*: ``aries -w W --plain`` (``app.plain``) is the TUI's session without the screen: the same
  lease, hold and audit source; its approver asks on ``/dev/tty`` (``services.pipe.tty_approval``) or,
  with no terminal, refuses.
* *lease*: only the TUI (and its plain mode) holds the workspace's lease while open (``aries -w W`` a second time is
  refused); the one-shot commands repair only when no live Aries holds it, and only report otherwise.
* *holds*: the TUI holds the conversation it shows (``services.conversation.hold``; ``/new``,
  ``/resume``, ``/fork`` move the hold); ``ask`` holds its turn's conversation for the turn
  (``services.pipe.headless``). A second writer of one conversation is refused with the holder's pid.
* The TUI also reads ``workspace.yaml`` at once (a broken file is one line before the screen changes,
  not a traceback later); the other surfaces read it when a setting is first needed.
* ``aries serve`` opens a session of its own (surface ``serve``) and its viewer uses that session's
  retrieval engine; ``/serve`` in the TUI hands the viewer the TUI session's engine.

Closing: the session closes first (what waits denied, what runs cancelled and recorded, the stores,
the lease last), then its workspace (an ephemeral one is removed): :func:`close_session` /
:func:`aclose_session`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar

if TYPE_CHECKING:
    from pathlib import Path

    from services.tools.calls import Approver
    from services.trust.records import TrustState
    from services.workspace.leases import WorkspaceLease
    from services.workspace.manager import Workspace, WorkspaceManager


class Surface(StrEnum):
    """Who opens the session (the lease's ``purpose`` for the TUI's)."""

    TUI = "tui"
    CLI = "cli"
    ASK = "ask"
    PLAN = "plan"
    SERVE = "serve"
    PLAIN = "plain"


@dataclass(frozen=True)
class SurfaceRules:
    """What a surface's session is, where the surfaces differ (see the module docstring's table)."""

    source: str
    """The audit ``source`` of its operator-side calls: operator | cli | plan."""
    interactive: bool
    """The approval queue decides (an operator answers), unless the caller gives an approver."""
    lease: bool
    """Holds the workspace's lease while open (taken before the repair)."""
    check_config: bool = False
    """Reads ``workspace.yaml`` on open, so that a broken one is refused before anything else."""
    holds: bool = False
    """Holds the conversation it shows while open (``services.conversation.hold``): a second writer of
    it is refused. ``ask`` holds its conversation for the duration of its turn instead."""


RULES: dict[Surface, SurfaceRules] = {
    Surface.TUI: SurfaceRules(source="operator", interactive=True, lease=True, check_config=True, holds=True),
    Surface.CLI: SurfaceRules(source="cli", interactive=False, lease=False),
    Surface.ASK: SurfaceRules(source="cli", interactive=False, lease=False),
    Surface.PLAN: SurfaceRules(source="plan", interactive=False, lease=False),
    Surface.SERVE: SurfaceRules(source="cli", interactive=False, lease=False),
    Surface.PLAIN: SurfaceRules(source="operator", interactive=False, lease=True, check_config=True, holds=True),
}

Warn = Callable[[str], None]


class OpenedSession(Protocol):
    """What this module needs of the session it builds (``services.session.session.Session``)."""

    @property
    def workspace(self) -> Workspace: ...

    @property
    def trust(self) -> TrustState: ...

    @property
    def closed(self) -> bool: ...

    def close(self, reason: str = ...) -> None: ...

    async def aclose(self, reason: str = ...) -> None: ...


S = TypeVar("S", bound=OpenedSession)


class OpenOptions(TypedDict, total=False):
    """``Session.open``'s options (see :func:`open_session`)."""

    lease: bool | WorkspaceLease | None
    create: bool
    manager: WorkspaceManager | None
    conversation: str | None
    approver: Approver | None
    mode: str | None
    policy_file: Path | str | None
    profile: str | None
    on_warning: Warn | None


@dataclass
class Taken:
    """A workspace found (or created) and repaired, with the lease held where the surface takes one."""

    workspace: Workspace
    lease: WorkspaceLease | None = None
    warnings: list[str] = field(default_factory=list)
    """What opening found: the lease's recovery notice first, then transcript and artifact problems."""
    owned: bool = True
    """Opened here (so closed here when the session cannot be made)."""

    def release(self) -> None:
        """Undo the taking (the session could not be made): the lease released, the workspace closed."""
        try:
            if self.lease is not None:
                self.lease.release()
        finally:
            if self.owned:
                self.workspace.close()


def take(
    name: str | None,
    *,
    surface: Surface,
    lease: bool | None = None,
    create: bool = False,
    manager: WorkspaceManager | None = None,
) -> Taken:
    """Steps 1–3: find (or create) ``name`` — an ephemeral workspace for ``None`` —, take its lease
    where ``surface`` holds one (``lease`` overrides), then repair it. An ``AriesError`` (no such
    workspace, another live Aries holds it, a broken ``workspace.yaml``) leaves nothing held."""
    from services.workspace.leases import acquire_lease

    rules = RULES[surface]
    leased = rules.lease if lease is None else lease
    if name is None:
        from services.workspace.manager import ephemeral_workspace

        ephemeral = ephemeral_workspace()
        try:
            return Taken(ephemeral, acquire_lease(ephemeral, purpose=surface.value) if leased else None)
        except BaseException:
            ephemeral.close()
            raise
    from services.workspace.manager import Workspace, WorkspaceManager

    manager = manager if manager is not None else WorkspaceManager()
    held: WorkspaceLease | None = None
    try:
        path = manager.path_for(name)
        if create:
            path.mkdir(parents=True, exist_ok=True)
        elif not path.is_dir():
            manager.open(name)  # raises the NotFound that says how to create it
        if leased:
            held = acquire_lease(Workspace(path, name), purpose=surface.value)
        workspace, report = manager.create(name) if create else manager.open(name)
        if rules.check_config:  # the pydantic model only for a file not of the everyday shape (plain_settings)
            _ = workspace.meta
    except BaseException:
        if held is not None:
            held.release()
        raise
    warnings = [str(problem) for problem in report.transcript_problems] + report.artifact_problems
    from services.session.rewind_journal import recover_rewind  # a rewind killed halfway: finished or rolled back

    rewound = recover_rewind(workspace)
    if rewound:
        warnings.append(rewound)
    notice = held.recovery_notice() if held is not None else None
    if notice:
        warnings.insert(0, notice)
    return Taken(workspace, held, warnings)


def open_session(
    factory: Callable[..., S],
    where: Workspace | str | None,
    *,
    surface: Surface,
    lease: bool | WorkspaceLease | None = None,
    create: bool = False,
    manager: WorkspaceManager | None = None,
    conversation: str | None = "last",
    approver: Approver | None = None,
    mode: str | None = None,
    policy_file: Path | str | None = None,
    profile: str | None = None,
    on_warning: Warn | None = None,
) -> S:
    """The steps of the module docstring; ``factory`` is the session class (``Session.open`` passes
    itself, so that this module never imports ``services.session.session``).

    ``where`` is a name, ``None`` (ephemeral) or a workspace already taken (:func:`take`; then
    ``lease`` may be the lease taken with it, handed to the session, which releases it last).
    ``lease``: ``None`` the surface's rule, ``True``/``False`` to override it. When the session cannot
    be made, what was taken here is released and the error raised."""
    if isinstance(where, str) or where is None:
        wanted = lease if isinstance(lease, bool) else None
        taken = take(where, surface=surface, lease=wanted, create=create, manager=manager)
    else:
        taken = Taken(where, lease if lease is not None and not isinstance(lease, bool) else None, owned=False)
    rules = RULES[surface]
    try:
        session = factory(
            taken.workspace,
            source=rules.source,
            interactive=rules.interactive,
            approver=approver,
            lease=taken.lease,
            conversation=None if conversation == "new" else conversation,
            holds=rules.holds,
            policy_file=policy_file,
            mode=mode,
            profile=profile,
        )
    except BaseException:
        if taken.owned:
            taken.release()
        raise
    if on_warning is not None:
        for warning in taken.warnings:  # a damaged line of a transcript: which file, which line
            on_warning(warning)
    if on_warning is not None and not taken.workspace.ephemeral and session.trust.needs_review:
        name, reason = taken.workspace.name, session.trust.reason
        hint = "" if f"aries workspace trust {name}" in reason else f"; review it with: aries workspace trust {name}"
        on_warning(f"workspace {name} is {session.trust.label}: {reason}{hint}")
    return session


def close_session(session: OpenedSession, reason: str = "the session was closed") -> None:
    """Close ``session`` (in order, its lease last), then its workspace (for callers without a loop)."""
    try:
        if not session.closed:
            session.close(reason)
    finally:
        session.workspace.close()


async def aclose_session(session: OpenedSession, reason: str = "the session was closed") -> None:
    """:func:`close_session` from a running event loop."""
    try:
        await session.aclose(reason)
    finally:
        session.workspace.close()


__all__ = [
    "RULES",
    "OpenOptions",
    "OpenedSession",
    "Surface",
    "SurfaceRules",
    "Taken",
    "aclose_session",
    "close_session",
    "open_session",
    "take",
]
