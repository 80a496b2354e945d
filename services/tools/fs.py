"""Builtin filesystem tools: list_dir, read_text, write_text, search_text, apply_patch.

Every path goes through the policy's ``PathGuard`` twice: when the gateway evaluates the call
and again here, right before the file is opened.  Files are opened with ``O_NOFOLLOW`` and
checked after opening (same inode as the one checked, still inside a root, one link only);
writes go to a temp file in the checked directory (opened as a directory fd) and are renamed
over the target, so a write never goes through a symlink or hard link to outside.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from services.errors import InvalidInput, NotFound, TooLarge
from services.hashing import sha256_hex
from services.policy import PathOp, PathUse, Resource, RiskTier
from services.policy.model import PolicyDenied
from services.tools import schemas, snapshots
from services.tools.args import FsListDirArgs, FsReadTextArgs, FsSearchTextArgs, FsWriteTextArgs, capped, given
from services.tools.fsio import (
    atomic_replace,
    decode_text,
    open_dir,
    open_for_read,
    read_checked,
    read_fd,
    stop_if_cancelled,
)
from services.tools.outputs import (
    FsEntry,
    FsListDirOutput,
    FsMatch,
    FsReadTextOutput,
    FsSearchTextOutput,
    FsWriteTextOutput,
)
from services.tools.registry import ToolContext, ToolSpec, tool
from services.tools.results import ToolOutput

if TYPE_CHECKING:
    from services.policy import ResolvedPath

TOOLS: list[ToolSpec] = []
_MAX_LINE_OUT = 1000
_MAX_LINE_MATCH = 10_000
_WALK_CAP_FACTOR = 4


def _entry_type(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return "symlink"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    if entry.is_file(follow_symlinks=False):
        return "file"
    return "other"


class _OnePath(Protocol):
    @property
    def path(self) -> str: ...


def path_resources(op: PathOp) -> Callable[[_OnePath], list[Resource]]:
    """The policy's view of a tool whose one path is ``args.path``, used for ``op``."""

    def resources(args: _OnePath) -> list[Resource]:
        return [PathUse(args.path, op, arg="path")]

    return resources


# -- list_dir -----------------------------------------------------------------------------------
@tool(
    "builtin:fs:list_dir",
    tier=RiskTier.READ_ONLY,
    description="List a directory (optionally recursively), sorted by normalized path. Symlinks are "
    "listed, never followed.",
    args=FsListDirArgs,
    output_schema=schemas.FS_LIST_DIR_OUT,
    registry=TOOLS,
    resources=path_resources("list"),
)
def list_dir(ctx: ToolContext, args: FsListDirArgs) -> ToolOutput:
    target = ctx.guard.resolve(args.path, "list")
    if target.kind == "missing":
        raise NotFound(f"{target.raw!r}: no such directory", path=target.raw)
    if target.kind != "dir":
        raise InvalidInput(f"{target.raw!r} is not a directory", path=target.raw)
    dfd, _ = open_dir(ctx, target.path)  # verifies the directory is still the checked one
    os.close(dfd)
    limit = capped(args.max_entries, ctx.limits.fs_list_max_entries)
    recursive = args.recursive
    include_hidden = args.include_hidden
    walk_cap = limit * _WALK_CAP_FACTOR
    entries: list[dict[str, Any]] = []
    hidden = 0
    truncated = False
    walk = SortedWalk(ctx, target.path, "entries")
    for full, rel, entry in walk:
        if not include_hidden and entry.name.startswith("."):
            continue
        if ctx.guard.entry_denied(full, "list") is not None:
            hidden += 1
            continue
        kind = _entry_type(entry)
        try:
            size = entry.stat(follow_symlinks=False).st_size if kind == "file" else 0
        except OSError:
            size = 0
        entries.append({"path": rel, "name": entry.name, "type": kind, "size": size})
        if recursive and kind == "dir":
            walk.descend(full, rel)
        if len(entries) >= walk_cap:
            truncated = True
            break
    entries.sort(key=lambda e: e["path"])
    if len(entries) > limit:
        entries = entries[:limit]
        truncated = True
    listing = FsListDirOutput(
        path=str(target.path),
        root=str(target.root),
        entries=[FsEntry.model_validate(entry) for entry in entries],
        count=len(entries),
        hidden_by_policy=hidden,
    )
    return ToolOutput.of(listing, {"truncated": truncated, "normalized_path": str(target.path), "limit": limit})


# -- read_text ----------------------------------------------------------------------------------
@tool(
    "builtin:fs:read_text",
    tier=RiskTier.READ_ONLY,
    description="Read a text file, capped at max_bytes (truncated=true when cut).",
    args=FsReadTextArgs,
    output_schema=schemas.FS_READ_TEXT_OUT,
    registry=TOOLS,
    resources=path_resources("read"),
)
def read_text(ctx: ToolContext, args: FsReadTextArgs) -> ToolOutput:
    target = ctx.guard.resolve(args.path, "read")
    limit = capped(args.max_bytes, ctx.limits.fs_read_max_bytes)
    offset = args.offset
    encoding = args.encoding
    fd = open_for_read(ctx, target)
    try:
        size = os.fstat(fd).st_size
        if offset:
            os.lseek(fd, offset, os.SEEK_SET)
        data = read_fd(fd, limit + 1)
    finally:
        os.close(fd)
    truncated = len(data) > limit
    data = data[:limit]
    if b"\x00" in data[:8192]:
        raise InvalidInput(f"{target.raw!r} looks like a binary file (NUL bytes); not read as text", path=target.raw)
    text, errors = decode_text(data, encoding, truncated=truncated)
    return ToolOutput.of(
        FsReadTextOutput(path=str(target.path), text=text, encoding=encoding, size=size, offset=offset),
        {
            "bytes": len(data),
            "bytes_read": len(data),
            "truncated": truncated,
            "decode_errors": errors,
            "normalized_path": str(target.path),
            "limit": limit,
        },
    )


# -- write_text ---------------------------------------------------------------------------------
def _write_tier(args: FsWriteTextArgs, facts: dict[str, Any]) -> RiskTier:
    return RiskTier.WRITE_SAFE if args.if_exists == "error" else RiskTier.WRITE_DESTRUCTIVE


def _unified(old: str, new: str, rel: str) -> str:
    diff = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}", n=3
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff)


def _preview_write(ctx: ToolContext, args: FsWriteTextArgs) -> dict[str, Any]:
    target = ctx.guard.resolve(args.path, "write")
    old = ""
    note = None
    if target.kind == "file":
        try:
            readable = ctx.guard.resolve(args.path, "read")
            data = read_checked(ctx, readable, ctx.limits.fs_read_max_bytes + 1)
            if len(data) > ctx.limits.fs_read_max_bytes or b"\x00" in data[:8192]:
                note = "existing content is too large or binary to show"
            else:
                old = decode_text(data, "utf-8", truncated=False)[0]
        except PolicyDenied:
            note = "existing content not shown: reading it is denied by the policy"
    new = args.text
    return {
        "kind": "diff",
        "path": str(target.path),
        "creates": target.kind == "missing",
        "diff": "" if note else _unified(old, new, target.rel),
        "note": note,
        "bytes": len(new.encode("utf-8")),
    }


@tool(
    "builtin:fs:write_text",
    tier=RiskTier.WRITE_DESTRUCTIVE,
    description="Write a text file atomically (temp file + rename). if_exists=error makes it create-only "
    "(tier WRITE_SAFE).",
    args=FsWriteTextArgs,
    output_schema=schemas.FS_WRITE_TEXT_OUT,
    registry=TOOLS,
    resources=path_resources("write"),
    tier_fn=_write_tier,
    session_keys=("paths",),
    preview=_preview_write,
)
def write_text(ctx: ToolContext, args: FsWriteTextArgs) -> ToolOutput:
    target = ctx.guard.resolve(args.path, "write")
    data = args.text.encode("utf-8")
    if len(data) > ctx.limits.fs_write_max_bytes:
        raise TooLarge(f"{len(data)} bytes exceeds the {ctx.limits.fs_write_max_bytes}-byte write limit")
    parent = target.path.parent
    if not parent.is_dir():
        if not args.create_dirs:
            raise NotFound(f"directory of {target.raw!r} does not exist (set create_dirs to create it)")
        ctx.guard.resolve(str(parent), "write", arg="directory")
        os.makedirs(parent, exist_ok=True)
    before, note = snapshots.before_write(ctx, target)
    created = atomic_replace(ctx, target, data, exclusive=args.if_exists == "error")
    meta: dict[str, Any] = {"bytes": len(data), "normalized_path": str(target.path)}
    if note is None:
        meta["artifacts"] = snapshots.store_change(ctx, target.path, target.rel, None if created else before, data)
    else:
        meta["snapshot"] = note
    written = FsWriteTextOutput(
        path=str(target.path), bytes_written=len(data), created=created, sha256=sha256_hex(data)
    )
    return ToolOutput.of(written, meta)


# -- search_text --------------------------------------------------------------------------------
@tool(
    "builtin:fs:search_text",
    tier=RiskTier.READ_ONLY,
    description="Search text files under a directory (or one file) for a string or regex; matches sorted "
    "by path and line, capped in number and context.",
    args=FsSearchTextArgs,
    output_schema=schemas.FS_SEARCH_TEXT_OUT,
    registry=TOOLS,
    resources=path_resources("read"),
)
def search_text(ctx: ToolContext, args: FsSearchTextArgs) -> ToolOutput:
    target = ctx.guard.resolve(args.path, "read")
    if target.kind == "missing":
        raise NotFound(f"{target.raw!r}: no such file or directory", path=target.raw)
    max_matches = capped(args.max_matches, ctx.limits.fs_search_max_matches)
    context = min(args.context_lines, ctx.limits.fs_search_max_context_lines)
    pattern = _search_pattern(args)
    files, truncated = _files_to_search(ctx, target, given(args.glob, None))
    matches: list[dict[str, Any]] = []
    scanned = 0
    skipped = 0
    for rel, full in files:
        stop_if_cancelled(ctx, scanned, "files searched")
        lines = _searchable_lines(ctx, full)
        if lines is None:
            skipped += 1
            continue
        scanned += 1
        if _match_lines(ctx, scanned, rel, lines, pattern, context, max_matches, matches):
            truncated = True  # the matches are full up
            break
    found = [FsMatch.model_validate(match) for match in matches]
    return ToolOutput.of(
        FsSearchTextOutput(path=str(target.path), matches=found, files_scanned=scanned, files_skipped=skipped),
        {
            "truncated": truncated,
            "normalized_path": str(target.path),
            "max_matches": max_matches,
            "context_lines": context,
        },
    )


def _search_pattern(args: FsSearchTextArgs) -> re.Pattern[str]:
    flags = 0 if args.case_sensitive else re.IGNORECASE
    try:
        return re.compile(args.query if args.regex else re.escape(args.query), flags)
    except re.error as exc:
        raise InvalidInput(f"query is not a valid regular expression: {exc}") from None


Found = list[tuple[str, Path]]
"""Files to search: ``(name relative to the searched directory, path)``."""


def _files_to_search(ctx: ToolContext, target: ResolvedPath, name_glob: str | None) -> tuple[Found, bool]:
    """The files to search, ``(relative name, path)`` sorted by name and capped by the policy's file
    limit, and whether any were left out."""
    if target.kind == "file":
        return [(target.path.name, target.path)], False
    files, truncated = _walk_for_search(ctx, target.path, name_glob)
    files.sort(key=lambda f: f[0])
    if len(files) > ctx.limits.fs_search_max_files:
        files = files[: ctx.limits.fs_search_max_files]
        truncated = True
    return files, truncated


def _walk_for_search(ctx: ToolContext, root: Path, name_glob: str | None) -> tuple[Found, bool]:
    """The regular files under ``root`` the policy lets the search list (symlinks, FIFOs and devices
    are never opened while walking); stops early in a huge tree (then ``True``)."""
    files: Found = []
    walk = SortedWalk(ctx, root, "entries walked")
    for full, rel, entry in walk:
        if entry.is_dir(follow_symlinks=False):
            if ctx.guard.entry_denied(full, "list") is None:
                walk.descend(full, rel)
            continue
        if not entry.is_file(follow_symlinks=False):
            continue
        if name_glob and not fnmatch.fnmatchcase(rel if "/" in name_glob else entry.name, name_glob):
            continue
        files.append((rel, full))
        if len(files) >= ctx.limits.fs_search_max_files * _WALK_CAP_FACTOR:
            return files, True  # a huge tree: stop walking, search what was found
    return files, False


class SortedWalk:
    """The entries under ``root``, each folder's in name order, as ``(path, relative path, entry)``;
    the caller says which folders to enter (``descend``), last entered first. Cancellation is checked
    before each folder and entry (``what`` names the count in the message); a folder that cannot be
    read is skipped. Breaking out of the loop ends the walk."""

    def __init__(self, ctx: ToolContext, root: Path, what: str) -> None:
        self._ctx, self._what = ctx, what
        self._pending: list[tuple[Path, str]] = [(root, "")]

    def descend(self, folder: Path, rel: str) -> None:
        self._pending.append((folder, rel + "/"))

    def __iter__(self) -> Iterator[tuple[Path, str, os.DirEntry[str]]]:
        seen = 0
        while self._pending:
            directory, prefix = self._pending.pop()
            stop_if_cancelled(self._ctx, seen, self._what)
            try:
                with os.scandir(directory) as it:
                    items = sorted(it, key=lambda e: e.name)
            except (PermissionError, FileNotFoundError, NotADirectoryError):
                continue
            for entry in items:
                seen += 1
                stop_if_cancelled(self._ctx, seen, self._what)
                yield directory / entry.name, f"{prefix}{entry.name}", entry


def _searchable_lines(ctx: ToolContext, full: Path) -> list[str] | None:
    """The lines of a file the search may read, or ``None`` to skip it (refused by the policy, not a
    regular file, unreadable, over the size limit, binary)."""
    try:
        checked = ctx.guard.resolve(str(full), "read")
    except (PolicyDenied, InvalidInput):
        return None
    if checked.kind != "file":
        return None
    try:
        data = read_checked(ctx, checked, ctx.limits.fs_search_max_file_bytes + 1)
    except (PolicyDenied, OSError):
        return None
    if len(data) > ctx.limits.fs_search_max_file_bytes or b"\x00" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace").splitlines()


def _match_lines(
    ctx: ToolContext,
    scanned: int,
    rel: str,
    lines: list[str],
    pattern: re.Pattern[str],
    context: int,
    max_matches: int,
    matches: list[dict[str, Any]],
) -> bool:
    """Add the matches of one file to ``matches``; ``True`` when a match found no room (full up)."""
    for number, line in enumerate(lines, start=1):
        if number % 4096 == 0:
            stop_if_cancelled(ctx, scanned, "files searched")
        found = pattern.search(line[:_MAX_LINE_MATCH])
        if found is None:
            continue
        if len(matches) >= max_matches:
            return True
        matches.append(
            {
                "path": rel,
                "line": number,
                "column": found.start() + 1,
                "text": line[:_MAX_LINE_OUT],
                "before": [ln[:_MAX_LINE_OUT] for ln in lines[max(0, number - 1 - context) : number - 1]],
                "after": [ln[:_MAX_LINE_OUT] for ln in lines[number : number + context]],
            }
        )
    return False


__all__ = [
    "TOOLS",
    "path_resources",
    "list_dir",
    "read_text",
    "search_text",
    "write_text",
]
