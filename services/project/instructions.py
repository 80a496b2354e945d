"""Project instructions: the workspace's own ``AGENTS.md``, added to the system prompt.

Only the file at the workspace's root counts: a folder the policy merely allows (a cloned repository
with an ``AGENTS.md`` of its own) brings no instructions in — it is data, like every document there.
The text is cut at :data:`MAX_CHARS` characters with a notice (in the prompt and on ``/instructions``),
and the request's one budget counts it in the part always sent (``services.models.window_budget``:
``instructions``). It is read only while the workspace's settings are in force
(``services.session.inforce``): a bundle's ``AGENTS.md`` waits in quarantine until trusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from services.workspace.paths import AGENTS_FILE

MAX_CHARS = 16_000
"""Instructions longer than this are cut (the rest is not sent; a notice says so)."""
HEADER = "Project instructions (the workspace's AGENTS.md, written by the operator):"


@dataclass(frozen=True)
class Instructions:
    """The project instructions in force, and where they came from."""

    text: str
    """What is sent (cut at :data:`MAX_CHARS`)."""
    source: str
    """The file, as the operator knows it: ``<workspace>/AGENTS.md``."""
    full_chars: int
    """The file's length in characters (more than ``len(text)`` when cut)."""

    @property
    def cut(self) -> bool:
        return self.full_chars > len(self.text)

    @property
    def notice(self) -> str:
        """One line when the file was cut ('' otherwise)."""
        if not self.cut:
            return ""
        return f"{AGENTS_FILE} has {self.full_chars:,} characters: only the first {MAX_CHARS:,} are sent to the model."

    def system_part(self) -> str:
        """What the system prompt gains: a header, the text, and the cut's notice."""
        tail = f"\n[{self.notice}]" if self.cut else ""
        return f"{HEADER}\n{self.text}{tail}"


def read_instructions(root: Path) -> Instructions | None:
    """``root/AGENTS.md`` (None: no such file, empty, or not a regular file). Bytes that are not UTF-8
    are replaced; a symbolic link is not followed (it could name any file)."""
    path = root / AGENTS_FILE
    if path.is_symlink() or not path.is_file():
        return None
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CHARS * 4 + 4)
        size = path.stat().st_size
    except OSError:
        return None
    text = data.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    full = len(text) if size <= len(data) else max(len(text), size)
    return Instructions(text[:MAX_CHARS], str(path), max(full, len(text)))


def system_prompt_with(system_prompt: str, instructions: Instructions | None) -> str:
    """The system prompt with the project's instructions after it (unchanged without any)."""
    if instructions is None:
        return system_prompt
    return f"{system_prompt}\n\n{instructions.system_part()}"


__all__ = ["MAX_CHARS", "Instructions", "read_instructions", "system_prompt_with"]
