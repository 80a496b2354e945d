"""Undo: ``builtin:fs:restore`` puts back the files a write or patch call changed.

A write or patch keeps, for every file it changes, the content before the call (``snapshot``),
after it (``after``) and the diff (``services.tools.snapshots``); the links are on the call's
audit row.  ``builtin:fs:restore {call_id, paths}`` restores those snapshots — a file the call
created is removed, one it deleted is written again — but only if every file still holds exactly
what the call left there (its SHA-256).  Otherwise nothing is touched and the call fails with
``InvalidInput`` (rule ``fs.undo_changed``) whose details carry the diff of what changed since.

The restore is an ordinary governed call: ``paths`` (every file the call changed, no more, no
fewer) go through the policy's path rules for ``write``, the tier is ``WRITE_DESTRUCTIVE``, it
may need approval, it is audited and recorded in the transcript, and it keeps its own snapshots,
so it can be undone in turn.  ``/undo`` and ``aries tool undo`` build its arguments with
:func:`undo_arguments`: the named call, or by default the last undoable one (the latest
successful write or patch that no restore has undone yet).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.errors import InvalidInput, NotFound
from services.hashing import sha256_hex, sha256_tagged
from services.policy import PathUse, Resource, RiskTier
from services.tools import snapshots
from services.tools.args import FsRestoreArgs
from services.tools.fsio import atomic_replace, read_checked, unlink_checked
from services.tools.outputs import FsRestoredFile, FsRestoreOutput
from services.tools.registry import ToolContext, ToolSpec, tool
from services.tools.results import ToolOutput
from services.tools.schemas import FS_RESTORE_OUT

if TYPE_CHECKING:
    from services.audit.log import AuditStore
    from services.policy import ResolvedPath

TOOLS: list[ToolSpec] = []
RESTORE_ID = "builtin:fs:restore"
UNDOABLE_TOOLS = ("builtin:fs:write_text", "builtin:fs:apply_patch", RESTORE_ID)
_SCAN = 500  # how many recent calls the default ``/undo`` looks through

__all__ = ["RESTORE_ID", "TOOLS", "UNDOABLE_TOOLS", "changes_of", "last_undoable", "restore", "undo_arguments"]


# -- finding what to undo ---------------------------------------------------------------------------
def changes_of(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The snapshot links of an audited call (one per file it changed); refuses a call with none."""
    call_id = row.get("call_id")
    if row.get("tool_name") not in UNDOABLE_TOOLS:
        raise InvalidInput(f"call {call_id} ran {row.get('tool_name')}, which changes no file; nothing to undo")
    if row.get("status") != "success":
        raise InvalidInput(f"call {call_id} did not succeed ({row.get('status') or 'unfinished'}); nothing to undo")
    links = [a for a in row.get("artifacts") or [] if isinstance(a, dict) and a.get("role") == "snapshot"]
    if not links:
        raise InvalidInput(f"call {call_id} kept no snapshot (nothing changed, or the file was too large)")
    return links


def last_undoable(audit: AuditStore) -> dict[str, Any] | None:
    """The latest successful write or patch with snapshots that no successful restore has undone."""
    calls = audit.calls(limit=_SCAN)
    undone = {
        str((c.get("args") or {}).get("call_id"))
        for c in calls
        if c["tool_name"] == RESTORE_ID and c.get("status") == "success"
    }
    for row in reversed(calls):
        if row["tool_name"] == RESTORE_ID or row["call_id"] in undone:
            continue
        if row["tool_name"] in UNDOABLE_TOOLS and row.get("status") == "success":
            if any(isinstance(a, dict) and a.get("role") == "snapshot" for a in row.get("artifacts") or []):
                found: dict[str, Any] = row
                return found
    return None


def undo_arguments(audit: AuditStore, call_id: str | None = None) -> dict[str, Any]:
    """The arguments of the ``builtin:fs:restore`` call that undoes ``call_id`` (default: the last
    undoable call)."""
    if call_id is None:
        row = last_undoable(audit)
        if row is None:
            raise NotFound("no tool call to undo: no write or patch with a snapshot since the last undo")
    else:
        row = audit.get_call(call_id)
        if row is None:
            raise NotFound(f"no tool call {call_id!r} in this workspace's audit store")
    return {"call_id": str(row["call_id"]), "paths": [str(link["path"]) for link in changes_of(row)]}


# -- the tool -----------------------------------------------------------------------------------------
def _resources(args: FsRestoreArgs) -> list[Resource]:
    return [PathUse(path, "write", arg="paths") for path in args.paths]


def _read_now(ctx: ToolContext, target: ResolvedPath) -> bytes | None:
    if target.kind == "missing":
        return None
    if target.kind != "file":
        raise InvalidInput(f"{target.raw!r} is no longer a regular file; not restored", path=target.raw)
    return read_checked(ctx, target, ctx.limits.fs_write_max_bytes + 1)


def _sha(data: bytes | None) -> str | None:
    return None if data is None else sha256_hex(data)


def _object(ctx: ToolContext, link: dict[str, Any]) -> bytes:
    assert ctx.workspace is not None
    registry = ctx.workspace.artifacts
    artifact = registry.get(str(link["id"]))
    data = registry.read_bytes(artifact)
    if sha256_tagged(data) != link.get("hash"):
        raise InvalidInput(f"the stored snapshot {link['id']} does not match its hash; not restored")
    return data


Plan = list[tuple["ResolvedPath", dict[str, Any], bytes | None]]


def _plan(ctx: ToolContext, args: FsRestoreArgs) -> tuple[Plan, list[str], str]:
    """What the restore would do: per file its target, snapshot link and current content; and the
    diffs of the files that changed since the call (empty: the restore may go ahead)."""
    if ctx.workspace is None:
        raise InvalidInput("undo needs a workspace (the snapshots live there)")
    from services.audit.log import AuditStore

    call_id = args.call_id
    with AuditStore.for_workspace(ctx.workspace.root) as audit:
        row = audit.get_call(call_id)
    if row is None:
        raise NotFound(f"no tool call {call_id!r} in this workspace's audit store")
    changes = changes_of(row)
    asked = {ctx.guard.resolve(p, "write", arg="paths").path for p in args.paths}
    changed_paths = {Path(str(link["path"])) for link in changes}
    if asked != changed_paths:
        names = ", ".join(sorted(str(p) for p in changed_paths))
        raise InvalidInput(f"call {call_id} changed {names}; paths must name exactly those files")
    afters = {str(a.get("path")): a for a in row.get("artifacts") or [] if a.get("role") == "after"}
    plan: Plan = []
    drift: list[str] = []
    for link in changes:
        target = ctx.guard.resolve(str(link["path"]), "write", arg="paths")
        now = _read_now(ctx, target)
        if _sha(now) != link.get("after_sha256"):
            after_link = afters.get(str(link["path"]))
            left = _object(ctx, after_link) if after_link is not None else None
            drift.append(snapshots.unified_diff(left, now, target.rel))
        plan.append((target, link, now))
    return plan, drift, call_id


def _preview(ctx: ToolContext, args: FsRestoreArgs) -> dict[str, Any]:
    """The diff the restore would make (or, if a file changed since, what changed)."""
    plan, drift, call_id = _plan(ctx, args)
    if drift:
        note = f"refused: a file changed since call {call_id}; the diff shows what changed"
        return {"kind": "diff", "diff": "".join(drift), "note": note, "applies": False}
    diff = "".join(
        snapshots.unified_diff(now, _object(ctx, link) if link.get("existed") else None, target.rel)
        for target, link, now in plan
    )
    return {"kind": "diff", "diff": diff, "note": f"undo of call {call_id}", "applies": True}


@tool(
    RESTORE_ID,
    tier=RiskTier.WRITE_DESTRUCTIVE,
    description="Undo a write or patch call: put back the files it changed from their snapshots, only if each "
    "still holds exactly what that call left (otherwise refused, with the diff of what changed since).",
    args=FsRestoreArgs,
    output_schema=FS_RESTORE_OUT,
    registry=TOOLS,
    resources=_resources,
    session_keys=("paths",),
    preview=_preview,
)
def restore(ctx: ToolContext, args: FsRestoreArgs) -> ToolOutput:
    plan, drift, call_id = _plan(ctx, args)
    if drift:
        names = ", ".join(t.rel for t, link, now in plan if _sha(now) != link.get("after_sha256"))
        raise InvalidInput(
            f"{names} changed since call {call_id}; nothing restored (the diff shows what changed since)",
            rule="fs.undo_changed",
            call_id=call_id,
            diff="".join(drift),
        )
    return _apply(ctx, call_id, [(target, link, now, _object(ctx, link)) for target, link, now in plan])


def _apply(
    ctx: ToolContext, call_id: str, plan: list[tuple[ResolvedPath, dict[str, Any], bytes | None, bytes]]
) -> ToolOutput:
    done: list[tuple[ResolvedPath, bytes | None]] = []
    files: list[dict[str, Any]] = []
    try:
        for target, link, now, before in plan:
            existed = bool(link.get("existed"))
            if existed:
                atomic_replace(ctx, target, before)
                action = "restored" if now is not None else "recreated"
            else:
                if now is not None:
                    unlink_checked(ctx, target)
                action = "removed"
            done.append((target, now))
            files.append({"path": str(target.path), "action": action, "existed": existed})
    except BaseException:
        for target, now in reversed(done):  # all or nothing: put back what this call changed
            fresh = ctx.guard.resolve(str(target.path), "write")
            if now is None:
                if fresh.kind == "file":
                    unlink_checked(ctx, fresh)
            else:
                atomic_replace(ctx, fresh, now)
        raise
    links = [
        link
        for target, change, now, before in plan
        for link in snapshots.store_change(ctx, target.path, target.rel, now, before if change.get("existed") else None)
    ]
    restored = FsRestoreOutput(call_id=call_id, files=[FsRestoredFile.model_validate(item) for item in files])
    return ToolOutput.of(restored, {"artifacts": links, "undoes": call_id})
