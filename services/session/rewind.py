"""Rewind, one audited step: the conversation back to the end of a turn, and the files with it.

:func:`plan_rewind` says what a rewind to turn N (or a checkpoint's name) would do, from the
transcript alone: every file a tool of Aries's wrote, patched, restored or deleted in a turn that
the rewind puts away (or, for the rewind of a rewind, brings back) gets the content it had at the end
of turn N, read from the snapshots ``/undo`` keeps (``services.tools.snapshots``). A file whose
content is not what Aries left there (changed outside Aries since) is listed with its diff and left
as it is unless the operator includes it (``include_changed``). Shell commands and MCP tools in the
turns put away are listed as changes Aries cannot put back.

:func:`apply_rewind` does it, after the operator agreed to the whole list (one approval): each file
is an ordinary governed call through the session's gateway (``builtin:fs:write_text``; a removal is a
``builtin:fs:apply_patch`` that deletes it), so the policy's path rules hold, each file has its own
audit row and its own snapshots (a rewind's file changes can be undone call by call as well).
It is journalled: the journal (:class:`RewindJournal`, written atomically before the first file)
holds, for each file, its content before the rewind (kept as an artifact) and what the rewind puts
there; the transcript's ``rewind`` entry is the commit point, after the last file. Killed between,
the next start (``services.session.rewind_journal.recover_rewind``) sees a journal without its
entry and rolls every file back: never half of each. Killed after the entry, it only removes the journal.

Which turns are in force, and pins going with their turns: :mod:`services.conversation.timeline`.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.conversation.timeline import rewind_fields, timeline_of, turn_number
from services.errors import InvalidInput, NotFound
from services.files.crashpoints import crash_point
from services.hashing import sha256_hex
from services.session.rewind_journal import JOURNAL_NAME, journal_model, journal_path, roll_back

if TYPE_CHECKING:
    from services.session.session import Session
    from services.workspace.manager import Workspace

__all__ = [
    "FAULT_VARIABLE",
    "JOURNAL_NAME",
    "FileChange",
    "RewindPlan",
    "apply_rewind",
    "apply_rewind_async",
    "plan_rewind",
]

FAULT_VARIABLE = "ARIES_REWIND_FAULT"
"""Crash points (``services.files.crashpoints``): ``journal`` (written, no file yet), ``file1``,
``file2``… (after that many files), ``entry`` (after the transcript's entry, journal not removed)."""
WRITERS = ("builtin:fs:write_text", "builtin:fs:apply_patch", "builtin:fs:restore")


@dataclass(frozen=True)
class State:
    """A file's content at some point: absent, or the content stored as artifact ``artifact``."""

    exists: bool
    sha256: str | None = None
    artifact: str | None = None


ABSENT = State(False)


@dataclass
class FileChange:
    path: str
    rel: str
    action: str  # restore | recreate | remove
    target: State
    expected: State  # what Aries left there
    now_sha256: str | None
    changed_outside: bool
    diff: str  # the rewind's change, or (changed outside) what changed since Aries left it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RewindPlan:
    conversation_id: str
    to_turn: str
    from_turn: str | None
    away: list[int]  # turns put away
    back: list[int]  # turns brought back (the rewind of a rewind)
    files: list[FileChange] = field(default_factory=list)
    irreversible: list[str] = field(default_factory=list)

    @property
    def to(self) -> int:
        return turn_number(self.to_turn)

    @property
    def changed(self) -> list[FileChange]:
        return [change for change in self.files if change.changed_outside]

    def applied(self, include_changed: bool) -> list[FileChange]:
        return [change for change in self.files if include_changed or not change.changed_outside]

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "to": self.to,
            "to_turn": self.to_turn,
            "from_turn": self.from_turn,
            "away": self.away,
            "back": self.back,
            "files": [change.to_dict() for change in self.files],
            "irreversible": self.irreversible,
        }

    def lines(self) -> list[str]:
        """The plan as the operator reads it before agreeing (one line a file, then what cannot be undone)."""
        head = f"Rewind to the end of turn {self.to}"
        if self.away:
            head += f": turn(s) {', '.join(map(str, self.away))} put away (kept; /rewind brings them back)"
        if self.back:
            head += f"; turn(s) {', '.join(map(str, self.back))} brought back"
        out = [head + "."]
        for change in self.files:
            mark = "changed outside Aries — left as it is" if change.changed_outside else change.action
            out.append(f"  {change.rel}: {mark}")
        out.extend(f"  not reversible: {item}" for item in self.irreversible)
        if not self.files:
            out.append("  no file to put back")
        return out


@dataclass(frozen=True)
class _Change:
    order: int
    turn: str
    path: str
    before: State
    after: State


def _changes(entries: list[dict[str, Any]]) -> list[_Change]:
    """Every file change a tool made, in order, with its content before and after, and the turn it
    belongs to: the model's calls to their turn, the operator's (``/fs write``, ``/undo``) to the turn
    that was the last in force when they ran; a rewind's own writes to none (they are what it undoes)."""
    found: list[_Change] = []
    head: str | None = None
    for order, entry in enumerate(entries):
        head = _head_after(head, entry)
        turn = entry.get("turn_id") or head
        if entry.get("role") != "tool" or not turn or entry.get("status") != "success":
            continue
        if entry.get("tool_name") not in WRITERS or entry.get("source") == "rewind":
            continue
        links = [a for a in entry.get("artifacts") or [] if isinstance(a, dict)]
        afters = {str(a.get("path")): a for a in links if a.get("role") == "after"}
        for link in links:
            if link.get("role") != "snapshot" or not link.get("path"):
                continue
            path = str(link["path"])
            existed = bool(link.get("existed"))
            before = (
                State(True, str(link.get("hash", "")).removeprefix("sha256:"), str(link["id"])) if existed else ABSENT
            )
            after_sha = link.get("after_sha256")
            after_link = afters.get(path)
            after = State(True, str(after_sha), str(after_link["id"]) if after_link else None) if after_sha else ABSENT
            found.append(_Change(order, str(turn), path, before, after))
    return found


def _head_after(head: str | None, entry: dict[str, Any]) -> str | None:
    """The turn in force after ``entry``: a turn's first entry begins it, a rewind moves back to its turn."""
    if entry.get("kind") == "rewind" and isinstance(entry.get("to_turn"), str):
        return str(entry["to_turn"])
    turn = entry.get("turn_id")
    return str(turn) if turn and entry.get("role") == "user" else head


def _state(changes: list[_Change], path: str, turns: set[str]) -> State:
    """``path`` at the end of the last of ``turns``: what the last change in them left, else what it
    held before Aries first changed it."""
    mine = [change for change in changes if change.path == path]
    within = [change for change in mine if change.turn in turns]
    return within[-1].after if within else mine[0].before


def plan_rewind(session: Session, reference: str) -> RewindPlan:
    """What rewinding the open conversation to ``reference`` (a turn number or a checkpoint) would do."""
    conversation = session.conversation
    entries = conversation.read().entries
    timeline = timeline_of(entries)
    target = timeline.resolve(reference)
    if target == timeline.head:
        raise InvalidInput(f"the conversation is at the end of turn {turn_number(target)} already; nothing to rewind")
    here, there = timeline.lineage, timeline.chain(target)
    away, back = [t for t in here if t not in there], [t for t in there if t not in here]
    moved = set(away) | set(back)
    changes = _changes(entries)
    plan = RewindPlan(
        conversation.conversation_id,
        target,
        timeline.head,
        [turn_number(t) for t in away],
        [turn_number(t) for t in back],
    )
    paths = list(dict.fromkeys(change.path for change in changes if change.turn in moved))
    for path in paths:
        change = _file_change(
            session.workspace, path, _state(changes, path, set(here)), _state(changes, path, set(there))
        )
        if change is not None:
            plan.files.append(change)
    head: str | None = None
    for entry in entries:
        head = _head_after(head, entry)
        turn = entry.get("turn_id") or head
        if entry.get("role") == "tool" and turn in moved and _irreversible(entry):
            what = f"{entry.get('tool_name')} ({str(entry.get('content'))[:80]})"
            plan.irreversible.append(f"turn {turn_number(turn)}: {what}")
    return plan


def _irreversible(entry: dict[str, Any]) -> bool:
    """A shell command, an MCP tool, or a file change of which no snapshot was kept (a file too large)."""
    name = str(entry.get("tool_name") or "")
    if name in WRITERS and entry.get("status") == "success":
        return not any(isinstance(a, dict) and a.get("role") == "snapshot" for a in entry.get("artifacts") or [])
    return name.startswith("builtin:shell:") or not name.startswith("builtin:")


def _content(workspace: Workspace, state: State) -> bytes | None:
    if not state.exists:
        return None
    if state.artifact is None:
        raise NotFound("a snapshot this rewind needs was not kept (the file was too large); nothing was changed")
    registry = workspace.artifacts
    data = registry.read_bytes(registry.get(state.artifact))
    if state.sha256 and sha256_hex(data) != state.sha256:
        raise InvalidInput(f"the stored snapshot {state.artifact} does not match its hash; nothing was changed")
    return data


def _file_change(workspace: Workspace, path: str, expected: State, target: State) -> FileChange | None:
    from services.tools.snapshots import unified_diff

    if expected.sha256 == target.sha256 and expected.exists == target.exists:
        return None
    file = Path(path)
    now = file.read_bytes() if file.is_file() else None
    now_sha = None if now is None else sha256_hex(now)
    if now_sha == target.sha256 and (now is not None) == target.exists:
        return None  # already as it was at the end of that turn
    try:
        rel = file.relative_to(workspace.root).as_posix()
    except ValueError:
        rel = path
    outside = now_sha != expected.sha256
    if outside:
        diff = unified_diff(_content(workspace, expected), now, rel)
    else:
        diff = unified_diff(now, _content(workspace, target), rel)
    action = "remove" if not target.exists else ("restore" if now is not None else "recreate")
    return FileChange(path, rel, action, target, expected, now_sha, outside, diff)


# -- applying it --------------------------------------------------------------------------------------
def _write_journal(session: Session, plan: RewindPlan, changes: list[FileChange], rewind_id: str) -> None:
    from services.files.atomic import atomic_write_text

    files = []
    for change in changes:
        artifact = None
        now = Path(change.path).read_bytes() if change.now_sha256 is not None else None
        if now is not None:
            kept, _ = session.workspace.artifacts.add_bytes(
                now, Path(change.rel).name + ".before-rewind", description=f"{change.rel} before rewind {rewind_id}"
            )
            artifact = kept.id
        files.append(
            {
                "path": change.path,
                "before_sha256": change.now_sha256,
                "before_artifact": artifact,
                "target_sha256": change.target.sha256 if change.target.exists else None,
            }
        )
    journal = journal_model()(
        rewind_id=rewind_id, pid=os.getpid(), conversation_id=plan.conversation_id, to_turn=plan.to_turn, files=files
    )
    path = journal_path(session.workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, journal.model_dump_json(indent=1) + "\n")


def _file_call(session: Session, change: FileChange) -> tuple[str, dict[str, Any]]:
    """The gateway call that puts ``change``'s file back: a write, or a patch that deletes it."""
    from services.tools.snapshots import unified_diff

    if change.target.exists:
        data = _content(session.workspace, change.target) or b""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"{change.rel} is not UTF-8 text; the file tools cannot write it back") from None
        return "builtin:fs:write_text", {"path": change.path, "text": text, "create_dirs": True}
    now = Path(change.path).read_bytes()
    return "builtin:fs:apply_patch", {"patch": unified_diff(now, None, change.rel)}


def _checked(change: FileChange, result: Any) -> None:
    if not result.ok:
        reason = result.error.message if result.error is not None else result.status
        raise InvalidInput(f"{change.rel}: {reason}; the rewind was rolled back")


def _begin(session: Session, plan: RewindPlan, include_changed: bool) -> tuple[list[FileChange], str]:
    from services.conversation.hold import check_writer

    conversation = session.conversation  # another live Aries holding it: refused before any file changes
    check_writer(conversation.transcript.directory, conversation.conversation_id)
    changes = plan.applied(include_changed)
    rewind_id = f"rw-{secrets.token_hex(6)}"
    if changes:
        _write_journal(session, plan, changes, rewind_id)
    crash_point(FAULT_VARIABLE, "journal")
    return changes, rewind_id


def apply_rewind(session: Session, plan: RewindPlan, *, include_changed: bool = False) -> dict[str, Any]:
    """Do ``plan`` (the operator agreed to it): the files, then the transcript's ``rewind`` entry. For
    callers without an event loop (the CLI); the TUI awaits :func:`apply_rewind_async`."""
    from services.tools.calls import approve_all

    changes, rewind_id = _begin(session, plan, include_changed)
    try:
        for number, change in enumerate(changes, start=1):
            tool, args = _file_call(session, change)
            _checked(change, session.call_tool_sync(tool, args, approver=approve_all, source="rewind"))
            crash_point(FAULT_VARIABLE, f"file{number}")
        done = _commit(session, plan, changes, rewind_id)
    except BaseException:
        roll_back(session.workspace)
        raise
    return _finish(session, done)


async def apply_rewind_async(session: Session, plan: RewindPlan, *, include_changed: bool = False) -> dict[str, Any]:
    """:func:`apply_rewind` on the caller's event loop (the gateway's calls are awaited there)."""
    import asyncio

    from services.tools.calls import approve_all

    changes, rewind_id = await asyncio.to_thread(_begin, session, plan, include_changed)
    try:
        for number, change in enumerate(changes, start=1):
            tool, args = await asyncio.to_thread(_file_call, session, change)
            _checked(change, await session.call_tool(tool, args, approver=approve_all, source="rewind"))
            crash_point(FAULT_VARIABLE, f"file{number}")
        done = await asyncio.to_thread(_commit, session, plan, changes, rewind_id)
    except BaseException:
        await asyncio.to_thread(roll_back, session.workspace)
        raise
    return _finish(session, done)


def _commit(session: Session, plan: RewindPlan, changes: list[FileChange], rewind_id: str) -> dict[str, Any]:
    """The commit point: the transcript's ``rewind`` entry (if it cannot be written, the files are rolled back)."""
    files = [{"path": c.rel, "action": c.action} for c in changes]
    left = [c.rel for c in plan.files if c not in changes]
    text = f"Rewound to the end of turn {plan.to}" + (f"; turn(s) {_list(plan.away)} put away" if plan.away else "")
    text += f"; turn(s) {_list(plan.back)} brought back" if plan.back else ""
    text += f"; {len(files)} file(s) put back" + (f"; left as changed outside Aries: {', '.join(left)}" if left else "")
    fields = rewind_fields(plan.to_turn, plan.from_turn, plan.away, back=plan.back, files=files, left=left)
    session.conversation.mark(text + ".", {**fields, "rewind_id": rewind_id})
    return {"rewind_id": rewind_id, "to": plan.to, "away": plan.away, "back": plan.back, "files": files, "left": left}


def _finish(session: Session, done: dict[str, Any]) -> dict[str, Any]:
    """After the entry: the journal goes (killed before, the next start sees the entry and removes it)."""
    crash_point(FAULT_VARIABLE, "entry")
    journal_path(session.workspace).unlink(missing_ok=True)
    return done


def _list(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers))
