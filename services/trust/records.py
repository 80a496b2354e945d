"""Trust records and the trust state of a workspace.

A workspace the operator created is their own: what is in its folder is in force, as it always was.
A workspace that arrived from outside (``aries workspace import``) has a trust record, kept *outside*
every workspace folder, in ``<workspaces>/.trust/<name>.json`` (a bundle cannot write there, and the
tools' path rules keep it out of reach)::

    {"name": "...", "origin": {"kind": "bundle", "file": "...", "sha256": "...", "at": "..."},
     "fingerprint": null | "<sha256 of the authority in force when the operator trusted it>",
     "trusted_by": "...", "trusted_at": "...", "snapshot": {...what was trusted...},
     "history": [{"event": "imported" | "trusted" | "edited", "at": "...", "by": "...", ...}]}

The state (:func:`workspace_trust`):

* ``own`` — no record, nothing quarantined;
* ``untrusted`` — imported authority waits in ``.quarantine/`` (inert) for the operator's review;
* ``trusted`` — the operator trusted it, and what is in force has the fingerprint they trusted;
* ``changed`` — what is in force is not what the operator trusted (a hand edit, a sync tool, a
  crash in the middle of trusting): the session ignores the workspace's authority settings (the
  shipped default policy, shipped profiles, no model or cloud setting) until it is reviewed again.
  Changes the operator makes *through Aries* (``/model``, ``/profile use``, settings) refresh the
  fingerprint (:func:`operator_edit`).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from services.trust.authority import (
    QUARANTINE_DIR,
    Authority,
    in_force,
    merged,
    pending,
    quarantine_project,
    restore,
)
from services.workspace.paths import AGENTS_FILE, COMMANDS_DIR, POLICY_FILE, PROFILES_DIR, TRUST_DIR, WORKSPACE_FILE

PENDING_FINGERPRINT = "trusting"
"""Written before a trust's files move back, so a crash in between leaves ``changed``, never an
unrecorded authority in force."""

Status = Literal["own", "untrusted", "trusted", "changed"]


@dataclass
class TrustRecord:
    name: str
    origin: dict[str, Any] | None = None
    fingerprint: str | None = None
    trusted_by: str | None = None
    trusted_at: str | None = None
    snapshot: dict[str, Any] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    folder: list[int] | None = None
    """``[st_dev, st_ino]`` of the workspace folder the record is about: a folder deleted by hand and
    created again under the same name is another workspace, which the record does not concern."""

    def to_json(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "name": self.name,
            "origin": self.origin,
            "fingerprint": self.fingerprint,
            "trusted_by": self.trusted_by,
            "trusted_at": self.trusted_at,
            "snapshot": self.snapshot,
            "history": self.history,
        }


class BadRecord(Exception):
    """A trust record that cannot be read: the workspace is treated as changed (fail closed)."""


@dataclass(frozen=True)
class TrustState:
    status: Status
    reason: str
    """One line for the header's tooltip, the CLI and the transcript."""
    pending: bool = False
    """Imported authority waits in ``.quarantine/``."""

    @property
    def in_force(self) -> bool:
        """Whether the authority settings in the workspace folder may be used."""
        return self.status != "changed"

    @property
    def needs_review(self) -> bool:
        return self.status in ("untrusted", "changed")

    @property
    def label(self) -> str:
        return {"untrusted": "untrusted", "changed": "changed since trusted"}.get(self.status, "")


OWN = TrustState("own", "created here: its settings are the operator's own")


def record_path(workspace_root: Path) -> Path:
    return workspace_root.parent / TRUST_DIR / f"{workspace_root.name}.json"


def read_record(workspace_root: Path) -> TrustRecord | None:
    path = record_path(workspace_root)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadRecord(f"its trust record {path} cannot be read ({exc.strerror})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ValueError("not a trust record")
        history = data.get("history") or []
        folder = data.get("folder")
        if isinstance(folder, list) and folder != _folder_id(workspace_root):
            return None  # about another folder of this name, deleted since
        return TrustRecord(
            name=data["name"],
            origin=data.get("origin") if isinstance(data.get("origin"), dict) else None,
            fingerprint=data.get("fingerprint") if isinstance(data.get("fingerprint"), str) else None,
            trusted_by=data.get("trusted_by"),
            trusted_at=data.get("trusted_at"),
            snapshot=data.get("snapshot") if isinstance(data.get("snapshot"), dict) else None,
            history=[h for h in history if isinstance(h, dict)] if isinstance(history, list) else [],
            folder=folder if isinstance(folder, list) else None,
        )
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRecord(f"its trust record {path} is damaged ({exc})") from None


def _folder_id(workspace_root: Path) -> list[int] | None:
    try:
        info = workspace_root.stat()
    except OSError:
        return None
    return [info.st_dev, info.st_ino]


def write_record(workspace_root: Path, record: TrustRecord, *, folder: Path | None = None) -> None:
    """Write ``record`` (for the folder ``folder``, default ``workspace_root``: an import writes it for
    its staging folder, which a rename then makes the workspace)."""
    from services.files.atomic import atomic_write_text

    record.folder = _folder_id(folder or workspace_root)
    path = record_path(workspace_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def drop_record(workspace_root: Path) -> None:
    """Forget the record of a workspace that is deleted, or created anew under the same name."""
    with contextlib.suppress(FileNotFoundError):
        record_path(workspace_root).unlink()


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container): the uid says who
        return f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"


def _now() -> str:
    from services.clock import utc_now

    return utc_now()


def _origin_text(record: TrustRecord | None) -> str:
    origin = (record.origin or {}) if record is not None else {}
    if origin.get("kind") == "bundle":
        file = Path(str(origin.get("file", "?"))).name
        return f"imported from {file} on {str(origin.get('at', '?'))[:10]}"
    return "imported"


def workspace_trust(workspace_root: Path, *, ephemeral: bool = False) -> TrustState:
    """The trust state of the workspace folder ``workspace_root`` (cheap for the operator's own:
    two ``stat`` calls)."""
    if ephemeral:
        return OWN
    try:
        record = read_record(workspace_root)
    except BadRecord as exc:
        waiting = (workspace_root / QUARANTINE_DIR).is_dir()
        return TrustState("changed", f"{exc}; review it: aries workspace trust {workspace_root.name}", waiting)
    if record is not None and record.fingerprint is None:
        # Upgrade: imported before commands/ and AGENTS.md were authority, never trusted — what arrived
        # of them as data joins the quarantine before anything reads it (a no-op once done).
        quarantine_project(workspace_root)
    waiting = (workspace_root / QUARANTINE_DIR).is_dir()
    if record is not None and record.fingerprint is not None:
        current = in_force(workspace_root)
        if current.fingerprint() != record.fingerprint:
            what = _what_changed(record, current)
            when = str(record.trusted_at or "?")[:10]
            return TrustState(
                "changed",
                f"{what} changed since it was trusted on {when}: its settings are not in force until you review "
                f"them (aries workspace trust {workspace_root.name})",
                waiting,
            )
    if waiting:
        held = pending(workspace_root) or Authority()
        return TrustState(
            "untrusted",
            f"{_origin_text(record)}; quarantined until you trust it: {'; '.join(held.summary()) or 'nothing'}",
            True,
        )
    if record is not None and record.fingerprint is not None:
        return TrustState("trusted", f"{_origin_text(record)}; trusted by {record.trusted_by} on {record.trusted_at}")
    return OWN


def _what_changed(record: TrustRecord, current: Authority) -> str:
    if record.fingerprint == PENDING_FINGERPRINT:
        return "trusting it was interrupted: its settings"
    before = Authority.from_json(record.snapshot or {})
    names = []
    if before.policy != current.policy:
        names.append(POLICY_FILE)
    for name in sorted(set(before.profiles) | set(current.profiles)):
        if before.profiles.get(name) != current.profiles.get(name):
            names.append(f"{PROFILES_DIR}/{name}")
    changed = sorted(
        n for n in set(before.commands) | set(current.commands) if before.commands.get(n) != current.commands.get(n)
    )
    project = [f"{COMMANDS_DIR}/{name}" for name in changed]
    if before.instructions != current.instructions:
        project.append(AGENTS_FILE)
    if project and "commands" not in (record.snapshot or {}):  # trusted by an Aries that did not review them
        project[-1] += " (reviewed as settings since this version of Aries)"
    names += project
    if before.settings != current.settings:
        names.append(WORKSPACE_FILE)
    if not names and current.has_hooks():  # trusted before Aries ran hooks (Authority.fingerprint)
        return "its policy's hooks (which Aries now runs)"
    return ", ".join(names) or "its settings"


# -- changes ---------------------------------------------------------------------------------------
def record_import(workspace_root: Path, staging: Path, origin: dict[str, Any], quarantined: Authority) -> None:
    """The record of a workspace that is about to appear from a bundle: written before it appears,
    for the staging folder that becomes it."""
    record = TrustRecord(name=workspace_root.name, origin=origin)
    record.history.append({"event": "imported", "at": _now(), "by": _who(), "quarantined": quarantined.summary()})
    write_record(workspace_root, record, folder=staging)


@dataclass(frozen=True)
class TrustReport:
    name: str
    fingerprint: str
    trusted_by: str
    trusted_at: str
    restored: list[str]


def review_authority(workspace_root: Path) -> tuple[Authority, Authority | None]:
    """``(what would be in force after trusting, what was trusted before or None)``."""
    try:
        record = read_record(workspace_root)
    except BadRecord:
        record = None
    before = Authority.from_json(record.snapshot) if record is not None and record.snapshot is not None else None
    return merged(in_force(workspace_root), pending(workspace_root)), before


def trust(workspace_root: Path) -> TrustReport:
    """Put the workspace's quarantined authority in force and record that the operator trusted what is
    now in force (the caller holds the workspace's lease)."""
    try:
        record = read_record(workspace_root)
    except BadRecord:
        record = None
    record = record or TrustRecord(name=workspace_root.name)
    waiting = pending(workspace_root)
    # First the record says "being trusted", so a crash while the files move leaves ``changed``.
    record.fingerprint = PENDING_FINGERPRINT
    write_record(workspace_root, record)
    restore(workspace_root)
    now, who = _now(), _who()
    current = in_force(workspace_root)
    record.fingerprint = current.fingerprint()
    record.snapshot = current.to_json()
    record.trusted_by, record.trusted_at = who, now
    record.history.append({"event": "trusted", "at": now, "by": who, "fingerprint": record.fingerprint})
    write_record(workspace_root, record)
    return TrustReport(workspace_root.name, record.fingerprint, who, now, waiting.summary() if waiting else [])


@contextlib.contextmanager
def operator_edit(workspace_root: Path, *, ephemeral: bool = False) -> Iterator[None]:
    """Around a change the operator makes through Aries (a setting, the active profile): a trusted
    workspace stays trusted with its new fingerprint; an untrusted or changed one stays as it was."""
    if ephemeral or not record_path(workspace_root).is_file():
        yield
        return
    before = workspace_trust(workspace_root)
    yield
    if before.status != "trusted":
        return
    try:
        record = read_record(workspace_root)
    except BadRecord:
        return
    if record is None:
        return
    current = in_force(workspace_root)
    record.fingerprint = current.fingerprint()
    record.snapshot = current.to_json()
    record.history.append({"event": "edited", "at": _now(), "by": _who(), "fingerprint": record.fingerprint})
    write_record(workspace_root, record)
