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
import hashlib
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.errors import InvalidInput, NotFound, TooLarge
from services.policy import PathUse, ResolvedPath, Resource, RiskTier
from services.tools import schemas
from services.tools.registry import ToolContext, ToolSpec, tool
from services.tools.results import PolicyDenied, ToolOutput

TOOLS: list[ToolSpec] = []

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_DIR_FD = os.open in os.supports_dir_fd and os.replace in os.supports_dir_fd
_MAX_LINE_OUT = 1000
_MAX_LINE_MATCH = 10_000
_WALK_CAP_FACTOR = 4


# -- safe primitives ----------------------------------------------------------------------------
def open_for_read(ctx: ToolContext, resolved: ResolvedPath) -> int:
    """Open a checked regular file without following links, and verify what was opened."""
    if resolved.kind == "missing":
        raise NotFound(f"{resolved.raw!r}: no such file", path=resolved.raw)
    if resolved.kind == "dir":
        raise InvalidInput(f"{resolved.raw!r} is a directory", path=resolved.raw)
    fd = os.open(resolved.path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PolicyDenied(f"{resolved.raw!r} is not a regular file", rule="fs.special_file")
        ctx.guard.verify_fd(fd, resolved)
        if _O_NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_fd(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_checked(ctx: ToolContext, resolved: ResolvedPath, limit: int) -> bytes:
    fd = open_for_read(ctx, resolved)
    try:
        return read_fd(fd, limit)
    finally:
        os.close(fd)


def _open_dir(ctx: ToolContext, directory: Path) -> tuple[int, ResolvedPath]:
    checked = ctx.guard.resolve(str(directory), "list", arg="directory")
    if checked.kind != "dir":
        raise NotFound(f"directory {directory} does not exist")
    dfd = os.open(checked.path, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC)
    try:
        ctx.guard.verify_fd(dfd, checked)
    except BaseException:
        os.close(dfd)
        raise
    return dfd, checked


def atomic_replace(ctx: ToolContext, resolved: ResolvedPath, data: bytes, *, exclusive: bool = False) -> bool:
    """Write ``data`` to the checked path atomically; return True if the file was created.

    ``exclusive``: fail (InvalidInput) if the file exists, decided atomically by ``link``.
    """
    target = resolved.path
    if resolved.kind == "dir":
        raise InvalidInput(f"{resolved.raw!r} is a directory", path=resolved.raw)
    dfd, _ = _open_dir(ctx, target.parent)
    name = target.name
    tmp = f".{name[:80]}.{secrets.token_hex(6)}.tmp"
    created = True
    try:
        mode = 0o644
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False) if _DIR_FD else os.lstat(target)
        except FileNotFoundError:
            st = None
        if st is not None:
            created = False
            if exclusive:
                raise InvalidInput(f"{resolved.raw!r} already exists (if_exists=error)", path=resolved.raw)
            if not stat.S_ISREG(st.st_mode):
                raise PolicyDenied(f"{resolved.raw!r} is not a regular file", rule="fs.special_file")
            if st.st_nlink > 1 and not ctx.policy.policy.allow_hardlinks:
                raise PolicyDenied(f"{resolved.raw!r} has several hard links; refused", rule="fs.hardlink")
            mode = stat.S_IMODE(st.st_mode)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY
        if _DIR_FD:
            fd = os.open(tmp, flags, mode, dir_fd=dfd)
        else:  # pragma: no cover - platforms without dir_fd
            fd = os.open(target.parent / tmp, flags, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            if exclusive:
                if _DIR_FD:
                    os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
                else:  # pragma: no cover
                    os.link(target.parent / tmp, target)
            elif _DIR_FD:
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            else:  # pragma: no cover
                os.replace(target.parent / tmp, target)
        except FileExistsError:
            raise InvalidInput(f"{resolved.raw!r} already exists (if_exists=error)", path=resolved.raw) from None
        finally:
            try:
                if _DIR_FD:
                    os.unlink(tmp, dir_fd=dfd)
                else:  # pragma: no cover
                    os.unlink(target.parent / tmp)
            except FileNotFoundError:
                pass
        if os.name == "posix":
            os.fsync(dfd)
    finally:
        os.close(dfd)
    return created


def _unlink_checked(ctx: ToolContext, resolved: ResolvedPath) -> None:
    dfd, _ = _open_dir(ctx, resolved.path.parent)
    try:
        if _DIR_FD:
            os.unlink(resolved.path.name, dir_fd=dfd)
        else:  # pragma: no cover
            os.unlink(resolved.path)
        if os.name == "posix":
            os.fsync(dfd)
    finally:
        os.close(dfd)


def decode_text(data: bytes, encoding: str, *, truncated: bool) -> tuple[str, bool]:
    """Decode; a multi-byte character cut by truncation is dropped. Returns (text, had_errors)."""
    try:
        return data.decode(encoding), False
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(data) - 3 and encoding == "utf-8":
            try:
                return data[: exc.start].decode(encoding), False
            except UnicodeDecodeError:
                pass
        return data.decode(encoding, errors="replace"), True


def _entry_type(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return "symlink"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    if entry.is_file(follow_symlinks=False):
        return "file"
    return "other"


def _clamp(requested: Any, limit: int) -> int:
    return limit if requested is None else max(1, min(int(requested), limit))


def _path_arg(key: str, op: str, default: str | None = None) -> Any:
    def resources(args: dict[str, Any]) -> list[Resource]:
        return [PathUse(args.get(key, default), op, arg=key)]  # type: ignore[arg-type]

    return resources


# -- list_dir -----------------------------------------------------------------------------------
@tool(
    "builtin:fs:list_dir",
    tier=RiskTier.READ_ONLY,
    description="List a directory (optionally recursively), sorted by normalized path. Symlinks are "
    "listed, never followed.",
    input_schema=schemas.FS_LIST_DIR_IN,
    output_schema=schemas.FS_LIST_DIR_OUT,
    registry=TOOLS,
    resources=_path_arg("path", "list", "."),
)
def list_dir(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    target = ctx.guard.resolve(args.get("path", "."), "list")
    if target.kind == "missing":
        raise NotFound(f"{target.raw!r}: no such directory", path=target.raw)
    if target.kind != "dir":
        raise InvalidInput(f"{target.raw!r} is not a directory", path=target.raw)
    dfd, _ = _open_dir(ctx, target.path)  # verifies the directory is still the checked one
    os.close(dfd)
    limit = _clamp(args.get("max_entries"), ctx.limits.fs_list_max_entries)
    recursive = bool(args.get("recursive", False))
    include_hidden = bool(args.get("include_hidden", True))
    walk_cap = limit * _WALK_CAP_FACTOR
    entries: list[dict[str, Any]] = []
    hidden = 0
    truncated = False
    pending: list[tuple[Path, str]] = [(target.path, "")]
    while pending:
        directory, prefix = pending.pop()
        try:
            with os.scandir(directory) as it:
                items = sorted(it, key=lambda e: e.name)
        except (PermissionError, FileNotFoundError, NotADirectoryError):
            continue
        for entry in items:
            if not include_hidden and entry.name.startswith("."):
                continue
            full = directory / entry.name
            if ctx.guard.entry_denied(full, "list") is not None:
                hidden += 1
                continue
            kind = _entry_type(entry)
            rel = f"{prefix}{entry.name}"
            try:
                size = entry.stat(follow_symlinks=False).st_size if kind == "file" else 0
            except OSError:
                size = 0
            entries.append({"path": rel, "name": entry.name, "type": kind, "size": size})
            if recursive and kind == "dir":
                pending.append((full, rel + "/"))
            if len(entries) >= walk_cap:
                truncated = True
                pending.clear()
                break
    entries.sort(key=lambda e: e["path"])
    if len(entries) > limit:
        entries = entries[:limit]
        truncated = True
    return ToolOutput(
        {
            "path": str(target.path),
            "root": str(target.root),
            "entries": entries,
            "count": len(entries),
            "hidden_by_policy": hidden,
        },
        {"truncated": truncated, "normalized_path": str(target.path), "limit": limit},
    )


# -- read_text ----------------------------------------------------------------------------------
@tool(
    "builtin:fs:read_text",
    tier=RiskTier.READ_ONLY,
    description="Read a text file, capped at max_bytes (truncated=true when cut).",
    input_schema=schemas.FS_READ_TEXT_IN,
    output_schema=schemas.FS_READ_TEXT_OUT,
    registry=TOOLS,
    resources=_path_arg("path", "read"),
)
def read_text(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    target = ctx.guard.resolve(args["path"], "read")
    limit = _clamp(args.get("max_bytes"), ctx.limits.fs_read_max_bytes)
    offset = int(args.get("offset", 0))
    encoding = str(args.get("encoding", "utf-8"))
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
    return ToolOutput(
        {"path": str(target.path), "text": text, "encoding": encoding, "size": size, "offset": offset},
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
def _write_tier(args: dict[str, Any], facts: dict[str, Any]) -> RiskTier:
    return RiskTier.WRITE_SAFE if args.get("if_exists") == "error" else RiskTier.WRITE_DESTRUCTIVE


def _unified(old: str, new: str, rel: str) -> str:
    diff = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}", n=3
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff)


def _preview_write(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    target = ctx.guard.resolve(args["path"], "write")
    old = ""
    note = None
    if target.kind == "file":
        try:
            readable = ctx.guard.resolve(args["path"], "read")
            data = read_checked(ctx, readable, ctx.limits.fs_read_max_bytes + 1)
            if len(data) > ctx.limits.fs_read_max_bytes or b"\x00" in data[:8192]:
                note = "existing content is too large or binary to show"
            else:
                old = decode_text(data, "utf-8", truncated=False)[0]
        except PolicyDenied:
            note = "existing content not shown: reading it is denied by the policy"
    new = str(args.get("text", ""))
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
    input_schema=schemas.FS_WRITE_TEXT_IN,
    output_schema=schemas.FS_WRITE_TEXT_OUT,
    registry=TOOLS,
    resources=_path_arg("path", "write"),
    tier_fn=_write_tier,
    session_keys=("paths",),
    preview=_preview_write,
)
def write_text(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    target = ctx.guard.resolve(args["path"], "write")
    data = str(args["text"]).encode("utf-8")
    if len(data) > ctx.limits.fs_write_max_bytes:
        raise TooLarge(f"{len(data)} bytes exceeds the {ctx.limits.fs_write_max_bytes}-byte write limit")
    parent = target.path.parent
    if not parent.is_dir():
        if not args.get("create_dirs", False):
            raise NotFound(f"directory of {target.raw!r} does not exist (set create_dirs to create it)")
        ctx.guard.resolve(str(parent), "write", arg="directory")
        os.makedirs(parent, exist_ok=True)
    created = atomic_replace(ctx, target, data, exclusive=args.get("if_exists") == "error")
    return ToolOutput(
        {
            "path": str(target.path),
            "bytes_written": len(data),
            "created": created,
            "sha256": hashlib.sha256(data).hexdigest(),
        },
        {"bytes": len(data), "normalized_path": str(target.path)},
    )


# -- search_text --------------------------------------------------------------------------------
@tool(
    "builtin:fs:search_text",
    tier=RiskTier.READ_ONLY,
    description="Search text files under a directory (or one file) for a string or regex; matches sorted "
    "by path and line, capped in number and context.",
    input_schema=schemas.FS_SEARCH_TEXT_IN,
    output_schema=schemas.FS_SEARCH_TEXT_OUT,
    registry=TOOLS,
    resources=_path_arg("path", "read", "."),
)
def search_text(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    target = ctx.guard.resolve(args.get("path", "."), "read")
    if target.kind == "missing":
        raise NotFound(f"{target.raw!r}: no such file or directory", path=target.raw)
    max_matches = _clamp(args.get("max_matches"), ctx.limits.fs_search_max_matches)
    context = min(int(args.get("context_lines", 0)), ctx.limits.fs_search_max_context_lines)
    flags = 0 if args.get("case_sensitive", True) else re.IGNORECASE
    query = str(args["query"])
    try:
        pattern = re.compile(query if args.get("regex") else re.escape(query), flags)
    except re.error as exc:
        raise InvalidInput(f"query is not a valid regular expression: {exc}") from None
    name_glob = args.get("glob")
    files: list[tuple[str, Path]] = []
    skipped = 0
    truncated = False
    if target.kind == "file":
        files.append((target.path.name, target.path))
    else:
        pending: list[tuple[Path, str]] = [(target.path, "")]
        while pending:
            directory, prefix = pending.pop()
            try:
                with os.scandir(directory) as it:
                    items = sorted(it, key=lambda e: e.name)
            except (PermissionError, FileNotFoundError, NotADirectoryError):
                continue
            for entry in items:
                full = directory / entry.name
                rel = f"{prefix}{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    if ctx.guard.entry_denied(full, "list") is None:
                        pending.append((full, rel + "/"))
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue  # symlinks, FIFOs, devices: never opened while walking
                if name_glob and not fnmatch.fnmatchcase(rel if "/" in name_glob else entry.name, name_glob):
                    continue
                files.append((rel, full))
                if len(files) >= ctx.limits.fs_search_max_files * _WALK_CAP_FACTOR:
                    truncated = True  # a huge tree: stop walking, search what was found
                    pending.clear()
                    break
    files.sort(key=lambda f: f[0])
    if len(files) > ctx.limits.fs_search_max_files:
        files = files[: ctx.limits.fs_search_max_files]
        truncated = True
    matches: list[dict[str, Any]] = []
    scanned = 0
    full_up = False
    for rel, full in files:
        try:
            checked = ctx.guard.resolve(str(full), "read")
        except (PolicyDenied, InvalidInput):
            skipped += 1
            continue
        if checked.kind != "file":
            skipped += 1
            continue
        try:
            data = read_checked(ctx, checked, ctx.limits.fs_search_max_file_bytes + 1)
        except (PolicyDenied, OSError):
            skipped += 1
            continue
        if len(data) > ctx.limits.fs_search_max_file_bytes or b"\x00" in data[:8192]:
            skipped += 1
            continue
        scanned += 1
        lines = data.decode("utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, start=1):
            found = pattern.search(line[:_MAX_LINE_MATCH])
            if found is None:
                continue
            if len(matches) >= max_matches:
                truncated = full_up = True
                break
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
        if full_up:
            break
    return ToolOutput(
        {"path": str(target.path), "matches": matches, "files_scanned": scanned, "files_skipped": skipped},
        {
            "truncated": truncated,
            "normalized_path": str(target.path),
            "max_matches": max_matches,
            "context_lines": context,
        },
    )


# -- apply_patch --------------------------------------------------------------------------------
@dataclass
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: list[tuple[str, str]] = field(default_factory=list)  # (" "|"-"|"+", text without EOL)
    old_no_eol: bool = False
    new_no_eol: bool = False


@dataclass
class FilePatch:
    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new_path if self.new_path is not None else self.old_path or ""

    @property
    def action(self) -> str:
        if self.old_path is None:
            return "create"
        if self.new_path is None:
            return "delete"
        return "modify"


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _header_path(line: str, strip: int | None) -> tuple[str | None, bool]:
    value = line[4:].split("\t", 1)[0].rstrip("\r\n")
    if value.startswith('"') and value.endswith('"') and len(value) > 1:
        raise InvalidInput("quoted paths in patch headers are not supported", rule="fs.patch_syntax")
    if value.rstrip() == "/dev/null":
        return None, False
    return value.rstrip(), True


def _strip(path: str, count: int) -> str:
    parts = path.split("/")
    if count >= len(parts):
        raise InvalidInput(f"cannot strip {count} components from {path!r}", rule="fs.patch_syntax")
    return "/".join(parts[count:])


def parse_patch(text: str, strip: int | None = None) -> list[FilePatch]:
    """Parse a unified diff. Strict: counts must add up; renames, binary and copies are refused."""
    if "\x00" in text:
        raise InvalidInput("the patch contains NUL bytes", rule="fs.patch_syntax")
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    patches: list[FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("rename from", "rename to", "copy from", "copy to", "GIT binary patch", "Binary files")):
            raise InvalidInput(
                f"patch line {i + 1}: renames, copies and binary patches are not supported", rule="fs.patch_syntax"
            )
        if not (line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
            if line.startswith("@@"):
                raise InvalidInput(f"patch line {i + 1}: hunk without file headers", rule="fs.patch_syntax")
            i += 1
            continue
        old_raw, _ = _header_path(line, strip)
        new_raw, _ = _header_path(lines[i + 1], strip)
        i += 2
        if old_raw is None and new_raw is None:
            raise InvalidInput(f"patch line {i - 1}: both sides are /dev/null", rule="fs.patch_syntax")
        count = strip
        if count is None:
            sides = [p for p in (old_raw, new_raw) if p is not None]
            count = 1 if sides and all(p.startswith(("a/", "b/")) for p in sides) else 0
        old_path = _strip(old_raw, count) if old_raw is not None else None
        new_path = _strip(new_raw, count) if new_raw is not None else None
        if old_path is not None and new_path is not None and old_path != new_path:
            raise InvalidInput(
                f"patch line {i - 1}: renames ({old_path} -> {new_path}) are not supported", rule="fs.patch_syntax"
            )
        fp = FilePatch(old_path, new_path)
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if not m:
                raise InvalidInput(f"patch line {i + 1}: malformed hunk header", rule="fs.patch_syntax")
            hunk = Hunk(int(m.group(1)), int(m.group(2) or 1), int(m.group(3)), int(m.group(4) or 1))
            i += 1
            old_seen = new_seen = 0
            while i < len(lines) and (
                old_seen < hunk.old_len or new_seen < hunk.new_len or (i < len(lines) and lines[i].startswith("\\"))
            ):
                body = lines[i]
                if body.startswith("\\"):
                    if not hunk.lines:
                        raise InvalidInput(f"patch line {i + 1}: misplaced '\\' marker", rule="fs.patch_syntax")
                    tag = hunk.lines[-1][0]
                    if tag in " -":
                        hunk.old_no_eol = True
                    if tag in " +":
                        hunk.new_no_eol = True
                    i += 1
                    continue
                if old_seen >= hunk.old_len and new_seen >= hunk.new_len:
                    break
                tag, content = (body[0], body[1:]) if body else (" ", "")
                if tag not in " -+":
                    raise InvalidInput(f"patch line {i + 1}: unexpected line in hunk", rule="fs.patch_syntax")
                if tag in " -":
                    old_seen += 1
                if tag in " +":
                    new_seen += 1
                hunk.lines.append((tag, content))
                i += 1
            if old_seen != hunk.old_len or new_seen != hunk.new_len:
                raise InvalidInput(
                    f"patch hunk before line {i + 1}: line counts do not match its header", rule="fs.patch_syntax"
                )
            fp.hunks.append(hunk)
        if not fp.hunks:
            raise InvalidInput(f"patch for {fp.path}: no hunks", rule="fs.patch_syntax")
        if fp.action == "create" and any(tag != "+" for hunk in fp.hunks for tag, _ in hunk.lines):
            raise InvalidInput(f"patch for new file {fp.path} has context or removed lines", rule="fs.patch_syntax")
        if fp.action == "delete" and any(tag != "-" for hunk in fp.hunks for tag, _ in hunk.lines):
            raise InvalidInput(f"patch deleting {fp.path} has context or added lines", rule="fs.patch_syntax")
        patches.append(fp)
    if not patches:
        raise InvalidInput("no file changes found in the patch (expected a unified diff)", rule="fs.patch_syntax")
    seen = [p.path for p in patches]
    if len(set(seen)) != len(seen):
        raise InvalidInput("the patch changes the same file twice", rule="fs.patch_syntax")
    return patches


def _patch_resources(args: dict[str, Any]) -> list[Resource]:
    patch = args.get("patch")
    if not isinstance(patch, str):
        raise InvalidInput("patch must be a string", rule="fs.patch_syntax")
    base = args.get("base")
    return [PathUse(p.path, "write", arg="patch path", base=base) for p in parse_patch(patch, args.get("strip"))]


def split_lines(text: str) -> list[str]:
    """Lines with their endings; only ``\n`` ends a line (form feeds and the like stay inside)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _apply_hunks(original: str, fp: FilePatch) -> str:
    out = split_lines(original)
    eol = "\r\n" if out and out[0].endswith("\r\n") else "\n"
    offset = 0
    for number, hunk in enumerate(fp.hunks, start=1):
        old = [text for tag, text in hunk.lines if tag in " -"]
        new = [text for tag, text in hunk.lines if tag in " +"]
        want = (hunk.old_start - 1 if hunk.old_len else hunk.old_start) + offset
        current = [ln.rstrip("\r\n") for ln in out]
        position = None
        for delta in range(0, len(current) + 1):
            for candidate in (want - delta, want + delta) if delta else (want,):
                if 0 <= candidate <= len(current) - len(old) and current[candidate : candidate + len(old)] == old:
                    position = candidate
                    break
            if position is not None:
                break
        if position is None:
            raise InvalidInput(
                f"hunk {number} of {fp.path} does not apply (context not found)",
                rule="fs.patch_apply",
                path=fp.path,
                hunk=number,
            )
        replaced = [text + eol for text in new]
        if replaced and hunk.new_no_eol:
            replaced[-1] = replaced[-1][: -len(eol)]
        out[position : position + len(old)] = replaced
        offset += len(new) - len(old)
    return "".join(out)


def _plan_patch(
    ctx: ToolContext, args: dict[str, Any]
) -> list[tuple[FilePatch, ResolvedPath, bytes | None, bytes | None]]:
    text = str(args["patch"])
    if len(text.encode("utf-8")) > ctx.limits.fs_patch_max_bytes:
        raise TooLarge(f"the patch exceeds the {ctx.limits.fs_patch_max_bytes}-byte limit")
    base = None
    if args.get("base") is not None:
        base_checked = ctx.guard.resolve(args["base"], "list", arg="base")
        if base_checked.kind != "dir":
            raise InvalidInput(f"base {args['base']!r} is not a directory")
        base = base_checked.path
    plan: list[tuple[FilePatch, ResolvedPath, bytes | None, bytes | None]] = []
    for fp in parse_patch(text, args.get("strip")):
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
        updated = _apply_hunks(original_text, fp).encode("utf-8")
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


def _patch_tier(args: dict[str, Any], facts: dict[str, Any]) -> RiskTier:
    return RiskTier.READ_ONLY if args.get("dry_run") else RiskTier.WRITE_DESTRUCTIVE


def _preview_patch(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        summary = _patch_summary(_plan_patch(ctx, args))
        applies, problem = True, None
    except (InvalidInput, NotFound, TooLarge, PolicyDenied) as exc:
        summary, applies, problem = [], False, exc.message
    return {"kind": "diff", "diff": str(args["patch"])[:200_000], "files": summary, "applies": applies, "note": problem}


@tool(
    "builtin:fs:apply_patch",
    tier=RiskTier.WRITE_DESTRUCTIVE,
    description="Apply a unified diff: every hunk of every file applies, or nothing changes. dry_run "
    "checks it without writing (READ_ONLY).",
    input_schema=schemas.FS_APPLY_PATCH_IN,
    output_schema=schemas.FS_APPLY_PATCH_OUT,
    registry=TOOLS,
    resources=_patch_resources,
    tier_fn=_patch_tier,
    session_keys=("paths",),
    preview=_preview_patch,
)
def apply_patch(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    plan = _plan_patch(ctx, args)
    summary = _patch_summary(plan)
    if args.get("dry_run"):
        return ToolOutput({"files": summary, "applied": False}, {"dry_run": True})
    done: list[tuple[ResolvedPath, bytes | None]] = []
    written = 0
    try:
        for fp, target, original, updated in plan:
            if updated is None:
                _unlink_checked(ctx, target)
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
                _unlink_checked(ctx, fresh)
            else:
                atomic_replace(ctx, fresh, original)
        raise
    return ToolOutput({"files": summary, "applied": True}, {"bytes": written})
