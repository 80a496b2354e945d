"""The rewind's journal: written before a rewind's first file, removed after its transcript entry.

A journal left behind means a rewind was killed halfway (or its process died): :func:`recover_rewind`
runs when a workspace is opened (``services.session.opening``) and finishes it — the transcript has
the rewind's entry, so only the journal goes — or rolls every file back to what it held before the
rewind (kept as an artifact), never leaving half of each. A journal whose process is still alive is
another Aries rewinding: it is left alone. The rewind itself: :mod:`services.session.rewind`.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.hashing import sha256_hex

if TYPE_CHECKING:
    from services.workspace.manager import Workspace

__all__ = ["JOURNAL_FORMAT", "JOURNAL_NAME", "journal_model", "journal_path", "recover_rewind", "roll_back"]

JOURNAL_NAME = "rewind.journal.json"
JOURNAL_FORMAT = 1
ROLL_BACK_TOOL = "rewind:roll_back"
"""The audit rows' tool name for a file a rolled-back rewind put back."""


def journal_path(workspace: Workspace) -> Path:
    return workspace.transcripts_dir / JOURNAL_NAME


@cache
def journal_model() -> Any:
    from pydantic import BaseModel, ConfigDict

    class JournalFile(BaseModel):
        model_config = ConfigDict(extra="forbid")
        path: str
        before_sha256: str | None
        before_artifact: str | None
        target_sha256: str | None

    class RewindJournal(BaseModel):
        model_config = ConfigDict(extra="forbid")
        format: int = JOURNAL_FORMAT
        rewind_id: str
        pid: int
        conversation_id: str
        to_turn: str
        files: list[JournalFile]

    return RewindJournal


def roll_back(workspace: Workspace, why: str = "the rewind failed") -> list[str]:
    """Put every file of the journal back as it was before the rewind; remove the journal. The files
    that hold neither what was there nor what the rewind wrote are left, and named. Each file is one
    audit row (:func:`_audit_roll_back`), as each of the rewind's own writes was."""
    from services.files.atomic import atomic_write_bytes

    path = journal_path(workspace)
    if not path.is_file():
        return []  # nothing was begun
    journal = journal_model().model_validate_json(path.read_text(encoding="utf-8"))
    left: list[str] = []
    done: list[tuple[str, str]] = []
    for file in journal.files:
        target = Path(file.path)
        now = target.read_bytes() if target.is_file() else None
        now_sha = None if now is None else sha256_hex(now)
        if now_sha == file.before_sha256:
            continue
        if now_sha != file.target_sha256:
            left.append(file.path)
            done.append((file.path, "left: changed since the rewind wrote it"))
            continue
        if file.before_artifact is None:
            target.unlink()
            done.append((file.path, "removed: it did not exist before the rewind"))
        else:
            registry = workspace.artifacts
            atomic_write_bytes(target, registry.read_bytes(registry.get(file.before_artifact)))
            done.append((file.path, "restored: as before the rewind"))
    if done:
        _audit_roll_back(workspace, journal, done, why)
    path.unlink()
    return left


def _audit_roll_back(workspace: Workspace, journal: Any, done: list[tuple[str, str]], why: str) -> None:
    """One run (source ``rewind``, mode ``recovery``), one call row and one result row per file."""
    from services.audit.log import AuditStore
    from services.clock import utc_now
    from services.hashing import canonical_json, content_hash
    from services.tools.calls import new_id

    run_id = new_id("run")
    with AuditStore.for_workspace(workspace.root) as audit:
        audit.start_run(run_id, mode="recovery", source="rewind", workspace=workspace.name)
        for step, (file, outcome) in enumerate(done):
            call_id = new_id("call")
            now = utc_now()
            args = {"path": file, "rewind_id": journal.rewind_id, "conversation_id": journal.conversation_id}
            audit.record_call(
                call_id=call_id,
                run_id=run_id,
                step_index=step,
                tool_name=ROLL_BACK_TOOL,
                args=args,
                created_at=now,
                source="rewind",
                tier="WRITE_DESTRUCTIVE",
            )
            ok = not outcome.startswith("left")
            audit.record_result(
                call_id=call_id,
                run_id=run_id,
                status="success" if ok else "denied",
                output_json=canonical_json({"outcome": outcome}),
                error_json=None,
                decision={
                    "action": "allow" if ok else "deny",
                    "rule": "rewind.roll_back",
                    "reason": f"{why}: its files go back to what they held before it",
                    "tool_id": ROLL_BACK_TOOL,
                    "tier": "WRITE_DESTRUCTIVE",
                    "approved_by": "operator",  # the rewind the operator agreed to, undone
                },
                started_at=now,
                ended_at=utc_now(),
                duration_ms=0.0,
                input_hash=content_hash(args),
                output_hash=None,
                workspace=workspace.name,
            )
        audit.end_run(run_id)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_rewind(workspace: Workspace) -> str | None:
    """At start: finish a rewind killed halfway — a journal whose transcript entry was written is only
    removed (the rewind is complete); one without it is rolled back. One line on what was done."""
    from services.workspace.transcripts import SUFFIX, read_transcript

    path = journal_path(workspace)
    if not path.is_file():
        return None
    try:
        journal = journal_model().model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        return f"an interrupted rewind's journal {path} cannot be read ({str(exc).splitlines()[0]}); it is left there"
    if journal.pid != os.getpid() and _alive(journal.pid):
        return None  # a rewind under way in another live Aries
    transcript = workspace.transcripts_dir / f"{journal.conversation_id}{SUFFIX}"
    entries = read_transcript(transcript).entries if transcript.is_file() else []
    if any(e.get("kind") == "rewind" and e.get("rewind_id") == journal.rewind_id for e in entries):
        path.unlink()
        return f"an interrupted rewind of {journal.conversation_id} had finished; its journal is removed"
    left = roll_back(workspace, "a rewind was interrupted (its process died)")
    count = len(journal.files)
    line = f"an interrupted rewind of {journal.conversation_id} was rolled back: its {count} file(s) are as before"
    return line + (f" (left as they are, changed since: {', '.join(left)})" if left else "")
