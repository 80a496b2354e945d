"""``@path`` in a message: the file is read through the gateway and its text goes to the model.

Each ``@path`` (a word starting with ``@``; an e-mail address is not one) is read with
``builtin:fs:read_text`` — the one gateway: the policy decides (a path outside the roots is denied),
the audit store records the call and the conversation shows it as a tool call, which is the
attachment in the transcript. The file's text is stored once: in the message that attached it (what
this turn's request and every later turn's history are built from); the tool call's entry says so
instead of holding a second copy. At most ``MAX_BYTES`` of a file are attached: a longer one is cut
there and the message sent to the model says so, as does the notice returned. A mention that names
no file is left as text (``@here`` in a sentence); a denied or unreadable one is reported and the
message goes without it.

``complete_mention`` lists the files and folders under the policy's roots that start like the word
being typed (for Tab at the prompt).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.session.session import Session

MAX_BYTES = 12_000
"""About 3,000 tokens: a file attached whole still leaves room in the default 8,192-token window
(a bigger one was refused by the context window of the offline model, tried under tmux)."""
MAX_ATTACHMENTS = 8
MENTION = re.compile(r"(?<![\w@])@([^\s@]+)")
TOOL_ID = "builtin:fs:read_text"


@dataclass(frozen=True)
class Attachment:
    path: str  # as typed
    text: str = ""
    size: int = 0
    truncated: bool = False
    error: str = ""  # why it was not attached ("" when it was)
    missing: bool = False  # no such file: left as text


def mentions(text: str) -> list[str]:
    """The ``@path`` words of ``text``, each once, in order (trailing punctuation dropped)."""
    found: list[str] = []
    for match in MENTION.finditer(text):
        path = match.group(1).rstrip(".,;:!?)]}'\"")
        if path and path not in found:
            found.append(path)
    return found


async def attach(session: Session, text: str) -> tuple[str, list[Attachment]]:
    """``(the message for the model, what each mention gave)``: the typed text, then each attached
    file's text between markers that name it (and say when it was cut)."""
    attachments: list[Attachment] = []
    for path in mentions(text)[:MAX_ATTACHMENTS]:
        result = await session.call_tool(
            TOOL_ID,
            {"path": path, "max_bytes": MAX_BYTES},
            source="operator",
            data_stored_in="the message that attached it",  # the file's text: once in the transcript
        )
        if result.ok and result.data is not None:
            attachments.append(
                Attachment(
                    path,
                    text=str(result.data.get("text", "")),
                    size=int(result.data.get("size") or 0),
                    truncated=bool(result.meta.get("truncated")),
                )
            )
        else:
            error = result.error
            missing = error is not None and error.type.value == "NotFound"
            attachments.append(Attachment(path, error=error.message if error else "not read", missing=missing))
    from services.assistant.context import untrusted_block

    blocks = [text]
    for item in attachments:
        if item.error:
            continue
        cut = f" (cut at {MAX_BYTES:,} of {item.size:,} bytes)" if item.truncated else ""
        # A file is data, not the operator's words: inside the same neutralised delimiters as a passage, so
        # that a line of it cannot end the block and speak as the operator (issue 31 item 7).
        blocks.append(untrusted_block(f"attached file {item.path}{cut}", item.text))
    return "\n\n".join(blocks), attachments


def collapse_attachments(text: str) -> str:
    """``text`` with each attached file's block shortened to one line (for showing a sent message)."""
    from services.text.attached import replace_attached

    return replace_attached(text, lambda file: f"[attached {file.path} · {len(file.text):,} characters{file.cut}]")


def describe(attachments: list[Attachment]) -> tuple[str, bool]:
    """One line for the operator (and whether something went wrong): what was attached, cut or not."""
    parts: list[str] = []
    problem = False
    for item in attachments:
        if item.missing:
            parts.append(f"@{item.path}: no such file (sent as text)")
        elif item.error:
            parts.append(f"@{item.path}: not attached: {item.error}")
            problem = True
        elif item.truncated:
            parts.append(f"@{item.path}: attached its first {MAX_BYTES:,} of {item.size:,} bytes (the cap)")
            problem = True
        else:
            parts.append(f"@{item.path}: attached ({item.size:,} bytes)")
    return "; ".join(parts), problem


def complete_mention(roots: list[Path], partial: str, limit: int = 50) -> list[str]:
    """Paths (relative to the first root, or absolute as typed) under the roots that start with
    ``partial``; folders end with ``/``. Hidden entries only when ``partial``'s last part starts with a dot."""
    if not roots:
        return []
    folder_part, _, name_part = partial.rpartition("/")
    absolute = partial.startswith("/")
    base = Path(folder_part or "/") if absolute else roots[0] / folder_part
    inside = [str(r) for r in roots]

    def allowed(path: str, is_dir: bool) -> bool:  # in a root, or a folder on the way to one
        real = os.path.realpath(path)
        if any(real == r or real.startswith(r + os.sep) for r in inside):
            return True
        return is_dir and any(r.startswith(real.rstrip(os.sep) + os.sep) for r in inside)

    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return []
    prefix = f"{folder_part}/" if folder_part or absolute else ""
    found: list[str] = []
    for entry in entries:
        if not entry.name.startswith(name_part) or (entry.name.startswith(".") and not name_part.startswith(".")):
            continue
        is_dir = entry.is_dir()
        if allowed(entry.path, is_dir):
            found.append(prefix + entry.name + ("/" if is_dir else ""))
        if len(found) >= limit:
            break
    return found


__all__ = ["MAX_BYTES", "Attachment", "attach", "collapse_attachments", "complete_mention", "describe", "mentions"]
