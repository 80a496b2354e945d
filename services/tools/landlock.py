"""Landlock (Linux >= 5.13) through ctypes: a ruleset built in the parent, enforced in the child.

``abi_version()`` asks the kernel which Landlock ABI it offers (0: none).  ``build_ruleset``
creates a ruleset in the parent process, where errors can still be reported: every file-system
right the ABI knows is handled, then granted back on the paths given (read-only paths, writable
paths, devices); with ``network=False`` and ABI >= 4 TCP bind and connect are handled with no
port granted, so every TCP socket operation is refused; with ABI >= 6 abstract unix sockets and
signals are scoped to the sandbox.  The child calls ``restrict(fd)`` between fork and exec
(``prctl(PR_SET_NO_NEW_PRIVS)`` then ``landlock_restrict_self``): the restriction applies to the
command and everything it starts, and cannot be lifted.  Nothing here assumes Linux at import.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# System call numbers: the same on every architecture that has them (the unified table).
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# File-system rights, by the ABI that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
# Network rights (ABI 4) and scopes (ABI 6).
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file may hold


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL | None:
    global _LIBC
    if _LIBC is None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def abi_version() -> int:
    """The Landlock ABI version the kernel offers; 0 when it offers none (or this is not Linux)."""
    libc = _libc()
    if libc is None:
        return 0
    try:
        version = int(libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION))
    except (AttributeError, OSError):  # pragma: no cover - a libc without syscall()
        return 0
    return max(version, 0)


def _fs_rights(abi: int) -> int:
    return _FS_BY_ABI[max(k for k in _FS_BY_ABI if k <= abi)]


@dataclass
class Ruleset:
    """A built ruleset: its fd (owned by the parent, closed after the child started) and notes."""

    fd: int
    abi: int
    network_restricted: bool
    notes: list[str] = field(default_factory=list)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def build_ruleset(
    *, read: Iterable[str], write: Iterable[str], devices: Iterable[str], network: bool, abi: int | None = None
) -> Ruleset:
    """A ruleset granting ``read`` (read and execute), ``write`` (everything) and ``devices``
    (read, write, ioctl on device files); everything else is refused.  Missing paths are skipped."""
    libc = _libc()
    abi = abi_version() if abi is None else abi
    if libc is None or abi < 1:
        raise OSError("Landlock is not available")
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled_access_fs=handled)
    size = 8
    restrict_net = not network and abi >= 4
    if restrict_net:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
        size = 24
    fd = int(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    ruleset = Ruleset(fd, abi, restrict_net)
    if not network and not restrict_net:
        ruleset.notes.append(f"Landlock ABI {abi} cannot restrict the network (ABI 4 needed)")
    elif restrict_net:
        ruleset.notes.append("Landlock restricts TCP only: UDP and unix sockets are not restricted")
    try:
        for paths, rights in ((read, READ), (write, handled), (devices, READ_FILE | WRITE_FILE | IOCTL_DEV)):
            for path in paths:
                _add_path(libc, ruleset, path, rights & handled)
    except BaseException:
        ruleset.close()
        raise
    return ruleset


def _add_path(libc: ctypes.CDLL, ruleset: Ruleset, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist here grants nothing
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        beneath = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        if int(libc.syscall(_SYS_ADD_RULE, ruleset.fd, _RULE_PATH_BENEATH, ctypes.byref(beneath), 0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def restrictor(ruleset_fd: int) -> Callable[[], None]:
    """The callable the child runs before exec: no-new-privileges, then the restriction."""
    libc = _libc()
    if libc is None:  # pragma: no cover - build_ruleset refused already
        raise OSError("Landlock is not available")
    prctl, syscall = libc.prctl, libc.syscall

    def restrict() -> None:
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError("prctl(PR_SET_NO_NEW_PRIVS) failed")
        if syscall(_SYS_RESTRICT_SELF, ruleset_fd, 0) != 0:
            raise OSError("landlock_restrict_self failed")

    return restrict
