"""Writing a text in the operator's own editor (``$VISUAL``, else ``$EDITOR``): the prompt's Ctrl+G.

The command is split as a shell would (``shlex``: ``code --wait``, ``emacsclient -t``), the text
written to a file that only the operator can read (0600) in a folder of its own (0700, made by
``tempfile.mkdtemp``), the editor run on it, the file read back and the folder removed, whatever
happened. An editor that exits non-zero (``:cq`` in vim) means "never mind": the caller keeps the
draft as it was. Every failure is one line for the operator (:class:`Edited` ``.problem``).

Headless: the caller hands the terminal over first (``App.suspend()`` in the TUI).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SUFFIX = ".md"
"""The draft's file name ends so: editors highlight it as Markdown."""
NO_EDITOR = "Set $VISUAL or $EDITOR to write the draft in your editor (for example: export EDITOR='code --wait')."


@dataclass(frozen=True)
class Edited:
    """What the editor gave back: the new ``text``, or None and the ``problem`` (the draft stays)."""

    text: str | None
    problem: str = ""


def editor_command(environ: Mapping[str, str] | None = None) -> list[str]:
    """``$VISUAL`` (else ``$EDITOR``) split into its words; [] when neither is set. A value that does not
    split (an open quote) raises ValueError."""
    env = os.environ if environ is None else environ
    value = (env.get("VISUAL") or "").strip() or (env.get("EDITOR") or "").strip()
    return shlex.split(value) if value else []


def edit_text(text: str, environ: Mapping[str, str] | None = None) -> Edited:
    """Run the operator's editor on ``text``; the text it saved (one trailing newline, which editors
    add, taken off), or why not."""
    try:
        argv = editor_command(environ)
    except ValueError as exc:
        return Edited(None, f"$VISUAL/$EDITOR does not read as a command ({exc}).")
    if not argv:
        return Edited(None, NO_EDITOR)
    folder = Path(tempfile.mkdtemp(prefix="aries-draft-"))  # 0700
    try:
        path = folder / f"draft{SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        try:
            code = subprocess.run([*argv, str(path)], check=False).returncode
        except OSError as exc:
            return Edited(None, f"Cannot run your editor {argv[0]!r}: {exc.strerror or exc}.")
        if code != 0:
            return Edited(None, f"Your editor exited with {code}: the draft is kept as it was.")
        try:
            saved = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return Edited(None, f"Cannot read the draft back: {exc.strerror or exc}.")
        return Edited(saved[:-1] if saved.endswith("\n") else saved)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


__all__ = ["NO_EDITOR", "Edited", "edit_text", "editor_command"]
