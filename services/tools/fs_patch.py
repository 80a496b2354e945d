"""``builtin:fs:apply_patch``: a unified diff applied all or nothing, under the fs path rules.

The diff comes as text (``patch``) or from a file (``patch_file``).  Relative paths follow the one
rule of every fs tool: they resolve against the workspace's first allowed root (the policy's
``PathGuard``), never against the process's working directory — for ``patch_file`` itself, and for
the paths inside the diff (which resolve against ``base`` instead when it is given; ``base`` is
itself resolved by that rule).  Every target is policy-checked for ``write`` when the call is
evaluated (text diffs) and again right before it is read or written; the diff file is checked for
``read``.  Parsing is ``services.tools.patching`` (unidiff); a malformed diff is ``InvalidInput``
naming the line.  All hunks of all files are applied in memory first; then the files are written
atomically, and if one write fails the files already written are put back.  A call cancelled
while it plans stops with ``Timeout`` before anything is written.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import MISSING

from services.errors import InvalidInput, NotFound, TooLarge
from services.policy import PathUse, ResolvedPath, Resource, RiskTier
from services.policy.model import PolicyDenied
from services.tools import schemas, snapshots
from services.tools.args import FsApplyPatchArgs, given
from services.tools.fsio import atomic_replace, read_checked, stop_if_cancelled, unlink_checked
from services.tools.outputs import FsApplyPatchOutput, FsPatchedFile
from services.tools.patching import FilePatch, apply_hunks, parse_patch, split_lines
from services.tools.registry import ToolContext, ToolSpec, tool
from services.tools.results import ToolOutput

TOOLS: list[ToolSpec] = []


def _patch_resources(args: FsApplyPatchArgs) -> list[Resource]:
    if args.patch_file is not MISSING:
        # The diff file is read like any /fs path; the paths inside it are checked when it is read.
        return [PathUse(args.patch_file, "read", arg="patch_file")]
    base = given(args.base, None)
    return [
        PathUse(p.path, "write", arg="patch path", base=base)
        for p in parse_patch(given(args.patch, ""), given(args.strip, None))
    ]


def _patch_text(ctx: ToolContext, args: FsApplyPatchArgs) -> str:
    """The diff: ``patch`` itself, or the file ``patch_file`` names (resolved like every fs path)."""
    if args.patch_file is MISSING:
        text = given(args.patch, "")
        if len(text.encode("utf-8")) > ctx.limits.fs_patch_max_bytes:
            raise TooLarge(f"the patch exceeds the {ctx.limits.fs_patch_max_bytes}-byte limit")
        return text
    checked = ctx.guard.resolve(args.patch_file, "read", arg="patch_file")
    data = read_checked(ctx, checked, ctx.limits.fs_patch_max_bytes + 1)
    if len(data) > ctx.limits.fs_patch_max_bytes:
        raise TooLarge(f"{checked.raw!r} exceeds the {ctx.limits.fs_patch_max_bytes}-byte patch limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"the diff file {checked.raw!r} is not UTF-8 text", path=checked.raw) from None


def _plan_patch(
    ctx: ToolContext, args: FsApplyPatchArgs, text: str
) -> list[tuple[FilePatch, ResolvedPath, bytes | None, bytes | None]]:
    """What applying the diff ``text`` (``args.patch`` or the file's content) would write, file by file."""
    base = None
    if args.base is not MISSING:
        base_checked = ctx.guard.resolve(args.base, "list", arg="base")
        if base_checked.kind != "dir":
            raise InvalidInput(f"base {args.base!r} is not a directory")
        base = base_checked.path
    plan: list[tuple[FilePatch, ResolvedPath, bytes | None, bytes | None]] = []
    for fp in parse_patch(text, given(args.strip, None)):
        stop_if_cancelled(ctx, len(plan), "files planned")
        target = ctx.guard.resolve(fp.path, "write", arg="patch path", base=base)
        if fp.action == "create":
            if target.exists:
                raise InvalidInput(f"{fp.path} already exists; the patch creates it", rule="fs.patch_apply")
            content = "".join(text + "\n" for hunk in fp.hunks for _, text in hunk.lines)
            if fp.hunks[-1].new_no_eol:
                content = content[:-1]
            plan.append((fp, target, None, content.encode("utf-8")))
            continue
        if not target.exists:
            raise NotFound(f"{fp.path}: no such file to patch", path=fp.path)
        original = read_checked(ctx, target, ctx.limits.fs_write_max_bytes + 1)
        if len(original) > ctx.limits.fs_write_max_bytes:
            raise TooLarge(f"{fp.path} is larger than the {ctx.limits.fs_write_max_bytes}-byte write limit")
        try:
            original_text = original.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"{fp.path} is not UTF-8 text; not patched", path=fp.path) from None
        if fp.action == "delete":
            expected = [t for h in fp.hunks for _, t in h.lines]
            if [ln.rstrip("\r\n") for ln in split_lines(original_text)] != expected:
                raise InvalidInput(
                    f"{fp.path} does not match the content the patch deletes", rule="fs.patch_apply", path=fp.path
                )
            plan.append((fp, target, original, None))
            continue
        updated = apply_hunks(original_text, fp).encode("utf-8")
        if len(updated) > ctx.limits.fs_write_max_bytes:
            raise TooLarge(f"patched {fp.path} would exceed the write limit")
        plan.append((fp, target, original, updated))
    return plan


def _patch_summary(plan: list[tuple[FilePatch, ResolvedPath, bytes | None, bytes | None]]) -> list[dict[str, Any]]:
    return [
        {
            "path": str(target.path),
            "action": fp.action,
            "hunks": len(fp.hunks),
            "added": sum(1 for h in fp.hunks for tag, _ in h.lines if tag == "+"),
            "removed": sum(1 for h in fp.hunks for tag, _ in h.lines if tag == "-"),
        }
        for fp, target, _, _ in plan
    ]


def _patched(summary: list[dict[str, Any]], *, applied: bool) -> FsApplyPatchOutput:
    return FsApplyPatchOutput(files=[FsPatchedFile.model_validate(item) for item in summary], applied=applied)


def _patch_tier(args: FsApplyPatchArgs, facts: dict[str, Any]) -> RiskTier:
    return RiskTier.READ_ONLY if args.dry_run else RiskTier.WRITE_DESTRUCTIVE


def _preview_patch(ctx: ToolContext, args: FsApplyPatchArgs) -> dict[str, Any]:
    try:
        diff = _patch_text(ctx, args)
    except (InvalidInput, NotFound, TooLarge, PolicyDenied) as exc:
        return {"kind": "diff", "diff": "", "files": [], "applies": False, "note": exc.message}
    try:
        summary = _patch_summary(_plan_patch(ctx, args, diff))
        applies, problem = True, None
    except (InvalidInput, NotFound, TooLarge, PolicyDenied) as exc:
        summary, applies, problem = [], False, exc.message
    return {"kind": "diff", "diff": diff[:200_000], "files": summary, "applies": applies, "note": problem}


@tool(
    "builtin:fs:apply_patch",
    tier=RiskTier.WRITE_DESTRUCTIVE,
    description="Apply a unified diff: every hunk of every file applies, or nothing changes. dry_run "
    "checks it without writing (READ_ONLY).",
    args=FsApplyPatchArgs,
    output_schema=schemas.FS_APPLY_PATCH_OUT,
    registry=TOOLS,
    resources=_patch_resources,
    tier_fn=_patch_tier,
    session_keys=("paths",),
    preview=_preview_patch,
)
def apply_patch(ctx: ToolContext, args: FsApplyPatchArgs) -> ToolOutput:
    if args.patch_file is not MISSING and "session_pattern" in ctx.facts:
        raise PolicyDenied(
            "a patch read from a file is approved call by call: approval for the session names the file, "
            "not its content, which can change",
            rule="fs.patch_file_session",
        )
    plan = _plan_patch(ctx, args, _patch_text(ctx, args))
    summary = _patch_summary(plan)
    if args.dry_run:
        return ToolOutput.of(_patched(summary, applied=False), {"dry_run": True})
    done: list[tuple[ResolvedPath, bytes | None]] = []
    written = 0
    try:
        for fp, target, original, updated in plan:
            if updated is None:
                unlink_checked(ctx, target)
            else:
                if not target.path.parent.is_dir():
                    os.makedirs(target.path.parent, exist_ok=True)
                atomic_replace(ctx, target, updated, exclusive=fp.action == "create")
                written += len(updated)
            done.append((target, original))
    except BaseException:
        for target, original in reversed(done):  # all or nothing: put back what was changed
            fresh = ctx.guard.resolve(str(target.path), "write")
            if original is None:
                unlink_checked(ctx, fresh)
            else:
                atomic_replace(ctx, fresh, original)
        raise
    links = [
        link
        for _, target, original, updated in plan
        for link in snapshots.store_change(ctx, target.path, target.rel, original, updated)
    ]
    return ToolOutput.of(_patched(summary, applied=True), {"bytes": written, "artifacts": links})
