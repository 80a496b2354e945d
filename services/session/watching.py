"""A session's watched folder: the :class:`~services.retrieval.watch.FolderWatch` of one index, allowed by
what is in force (``aries rag index watch NAME`` and ``/rag index watch NAME`` both start here).

The retrieval package cannot ask the session or the trust records (they import it), so this module
turns what is in force into a :class:`~services.retrieval.watch.WatchPermit`: the policy's allowed
roots (resolved as the tool gateway resolves them) and a refusal while the workspace is untrusted or
changed since it was trusted — a watch writes into the workspace on its own, for as long as it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.retrieval.watch import MAX_AGE_MS, QUIET_MS, FolderWatch, WatchPermit

if TYPE_CHECKING:
    from services.session.session import Session
    from services.trust.records import TrustState


def watch_permit(session: Session) -> WatchPermit:
    """The permit of a watch in ``session``'s workspace (see the module docstring)."""
    from services.policy.bound import BoundPolicy

    workspace = session.workspace

    def recheck() -> str | None:  # the trust state read again from the folder (a hand edit since)
        from services.trust.records import workspace_trust

        return _refusal(workspace.name, workspace_trust(workspace.root, ephemeral=workspace.ephemeral))

    bound = BoundPolicy(session.policy(), workspace.root, mode=session.mode.value)
    return WatchPermit(
        allowed_roots=tuple(bound.roots), refusal=_refusal(workspace.name, session.trust), recheck=recheck
    )


def _refusal(name: str, trust: TrustState) -> str | None:
    if not trust.needs_review:
        return None
    return f"workspace {name!r} is {trust.label}: {trust.reason}; a folder is watched only in a trusted workspace"


def folder_watch(
    session: Session, name: str, *, surface: str, quiet_ms: int = QUIET_MS, max_age_ms: int = MAX_AGE_MS
) -> FolderWatch:
    """The watch of index ``name`` in ``session``; raises :class:`~services.retrieval.watch.WatchRefused`
    (untrusted or changed workspace, a folder outside the policy's roots) or ``NotFound``."""
    permit = watch_permit(session)
    return FolderWatch(session.engine(), name, permit, surface=surface, quiet_ms=quiet_ms, max_age_ms=max_age_ms)
