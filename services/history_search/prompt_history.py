"""A workspace's prompt history: what the operator sent, for Up/Down at the prompt.

Stored in ``<workspace>/prompt_history.json`` (a ``PromptHistoryFile``), oldest first, each prompt
once (sending one again moves it to the end), at most ``CAP`` of them, the whole file replaced
atomically on each change. Before a prompt is stored, the secrets the bridge's detectors find
(private keys, JWTs, provider keys, credentials in URLs, secrets in assignments, bearer tokens) are
replaced by ``[REDACTED:<kind>]``: the history file never holds them. Paths, names and addresses
are kept — they are what makes a prompt worth recalling, and the file stays in the workspace.

An unreadable or invalid file is an empty history (it is replaced on the next prompt): recalling
old prompts is a convenience, never a reason to refuse one.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.files.atomic import atomic_write_text
from services.history_search.redaction import redact_secrets
from services.workspace.paths import PROMPT_HISTORY_FILE

if TYPE_CHECKING:
    from services.workspace.manager import Workspace

FILE_NAME = PROMPT_HISTORY_FILE
CAP = 500
MAX_PROMPT_CHARS = 20_000
"""A longer prompt (a big paste) is not kept: recalling it is not what Up is for."""


class PromptHistoryFile(BaseModel):
    """``prompt_history.json``: the prompts, oldest first."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    prompts: list[str] = Field(default_factory=list)


class PromptHistory:
    def __init__(self, path: Path, cap: int = CAP) -> None:
        self.path = Path(path)
        self.cap = cap
        self._lock = threading.Lock()

    @classmethod
    def for_workspace(cls, workspace: Workspace) -> PromptHistory:
        return cls.for_root(workspace.root)

    @classmethod
    def for_root(cls, root: Path) -> PromptHistory:
        """The history of the workspace whose folder is ``root``."""
        return cls(Path(root) / FILE_NAME)

    def prompts(self) -> list[str]:
        """The stored prompts, oldest first (empty when the file is missing or unreadable)."""
        try:
            raw = self.path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return []
        except (OSError, UnicodeDecodeError):
            return []
        try:
            return PromptHistoryFile.model_validate(json.loads(raw)).prompts[-self.cap :]
        except (ValueError, ValidationError):
            return []

    def record(self, prompt: str) -> list[str]:
        """Store ``prompt`` (secrets redacted, moved to the end if already there); the new history."""
        text = prompt.strip()
        if not text or len(text) > MAX_PROMPT_CHARS:
            return self.prompts()
        text = redact_secrets(text)
        with self._lock:
            prompts = [p for p in self.prompts() if p != text]
            prompts.append(text)
            prompts = prompts[-self.cap :]
            document = PromptHistoryFile(prompts=prompts)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, document.model_dump_json(indent=1) + "\n")
        return prompts


__all__ = ["CAP", "FILE_NAME", "PromptHistory", "PromptHistoryFile", "redact_secrets"]
