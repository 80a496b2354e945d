"""sed scripts: inert only when they print, delete, quit or substitute without the ``e``
(execute), ``w`` (write) or ``r`` (read a file) commands and flags, and without ``-i``.  Anything
the small parser does not recognise counts as able to run code (fail closed)."""

from __future__ import annotations

_SED_INERT_OPTIONS = frozenset(
    {"-n", "--quiet", "--silent", "-E", "-r", "--regexp-extended", "-s", "--separate", "-z", "--null-data", "-u"}
)
_SED_SIMPLE = set("pPdDqQnNl=gGhHxz{}")


def sed_is_inert(args: list[str]) -> bool:
    scripts: list[str] = []
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-e", "--expression"):
            if i + 1 >= len(args):
                return False
            scripts.append(args[i + 1])
            i += 2
            continue
        if arg.startswith("--expression="):
            scripts.append(arg.split("=", 1)[1])
        elif arg.startswith("-") and arg != "-":
            if arg not in _SED_INERT_OPTIONS and not (
                not arg.startswith("--") and all(f"-{c}" in _SED_INERT_OPTIONS for c in arg[1:])
            ):
                return False
        else:
            operands.append(arg)
        i += 1
    if not scripts:
        if not operands:
            return False
        scripts.append(operands[0])
    return all(_sed_script_inert(script) for script in scripts)


def _sed_script_inert(script: str) -> bool:
    i, n = 0, len(script)

    def skip_delimited(pos: int, delim: str) -> int:
        """Index just past the closing ``delim`` starting at ``pos`` (after the opening one)."""
        while pos < n:
            if script[pos] == "\\":
                pos += 2
                continue
            if script[pos] == delim:
                return pos + 1
            if script[pos] == "\n":
                return -1
            pos += 1
        return -1

    while i < n:
        c = script[i]
        if c in " \t\n;":
            i += 1
            continue
        # addresses
        while i < n and (script[i].isdigit() or script[i] in "$,!~+ " or script[i] in "/\\"):
            if script[i] in "/\\":
                delim = "/" if script[i] == "/" else (script[i + 1] if i + 1 < n else "")
                start = i + 1 if script[i] == "/" else i + 2
                if not delim:
                    return False
                i = skip_delimited(start, delim)
                if i < 0:
                    return False
                while i < n and script[i] in "IM":
                    i += 1
            else:
                i += 1
        if i >= n:
            return True
        c = script[i]
        if c in _SED_SIMPLE:
            i += 1
            while i < n and script[i].isdigit():  # q5, Q5
                i += 1
            continue
        if c in "sy":
            if i + 1 >= n or script[i + 1] in "\\\n":
                return False
            delim = script[i + 1]
            i = skip_delimited(i + 2, delim)
            if i < 0:
                return False
            i = skip_delimited(i, delim)
            if i < 0:
                return False
            while i < n and script[i] not in ";\n}":
                if c == "y" or script[i] not in "gpiImM0123456789 ":
                    return False  # e (execute), w (write), anything unknown
                i += 1
            continue
        return False  # e, w, W, r, R, a, i, c, b, t, :label ... not in the inert subset
    return True
