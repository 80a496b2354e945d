"""Text that reaches a terminal (or a model) is neutralised first.

Document text, file names, tool output and transcript entries are untrusted: an escape sequence
could move the cursor, retitle the window or hide text, a bidi control can reorder what the
operator reads (Trojan Source), and a stray newline in a file name can forge a line of output.

``neutralize`` makes such text inert *and visible*: every C0/C1 control character except newline and
tab (and every newline too with ``single_line=True``) becomes a printable escape such as ``\\x1b``;
bidi embedding/override/isolate controls become ``<U+202E>``-style markers. Ordinary Unicode text
(accents, CJK, emoji) passes through unchanged. The function is idempotent on its own output.

One implementation for the CLI, the TUI and what is sent to a model, so that they show the same.
"""

from __future__ import annotations

import re

# Bidi controls (Trojan Source, CVE-2021-42574) and other invisible format characters that change
# how surrounding text is shown: LRM/RLM/ALM, embeddings/overrides, isolates, and the BOM/ZWNBSP
# in the middle of a text.
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_MULTI = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")
_SINGLE = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_BIDI}]")


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    code = ord(char)
    if code == 0x0A:
        return "\\n"
    if code == 0x09:
        return "\\t"
    if code == 0x0D:
        return "\\r"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"<U+{code:04X}>"


def neutralize(text: str, *, single_line: bool = False) -> str:
    """``text`` with every control and bidi character replaced by a visible escape.

    Newlines and tabs are kept unless ``single_line`` (file names, one-line summaries, headers).
    """
    pattern = _SINGLE if single_line else _MULTI
    return pattern.sub(_escape, text)


def is_clean(text: str, *, single_line: bool = False) -> bool:
    """True when ``neutralize`` would change nothing."""
    pattern = _SINGLE if single_line else _MULTI
    return pattern.search(text) is None


def strip_unsafe(text: str) -> tuple[str, int]:
    """``text`` for a clipboard: every control, escape and bidi character removed (newline and tab kept,
    a CRLF becomes a newline), and how many were removed. Pasted into a terminal, an ESC, an OSC 8/52
    sequence's introducer or a U+202E would act; without them what is left is inert text."""
    text = text.replace("\r\n", "\n")
    kept, removed = _MULTI.subn("", text)  # what ``neutralize`` would make visible
    return kept, removed


__all__ = ["is_clean", "neutralize", "strip_unsafe"]
