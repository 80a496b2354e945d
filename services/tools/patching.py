"""Unified diffs for ``builtin:fs:apply_patch``: parsed with ``unidiff``, applied in memory.

``parse_patch(text, strip)`` turns a unified diff (plain or ``git diff``) into ``FilePatch``es with
``unidiff.PatchSet``; what the tool refuses on top of the format: NUL bytes, renames, copies, binary
patches, quoted paths, a file changed twice, both sides ``/dev/null``, a file header without hunks,
a new file with context or removed lines, a deleted file with context or added lines.  A malformed
diff is an ``InvalidInput`` (rule ``fs.patch_syntax``) that names the diff line (``details.line``)
and quotes it.  Paths are taken from the ``---``/``+++`` headers; ``strip`` removes leading
components (default: 1 when every path starts with ``a/`` or ``b/``, else 0).

``apply_hunks(original, fp)`` applies one file's hunks to its text: each hunk is searched for at
its line number first, then at growing distances (offsets, as ``patch`` does); line endings of the
file (LF or CRLF) are kept; "No newline at end of file" markers are honoured.  Writing the result
(policy checks, atomic writes, all or nothing) is the tool's part, in ``services.tools.fs``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from services.errors import InvalidInput

_DEV_NULL = "/dev/null"
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_UNSUPPORTED = ("rename from", "rename to", "copy from", "copy to", "GIT binary patch", "Binary files")


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
    line: int = 0  # where its header is in the diff (1-based)

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


def split_lines(text: str) -> list[str]:
    """Lines with their endings; only ``\n`` ends a line (form feeds and the like stay inside)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _syntax(number: int, lines: list[str], reason: str) -> InvalidInput:
    quoted = lines[number - 1].rstrip("\r\n")[:200] if 0 < number <= len(lines) else ""
    where = f"patch line {number}: " if number else ""
    text = f" ({quoted!r})" if quoted else ""
    return InvalidInput(f"{where}{reason}{text}", rule="fs.patch_syntax", line=number)


class _Counted(Iterator[str]):
    """The diff's lines, remembering how many the parser has taken (for error messages)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.taken = 0

    def __next__(self) -> str:
        if self.taken >= len(self.lines):
            raise StopIteration
        self.taken += 1
        return self.lines[self.taken - 1]


def _side(raw: str, number: int, lines: list[str]) -> str | None:
    value = raw.rstrip()
    if value.startswith('"'):
        raise _syntax(number, lines, "quoted paths in patch headers are not supported")
    return None if value == _DEV_NULL else value


def _strip(path: str, count: int, number: int, lines: list[str]) -> str:
    parts = path.split("/")
    if count >= len(parts):
        raise _syntax(number, lines, f"cannot strip {count} components from {path!r}")
    return "/".join(parts[count:])


def _line_text(value: str) -> str:
    value = value[:-1] if value.endswith("\n") else value
    return value[:-1] if value.endswith("\r") else value


def _hunk(source: object) -> Hunk:
    from unidiff.patch import Hunk as UnidiffHunk

    assert isinstance(source, UnidiffHunk)
    hunk = Hunk(source.source_start, source.source_length, source.target_start, source.target_length)
    previous = ""
    for line in source:
        kind = line.line_type
        if kind == "\\":
            if previous in (" ", "-"):
                hunk.old_no_eol = True
            if previous in (" ", "+"):
                hunk.new_no_eol = True
            continue
        if kind not in (" ", "-", "+"):
            continue  # a blank separator line after the hunk
        hunk.lines.append((kind, _line_text(line.value)))
        previous = kind
    return hunk


def parse_patch(text: str, strip: int | None = None) -> list[FilePatch]:
    """Parse a unified diff with unidiff. Strict: counts must add up; renames, binary and copies are refused."""
    from unidiff.errors import UnidiffParseError
    from unidiff.patch import PatchSet

    if "\x00" in text:
        raise InvalidInput("the patch contains NUL bytes", rule="fs.patch_syntax")
    lines = split_lines(text)
    for number, line in enumerate(lines, start=1):
        if line.startswith(_UNSUPPORTED):
            raise _syntax(number, lines, "renames, copies and binary patches are not supported")
        if line.startswith("@@") and not _HUNK_HEADER.match(line):
            raise _syntax(number, lines, "malformed hunk header")
    counted = _Counted(lines)
    try:
        parsed = PatchSet(counted)
    except UnidiffParseError as exc:
        reason = str(exc).split(":", 1)[0].strip() or "malformed diff"
        raise _syntax(counted.taken, lines, reason) from None
    except UnicodeError as exc:  # pragma: no cover - text input is already decoded
        raise InvalidInput(f"the patch is not valid text: {exc}", rule="fs.patch_syntax") from None
    patches: list[FilePatch] = []
    for patched in parsed:
        number = int(patched.diff_line_no or 0)
        if patched.is_binary_file:
            raise _syntax(number, lines, "binary patches are not supported")
        old_raw = _side(patched.source_file or _DEV_NULL, number, lines)
        new_raw = _side(patched.target_file or _DEV_NULL, number, lines)
        if old_raw is None and new_raw is None:
            raise _syntax(number, lines, "both sides are /dev/null")
        count = strip
        if count is None:
            sides = [p for p in (old_raw, new_raw) if p is not None]
            count = 1 if sides and all(p.startswith(("a/", "b/")) for p in sides) else 0
        old_path = _strip(old_raw, count, number, lines) if old_raw is not None else None
        new_path = _strip(new_raw, count, number, lines) if new_raw is not None else None
        if old_path is not None and new_path is not None and old_path != new_path:
            raise _syntax(number, lines, f"renames ({old_path} -> {new_path}) are not supported")
        fp = FilePatch(old_path, new_path, [_hunk(h) for h in patched], number)
        if not fp.hunks:
            raise _syntax(number, lines, f"the patch for {fp.path} has no hunks")
        if fp.action == "create" and any(tag != "+" for hunk in fp.hunks for tag, _ in hunk.lines):
            raise _syntax(number, lines, f"the patch for new file {fp.path} has context or removed lines")
        if fp.action == "delete" and any(tag != "-" for hunk in fp.hunks for tag, _ in hunk.lines):
            raise _syntax(number, lines, f"the patch deleting {fp.path} has context or added lines")
        patches.append(fp)
    if not patches:
        raise InvalidInput("no file changes found in the patch (expected a unified diff)", rule="fs.patch_syntax")
    seen: set[str] = set()
    for fp in patches:
        if fp.path in seen:
            raise _syntax(fp.line, lines, f"the patch changes {fp.path} twice")
        seen.add(fp.path)
    return patches


def apply_hunks(original: str, fp: FilePatch) -> str:
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


__all__ = ["FilePatch", "Hunk", "apply_hunks", "parse_patch", "split_lines"]
