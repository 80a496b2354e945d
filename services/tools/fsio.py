"""Safe file primitives for the fs tools: open, read, write and unlink a policy-checked path.

Files are opened with ``O_NOFOLLOW`` and checked after opening (same inode as the one the policy's
``PathGuard`` checked, still inside a root, one link only); writes go to a temp file in the checked
directory (opened as a directory fd) and are renamed over the target, so a write never goes through a
symlink or hard link to outside.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from services.errors import InvalidInput, NotFound
from services.policy import ResolvedPath
from services.policy.model import PolicyDenied
from services.tools.registry import ToolContext
from services.tools.results import ToolTimeout

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_DIR_FD = os.open in os.supports_dir_fd and os.replace in os.supports_dir_fd


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


def open_dir(ctx: ToolContext, directory: Path) -> tuple[int, ResolvedPath]:
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
    dfd, _ = open_dir(ctx, target.parent)
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


def unlink_checked(ctx: ToolContext, resolved: ResolvedPath) -> None:
    dfd, _ = open_dir(ctx, resolved.path.parent)
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


def stop_if_cancelled(ctx: ToolContext, done: int, what: str) -> None:
    """Raise ``Timeout`` once the gateway has cancelled the call or its deadline has passed.

    Walks call it per entry, searches per file and every few thousand lines: a call that stops
    returns ``Timeout`` (no partial result), and its thread ends instead of walking on unseen.
    """
    if ctx.cancelled():
        limit = float(ctx.limits.tool_timeout_s)
        raise ToolTimeout(
            f"{ctx.tool_id} stopped after {done} {what}: the call was cancelled or passed its deadline "
            f"(limits.tool_timeout_s = {limit:g} s)",
            deadline="cancelled" if ctx.cancel.is_set() else "tool",
            limit_s=limit,
            done=done,
        )


__all__ = [
    "atomic_replace",
    "decode_text",
    "open_dir",
    "open_for_read",
    "read_checked",
    "read_fd",
    "stop_if_cancelled",
    "unlink_checked",
]
