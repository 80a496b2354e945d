"""How an attached file (``@path``) sits inside a user message: the one pattern that the turn (what the
model was given as untrusted input), the transcript's display and the conversation search read.

Since issue 31 a file's text is an untrusted block, ``<<<untrusted attached file PATH[ (cut …)]>>>`` …
``<<<end untrusted>>>``, written by ``services.assistant.attachments``; messages stored before it
carry ``--- attached file PATH --- … --- end of PATH ---`` and are read the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_PATTERN = re.compile(
    r"<<<untrusted attached file (\S+)( \(cut [^)]*\))?>>>\n(.*?)\n<<<end untrusted>>>"
    r"|--- attached file (\S+)( \(cut [^)]*\))? ---\n(.*?)\n--- end of \4 ---",
    re.DOTALL,
)


@dataclass(frozen=True)
class Attached:
    path: str
    cut: str  # " (cut at N of M bytes)" or ""
    text: str


def _of(match: re.Match[str]) -> Attached:
    path, cut, text = match.group(1, 2, 3) if match.group(1) is not None else match.group(4, 5, 6)
    return Attached(str(path), str(cut or ""), str(text))


def attached_files(message: str) -> list[Attached]:
    """Each file attached to ``message``, in order."""
    return [_of(match) for match in _PATTERN.finditer(message)]


def replace_attached(message: str, replace: Callable[[Attached], str]) -> str:
    """``message`` with each attached file's block replaced by ``replace(file)``."""
    return _PATTERN.sub(lambda match: replace(_of(match)), message)


__all__ = ["Attached", "attached_files", "replace_attached"]
