"""The lasting grants of one workspace, in the operator's settings store (``$ARIES_HOME/settings.json``,
``services.settings.operator``: outside every workspace, never exported, written atomically under a
file lock).

A grant is keyed by the workspace's *identity* (:func:`identity`): its folder's device and inode and
its ``created_at``, hashed. A workspace deleted and made again, or replaced by ``import --force`` (a new
folder renamed into place), has another identity and starts with no grants; the old ones stay in the
file, inert, until revoked (``aries grants`` lists only the workspace's own).

``GrantStore.find`` is what the gateway asks when the policy says ``confirm``: the first live grant
(not expired, by ``services.clock``) whose pattern covers the call; ``used`` counts it.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.clock import format_ts, utc_now
from services.errors import AriesError, InvalidInput, NotFound
from services.grants.matcher import matches
from services.grants.pattern import RUNS_ITS_ARGUMENTS, within, words
from services.hashing import sha256_hex
from services.settings.operator import (
    GrantOrigin,
    GrantPattern,
    LastingGrant,
    OperatorSettings,
    WorkspaceIdentity,
    load_settings,
    settings_path,
    update_settings,
)

if TYPE_CHECKING:
    from services.workspace.manager import Workspace

TOOL_CALL_MARKER = "ARIES_TOOL_CALL"
"""Set in the environment of every tool subprocess: ``aries grants add`` refuses to run under it."""

RUNS_FOLDER_CODE: dict[str, str] = {
    "pytest": "conftest.py and the test files",
    "py.test": "conftest.py and the test files",
    "make": "the Makefile",
    "gmake": "the Makefile",
    "npm": "package.json scripts",
    "pnpm": "package.json scripts",
    "yarn": "package.json scripts",
    "tox": "tox.ini and setup code",
    "nox": "noxfile.py",
    "cargo": "build.rs and the crate's code",
    "go": "the package's code and its tests",
    "just": "the justfile",
    "rake": "the Rakefile",
    "gradle": "the build scripts",
    "mvn": "pom.xml plugins",
    "pre-commit": ".pre-commit-config.yaml hooks",
}
"""Programs that run code found in the folder they run in (what a lasting write grant could plant)."""

_DURATION = re.compile(r"([0-9]+)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def identity(workspace: Workspace) -> WorkspaceIdentity:
    """The workspace's identity (its folder's device and inode, and its ``created_at``)."""
    root = Path(os.path.realpath(workspace.root))
    info = root.stat()
    try:
        created = str(workspace.meta.get("created_at", "")) if workspace.meta_path.exists() else ""
    except AriesError:  # a workspace.yaml that does not read: the folder alone identifies it
        created = ""
    digest = sha256_hex(f"{root}\0{info.st_dev}\0{info.st_ino}\0{created}")
    return WorkspaceIdentity(path=str(root), key=digest[:32], name=workspace.name)


def parse_expiry(text: str) -> timedelta:
    """``7d``, ``12h``, ``30m``, ``2w``: a duration (InvalidInput in one line otherwise)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or int(match.group(1)) <= 0:
        raise InvalidInput(f"expiry {text!r} is not a duration like 30m, 12h, 7d or 2w")
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


def _now() -> datetime:
    return datetime.strptime(utc_now(), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def expired(grant: LastingGrant, now: datetime | None = None) -> bool:
    if grant.expires_at is None:
        return False
    moment = datetime.strptime(grant.expires_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return (now or _now()) >= moment


def new_grant_id() -> str:
    """A grant id: ``g`` and 6 hex digits (session grants use the same space, ``services.grants.session``)."""
    return f"g{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Found:
    grant: LastingGrant
    reason: str


class GrantStore:
    """The lasting grants of one workspace identity, read from the store on every question."""

    def __init__(self, workspace: WorkspaceIdentity, path: Path | None = None) -> None:
        self.workspace = workspace
        self.path = path or settings_path()

    @classmethod
    def for_workspace(cls, workspace: Workspace) -> GrantStore | None:
        """The store of ``workspace``; None for an ephemeral one (nothing lasts there)."""
        if workspace.ephemeral:
            return None
        try:
            return cls(identity(workspace))
        except OSError:  # the folder is gone: nothing can be granted to it
            return None

    def _mine(self, grant: LastingGrant) -> bool:
        return grant.workspace.key == self.workspace.key

    def list(self) -> list[LastingGrant]:
        return [g for g in load_settings(self.path).grants if self._mine(g)]

    def find(
        self, tool_id: str, facts: Mapping[str, Any], args: Mapping[str, Any], roots: Sequence[Path]
    ) -> Found | None:
        now = _now()
        for grant in self.list():
            if grant.tool_id != tool_id or expired(grant, now):
                continue
            verdict = matches(grant.pattern, facts, args, roots)
            if verdict:
                return Found(grant, verdict.reason)
        return None

    def add(
        self, tool_id: str, pattern: GrantPattern, origin: GrantOrigin, *, expires: timedelta | None = None
    ) -> LastingGrant:
        """Store a grant (the same pattern for the same tool again: the existing one, its expiry renewed)."""
        expires_at = format_ts(_now() + expires) if expires is not None else None
        made: list[LastingGrant] = []

        def change(settings: OperatorSettings) -> OperatorSettings:
            grants = list(settings.grants)
            for i, grant in enumerate(grants):
                if self._mine(grant) and grant.tool_id == tool_id and grant.pattern == pattern:
                    grants[i] = grant.model_copy(update={"expires_at": expires_at})
                    made.append(grants[i])
                    return settings.model_copy(update={"grants": grants})
            taken = {g.id for g in grants}
            grant_id = next(i for i in iter(new_grant_id, None) if i not in taken)
            grant = LastingGrant(
                id=grant_id,
                workspace=self.workspace,
                tool_id=tool_id,
                pattern=pattern,
                origin=origin,
                expires_at=expires_at,
            )
            made.append(grant)
            return settings.model_copy(update={"grants": [*grants, grant]})

        update_settings(change, self.path)
        return made[0]

    def revoke(self, grant_id: str) -> LastingGrant:
        """Remove grant ``grant_id`` of this workspace (NotFound in one line)."""
        gone: list[LastingGrant] = []

        def change(settings: OperatorSettings) -> OperatorSettings:
            kept = []
            for grant in settings.grants:
                if grant.id == grant_id and self._mine(grant):
                    gone.append(grant)
                else:
                    kept.append(grant)
            return settings.model_copy(update={"grants": kept})

        update_settings(change, self.path)
        if not gone:
            raise NotFound(f"no grant {grant_id} in this workspace; `grants` lists them")
        return gone[0]

    def used(self, grant_id: str) -> None:
        """Count one call the grant approved."""

        def change(settings: OperatorSettings) -> OperatorSettings:
            grants = [
                g.model_copy(update={"uses": g.uses + 1, "last_used_at": utc_now()})
                if g.id == grant_id and self._mine(g)
                else g
                for g in settings.grants
            ]
            return settings.model_copy(update={"grants": grants})

        update_settings(change, self.path)


def runs_code_unasked(grants: Sequence[LastingGrant]) -> dict[str, str]:
    """Grant id → why it combines with another into running code unasked: a lasting write grant on a
    folder (or file) where a granted program runs code it finds (``pytest`` → ``conftest.py``), or a
    granted program that runs its arguments."""
    notes: dict[str, str] = {}
    writes = [g for g in grants if g.pattern.kind == "path" and _writes(g.tool_id)]
    for grant in grants:
        pattern = grant.pattern
        if pattern.kind != "argv" or not pattern.argv:
            continue
        program = pattern.argv[0]
        if program in RUNS_ITS_ARGUMENTS:
            notes[grant.id] = f"{program} runs its arguments as code"
        what = RUNS_FOLDER_CODE.get(program)
        if what is None or pattern.cwd is None:
            continue
        for write in writes:
            folder = write.pattern.path or ""
            if within(pattern.cwd, folder) or within(folder, pattern.cwd):
                where = f"{folder}/" if write.pattern.folder else folder
                why = f"{program} runs {what} in {pattern.cwd}, which a lasting {write.tool_id} grant on {where} "
                notes[grant.id] = why + "lets tools write unasked"
                notes[write.id] = (
                    f"{write.tool_id} may write {where} unasked, where a lasting grant runs {program} ({what})"
                )
    return notes


def combined_warning(tool_id: str, pattern: GrantPattern, existing: Sequence[LastingGrant]) -> str | None:
    """How a grant of ``pattern`` would combine with ``existing`` into running code unasked (None: it would not)."""
    probe = LastingGrant(
        id="(this one)",
        workspace=WorkspaceIdentity(path="", key=""),
        tool_id=tool_id,
        pattern=pattern,
        origin=GrantOrigin(by="approval", at=""),
    )
    return runs_code_unasked([*existing, probe]).get(probe.id)


def _writes(tool_id: str) -> bool:
    return tool_id.startswith("builtin:fs:") and not tool_id.endswith(("read_text", "list_dir", "stat", "search"))


def describe(grant: LastingGrant) -> dict[str, Any]:
    """A grant as ``grants --json`` and ``/grants`` show it."""
    origin = grant.origin
    return {
        "id": grant.id,
        "scope": "workspace",
        "tool_id": grant.tool_id,
        "pattern": words(grant.pattern),
        "executable": grant.pattern.executable,
        "cwd": grant.pattern.cwd,
        "origin": {"by": origin.by, "at": origin.at, "call_id": origin.call_id, "asked_by": origin.asked_by},
        "uses": grant.uses,
        "last_used_at": grant.last_used_at,
        "expires_at": grant.expires_at,
        "expired": expired(grant),
    }


__all__ = [
    "RUNS_FOLDER_CODE",
    "TOOL_CALL_MARKER",
    "combined_warning",
    "Found",
    "GrantStore",
    "describe",
    "expired",
    "identity",
    "new_grant_id",
    "parse_expiry",
    "runs_code_unasked",
]
