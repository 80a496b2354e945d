"""``PathGuard``: every filesystem path a tool touches is resolved and checked here.

Syntax first (NUL, control characters, encoded or look-alike separators, ``~`` and ``$VAR``),
then the lexical path and the real path (after ``realpath``) must both lie inside an allowed
root, then the file itself (no FIFOs, devices, sockets, hard links) and the deny rules (globs
and extensions, matched on both paths).
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.policy.model import (
    MAX_COMPONENT_BYTES,
    MAX_PATH_CHARS,
    WORKSPACE_INTERNAL,
    PathOp,
    PolicyDenied,
    ToolPermissionDenied,
)
from services.policy.model import deny as _deny
from services.policy.model import invalid as _invalid

if TYPE_CHECKING:
    from services.policy.loader import Policy

_LOOKALIKES = set("\u2024\u2025\u2026\uff0e\ufe52\u2215\u2044\uff0f\u29f8\u2571\uff3c\u2216\ufe68\uff5e\u02dc\u2e31")
_ENCODED = re.compile(r"%(?:[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4})")
_VARIABLE = re.compile(r"\$(?:\{|\(|[A-Za-z_])|%[A-Za-z_][A-Za-z0-9_]*%")


@dataclass(frozen=True)
class ResolvedPath:
    raw: str
    path: Path  # the real path (no symlinks), absolute
    root: Path
    rel: str  # posix path relative to ``root`` ("." for the root itself)
    exists: bool
    kind: str  # file | dir | missing
    dev_ino: tuple[int, int] | None
    lexical_rel: str

    def to_fact(self, arg: str) -> dict[str, Any]:
        return {
            "arg": arg,
            "raw": self.raw,
            "path": str(self.path),
            "root": str(self.root),
            "rel": self.rel,
            "kind": self.kind,
        }


def _within(path: str, root: str) -> bool:
    path_c, root_c = os.path.normcase(path), os.path.normcase(root)
    return path_c == root_c or path_c.startswith(root_c.rstrip(os.sep) + os.sep)


class PathGuard:
    """Every filesystem path a tool touches is resolved and checked here (twice: by the policy
    before the call, and again by the tool right before it opens the file)."""

    def __init__(self, policy: Policy, roots: list[Path], workspace_root: Path | None) -> None:
        self.policy = policy
        self.roots = roots
        self.workspace_root = workspace_root

    def root_of(self, path: str) -> Path | None:
        best: Path | None = None
        for root in self.roots:
            if _within(path, str(root)) and (best is None or len(str(root)) > len(str(best))):
                best = root
        return best

    @staticmethod
    def check_syntax(raw: Any, arg: str = "path") -> str:
        if not isinstance(raw, str):
            raise _invalid("fs.path_syntax", f"{arg} must be a string")
        if raw == "":
            raise _invalid("fs.path_syntax", f"{arg} must not be empty")
        if len(raw) > MAX_PATH_CHARS:
            raise _invalid("fs.path_syntax", f"{arg} is {len(raw)} characters long; the limit is {MAX_PATH_CHARS}")
        if "\x00" in raw:
            raise _invalid("fs.path_syntax", f"{arg} contains a NUL character")
        for char in raw:
            category = unicodedata.category(char)
            if category in {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}:
                raise _invalid("fs.path_syntax", f"{arg} contains a control or invisible character U+{ord(char):04X}")
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", raw):
            raise _invalid("fs.path_syntax", f"{arg} looks like a URL; give a filesystem path")
        if os.sep != "\\" and "\\" in raw:
            raise _invalid("fs.path_syntax", f"{arg} contains a backslash, which is not a separator here")
        for part in re.split(r"[/\\]", raw):
            if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
                raise _invalid("fs.path_syntax", f"{arg} has a component longer than {MAX_COMPONENT_BYTES} bytes")
        for match in _ENCODED.finditer(raw):
            escape = match.group(0)
            char = chr(int(escape[1:], 16)) if len(escape) == 3 else "%u"
            if char in "/\\.~%:" or char == "%u" or ord(char) < 32 or ord(char) >= 0x80:
                raise _deny(
                    "fs.encoded_path",
                    f"{arg} contains the percent-encoded character {escape}; "
                    "paths are taken literally and encoded path characters are refused",
                )
        if any(c in _LOOKALIKES for c in raw):
            raise _deny("fs.unicode_lookalike", f"{arg} contains a look-alike of '.', '/', '\\' or '~'")
        nfkc = unicodedata.normalize("NFKC", raw)
        if nfkc != raw and any(nfkc.count(c) != raw.count(c) for c in "./\\~:"):
            raise _deny("fs.unicode_lookalike", f"{arg} normalizes (NFKC) to a different path")
        if raw.startswith("~"):
            raise _deny("fs.home_expansion", f"{arg} starts with '~'; home expansion is not done, use a real path")
        if _VARIABLE.search(raw):
            raise _deny(
                "fs.variable_expansion", f"{arg} contains an environment variable reference; variables are not expanded"
            )
        return raw

    def resolve(self, raw: Any, op: PathOp, *, arg: str = "path", base: Path | None = None) -> ResolvedPath:
        text = self.check_syntax(raw, arg)
        if not self.roots:
            raise _deny("fs.allowed_roots", "the policy allows no filesystem roots")
        joined = Path(text)
        if not joined.is_absolute():
            joined = (base or self.roots[0]) / joined
        lexical = os.path.normpath(str(joined))
        lexical_root = self.root_of(lexical)
        if lexical_root is None:
            parts = re.split(r"[/\\]", text)
            rule = "fs.traversal" if ".." in parts else "fs.allowed_roots"
            raise _deny(rule, f"{arg} {text!r} is outside the allowed roots", path=text)
        real = os.path.realpath(str(joined))
        root = self.root_of(real)
        if root is None:
            raise _deny(
                "fs.symlink_escape", f"{arg} {text!r} resolves (through a link) outside the allowed roots", path=text
            )
        try:
            st = os.stat(real)
        except FileNotFoundError:
            st = None
        except NotADirectoryError:
            raise _invalid("fs.path_syntax", f"{arg} {text!r}: a parent is not a directory") from None
        except OSError as exc:
            raise _deny("fs.special_file", f"{arg} {text!r} cannot be examined ({exc.strerror})") from None
        kind = "missing"
        dev_ino = None
        if st is not None:
            dev_ino = (st.st_dev, st.st_ino)
            if stat.S_ISDIR(st.st_mode):
                kind = "dir"
            elif stat.S_ISREG(st.st_mode):
                kind = "file"
                if st.st_nlink > 1 and not self.policy.allow_hardlinks:
                    raise _deny(
                        "fs.hardlink",
                        f"{arg} {text!r} has {st.st_nlink} hard links; files with several links are refused",
                        path=text,
                    )
            else:
                raise _deny(
                    "fs.special_file",
                    f"{arg} {text!r} is not a regular file or directory (FIFO, device or socket)",
                    path=text,
                )
        rel = Path(real).relative_to(root).as_posix()
        lexical_rel = Path(lexical).relative_to(lexical_root).as_posix()
        self.check_rules(rel, real, op, arg=arg, raw=text)
        if lexical_rel != rel:
            self.check_rules(lexical_rel, lexical, op, arg=arg, raw=text)
        return ResolvedPath(text, Path(real), root, rel, st is not None, kind, dev_ino, lexical_rel)

    def check_rules(self, rel: str, absolute: str, op: PathOp, *, arg: str = "path", raw: str = "") -> None:
        """Deny globs, extension lists and workspace internals for an already resolved path."""
        for rule in self.policy.deny_rules:
            if op in rule.ops and rule.matches(rel, absolute):
                kind = "fs.deny" if rule.regex is not None else "fs.deny_extensions"
                raise _deny(
                    f"{kind}.{rule.id}", f"{arg} {raw or rel!r} is denied for {op} by rule {rule.id!r}", path=raw or rel
                )
        if op == "write":
            if self.policy.write_extensions is not None and rel != ".":
                name = rel.rsplit("/", 1)[-1].lower()
                if not any(name.endswith(ext) for ext in self.policy.write_extensions):
                    raise _deny(
                        "fs.write_extensions",
                        f"{arg} {raw or rel!r}: only "
                        f"{', '.join(sorted(self.policy.write_extensions))} files may be written",
                    )
            if operator_store(absolute):
                raise _deny(
                    "fs.operator_store",
                    f"{arg} {raw or rel!r} is the operator's settings store (lasting grants): no tool writes it",
                )
            if self.workspace_root is not None and _within(absolute, str(self.workspace_root)):
                inner = Path(absolute).relative_to(self.workspace_root).parts
                if not inner or inner[0] in WORKSPACE_INTERNAL:
                    raise _deny(
                        "fs.workspace_internal",
                        f"{arg} {raw or rel!r} is part of the workspace's own "
                        "records (audit, transcripts, artifacts) and cannot be written by tools",
                    )

    def entry_denied(self, path: Path, op: PathOp) -> str | None:
        """The rule that hides an entry met while walking a directory (no exception)."""
        root = self.root_of(str(path))
        if root is None:
            return "fs.allowed_roots"
        try:
            self.check_rules(path.relative_to(root).as_posix(), str(path), op)
        except PolicyDenied as exc:
            return exc.rule
        return None

    def verify_fd(self, fd: int, resolved: ResolvedPath) -> None:
        """After opening: the file is still the one that was checked, and still inside a root."""
        st = os.fstat(fd)
        if resolved.dev_ino is not None and (st.st_dev, st.st_ino) != resolved.dev_ino:
            raise ToolPermissionDenied(f"{resolved.raw!r} changed while it was being opened; refused")
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1 and not self.policy.allow_hardlinks:
            raise _deny("fs.hardlink", f"{resolved.raw!r} has several hard links; refused")
        proc_link = f"/proc/self/fd/{fd}"
        if os.path.exists("/proc/self/fd"):
            try:
                actual = os.readlink(proc_link)
            except OSError:
                return
            if actual.startswith("/") and self.root_of(actual) is None:
                raise _deny("fs.symlink_escape", f"{resolved.raw!r} was redirected outside the allowed roots")


def operator_store_files() -> list[str]:
    """The operator's settings store (``$ARIES_HOME/settings.json``, holding lasting grants) and its lock,
    resolved: no tool writes them, wherever the roots are (``services.settings.operator``)."""
    from services.settings.operator import settings_path

    store = settings_path()
    paths = {str(store), str(store.with_name(f".{store.name}.lock"))}
    return sorted(paths | {os.path.realpath(p) for p in paths})


def operator_store(absolute: str) -> bool:
    return os.path.normcase(absolute) in {os.path.normcase(p) for p in operator_store_files()}


def path_candidates(arg: str, cwd: Path) -> list[str]:
    """Parts of a command argument that name a file: checked like fs paths."""
    candidates: list[str] = []
    values = [arg]
    if arg.startswith("-"):
        values = []
        if "=" in arg:
            values.append(arg.split("=", 1)[1])
        elif not arg.startswith("--"):
            # -/path, -f/path, -I~/x: option letters glued to a path
            values.extend(v for v in (arg[1:], arg[2:]) if v[:1] in {"/", "~", ".", "$", "%"})
    for value in values:
        if not value or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value):
            continue
        looks_like_path = (
            value[0] in "/~.$%"
            or "/" in value
            or "\\" in value
            or "\x00" in value
            or any(c in _LOOKALIKES for c in value)
        )
        if not looks_like_path:
            try:
                looks_like_path = os.path.lexists(cwd / value)
            except (OSError, ValueError):
                looks_like_path = True
        if looks_like_path:
            candidates.append(value)
    return candidates
