"""Workspaces: named, isolated roots under ``$ARIES_HOME/workspaces/<name>``.

A workspace root holds ``workspace.yaml`` (name, created_at, active profile and settings, ruamel.yaml
round trip), ``transcripts/``, ``artifacts/`` and ``indexes/``; every name a workspace folder holds is
spelled once, in :mod:`services.workspace.paths` (``Workspace.paths``).

Every operation is idempotent: creating an existing workspace repairs missing parts and
changes nothing else; opening after a crash removes temp files of interrupted writes and
reports torn transcript lines without touching intact data.  Without a name, Aries uses an
ephemeral workspace in a temporary directory that is deleted on close.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.clock import utc_now
from services.errors import CorruptFile, NotFound
from services.files.atomic import remove_stale_temp_files
from services.text.names import validate_name
from services.workspace.artifacts import ArtifactRegistry
from services.workspace.leases import (
    WorkspaceBusy,
    WorkspaceLease,
    acquire_lease,
    clear_stale,
    holder_record,
    open_elsewhere,
    pid_alive,
)
from services.workspace.paths import SUBDIRS, TRUST_DIR, WorkspacePaths
from services.workspace.paths import WORKSPACE_FILE as WORKSPACE_FILE
from services.workspace.settings import DEFAULT_SETTINGS, MAX_PLAIN_BYTES, plain_settings, plain_yaml
from services.workspace.transcripts import Problem, Transcript, by_recency, iter_problems, list_conversations

__all__ = [
    "Workspace",
    "WorkspaceManager",
    "ephemeral_workspace",
    "held_lease",
    "mark_closed",
    "mark_open",
    "marker_is_live",
    "session_marker",
]


if TYPE_CHECKING:
    from services.workspace.config import WorkspaceConfig

FORMAT_VERSION = 1
EPHEMERAL_NAME = "(ephemeral)"


@dataclass
class OpenReport:
    """What opening a workspace found and repaired."""

    created: bool = False
    repaired: list[str] = field(default_factory=list)
    removed_temp_files: int = 0
    transcript_problems: list[Problem] = field(default_factory=list)
    artifact_problems: list[str] = field(default_factory=list)
    open_elsewhere: dict[str, Any] | None = None
    """The lease holder's record when another live Aries has the workspace open: then
    nothing was repaired (its writes may be in flight), problems were only reported."""


class Workspace:
    def __init__(self, root: Path, name: str, *, ephemeral: bool = False) -> None:
        self.root = Path(root)
        self.name = name
        self.ephemeral = ephemeral
        self._meta: Any = None
        self._plain_yaml = False  # _meta was read by ``plain_yaml`` (a dict, not ruamel's round-trip tree)
        self._config: WorkspaceConfig | None = None
        self._plain: dict[str, Any] | None = None  # the settings when the file has the everyday shape
        self._meta_signature: tuple[int, int, int] | None = None
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None

    # -- paths ---------------------------------------------------------------------
    @property
    def paths(self) -> WorkspacePaths:
        """Where each part of this workspace lives (the one owner of the folder's layout)."""
        return WorkspacePaths(self.root)

    @property
    def transcripts_dir(self) -> Path:
        return self.paths.transcripts

    @property
    def artifacts_dir(self) -> Path:
        return self.paths.artifacts

    @property
    def indexes_dir(self) -> Path:
        return self.paths.indexes

    @property
    def meta_path(self) -> Path:
        return self.paths.settings

    @property
    def artifacts(self) -> ArtifactRegistry:
        return ArtifactRegistry(self.root)

    # -- metadata ------------------------------------------------------------------
    @property
    def meta(self) -> Any:
        """The parsed ``workspace.yaml``; re-read when another process (the CLI beside the TUI,
        or the reverse) has replaced the file since it was read."""
        signature = self._signature()
        if self._meta is None or (signature is not None and signature != self._meta_signature):
            self._meta = self._read_meta()
            self._meta_signature = signature
        return self._meta

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            info = self.meta_path.stat()
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def _read_meta(self) -> Any:
        data = self._read_plain_yaml()
        self._plain = plain_settings(data) if data is not None else None
        self._plain_yaml = self._plain is not None
        if self._plain is None:  # not the shape Aries writes: ruamel.yaml reads it (its tree gives file:line)
            from services.files.yamlio import load_yaml

            data = load_yaml(self.meta_path)
            self._plain = plain_settings(data)
        self._config = None
        if self._plain is None:  # not the everyday shape: the full (pydantic) check names file:line
            from services.workspace.config import validate_config

            self._config = validate_config(data, self.meta_path)  # ConfigError with file:line and field
        return data

    def _read_plain_yaml(self) -> dict[str, Any] | None:
        """The file read without ruamel.yaml when it has the shape Aries writes (``plain_yaml``)."""
        try:
            raw = self.meta_path.read_bytes() if self.meta_path.stat().st_size <= MAX_PLAIN_BYTES else b""
            return plain_yaml(raw.decode("utf-8")) if raw else None
        except (OSError, UnicodeDecodeError):
            return None

    @property
    def config(self) -> WorkspaceConfig:
        """``workspace.yaml``, validated (unknown keys kept in ``model_extra``)."""
        self.meta  # noqa: B018 - re-reads the file (and so the config) if it changed on disk
        if self._config is None:
            from services.workspace.config import validate_config

            self._config = validate_config(self.meta, self.meta_path)
        return self._config

    @property
    def profile(self) -> str:
        self.meta  # noqa: B018 - re-reads the file if it changed on disk
        if self._plain is not None:
            return str(self._plain["profile"])
        return self.config.profile

    def setting(self, key: str) -> Any:
        self.meta  # noqa: B018 - re-reads the file if it changed on disk
        if self._plain is not None and key != "retrieval":
            return self._plain["settings"].get(key, DEFAULT_SETTINGS.get(key))
        settings = self.config.settings
        if key in type(settings).model_fields:
            value = getattr(settings, key)
            return value.model_dump() if hasattr(value, "model_dump") else value
        return (settings.model_extra or {}).get(key, DEFAULT_SETTINGS.get(key))

    def update(self, *, profile: str | None = None, **settings: Any) -> None:
        """Change the active profile and/or settings; validated, written atomically, comments kept.

        A value the model refuses raises ConfigError and leaves the file as it was.
        """
        import copy

        from services.files.yamlio import write_yaml
        from services.workspace.config import validate_config

        meta = copy.deepcopy(self.meta)
        if self._plain_yaml:  # read without ruamel.yaml: read again as a round trip, so comments are kept
            from services.files.yamlio import load_yaml

            meta = load_yaml(self.meta_path)
        if profile is not None:
            meta["profile"] = validate_name(profile, "profile")
        if settings:
            if meta.get("settings") is None:
                meta["settings"] = {}
            for key, value in settings.items():
                meta["settings"][key] = value
        config = validate_config(meta, self.meta_path)
        write_yaml(self.meta_path, meta)
        self._meta, self._config, self._meta_signature = meta, config, self._signature()
        self._plain, self._plain_yaml = plain_settings(meta), False

    # -- conversations -------------------------------------------------------------
    def conversations(self) -> list[Path]:
        return list_conversations(self.transcripts_dir)

    def latest_transcript(self) -> Transcript:
        """The conversation written to most recently, or a new one if there is none yet."""
        existing = by_recency(self.transcripts_dir)
        if existing:
            return Transcript(self.transcripts_dir, existing[-1].stem)
        return Transcript(self.transcripts_dir)

    def transcript(self, conversation_id: str) -> Transcript:
        """An existing conversation (NotFound when there is no such transcript)."""
        transcript = Transcript(self.transcripts_dir, conversation_id)
        if not transcript.path.is_file():
            raise NotFound(f"no conversation {conversation_id} in workspace {self.name}; see: aries history")
        return transcript

    def new_transcript(self) -> Transcript:
        return Transcript(self.transcripts_dir)

    # -- lifecycle -----------------------------------------------------------------
    def ensure_layout(self) -> OpenReport:
        """Create whatever is missing; change nothing that exists."""
        from services.files.yamlio import write_yaml

        report = OpenReport()
        report.created = not self.root.exists()
        self.root.mkdir(parents=True, exist_ok=True)
        for sub in SUBDIRS:
            path = self.root / sub
            if not path.is_dir():
                path.mkdir()
                if not report.created:
                    report.repaired.append(f"created missing {sub}/")
        if not self.meta_path.exists():
            from ruamel.yaml.comments import CommentedMap

            meta = CommentedMap()
            meta["format_version"] = FORMAT_VERSION
            meta["name"] = self.name
            meta["created_at"] = utc_now()
            meta["profile"] = "default"
            meta["settings"] = CommentedMap(DEFAULT_SETTINGS)
            meta.yaml_set_start_comment("Aries workspace settings. Safe to edit; comments are kept.")
            write_yaml(self.meta_path, meta)
            if not report.created:
                report.repaired.append(f"recreated missing {WORKSPACE_FILE}")
        return report

    def recover(self) -> OpenReport:
        """Make the workspace safe to use after a crash, and say what was found."""
        report = self.ensure_layout()
        report.open_elsewhere = open_elsewhere(self)
        # With another Aries holding the lease, a temp file or a short last line may be a write
        # in progress there: only report.
        repair = report.open_elsewhere is None
        if repair:
            for directory in (self.root, self.artifacts_dir, self.artifacts_dir / "objects"):
                report.removed_temp_files += len(remove_stale_temp_files(directory))
            objects = self.artifacts_dir / "objects"
            for leftover in objects.glob(".incoming.*.tmp") if objects.is_dir() else ():
                leftover.unlink(missing_ok=True)
                report.removed_temp_files += 1
        report.transcript_problems = list(iter_problems(self.transcripts_dir, repair=repair))
        try:
            report.artifact_problems = self.artifacts.verify()
        except CorruptFile as exc:
            report.artifact_problems = [exc.message]
        return report

    def close(self) -> None:
        if self.ephemeral and self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.root),
            "ephemeral": self.ephemeral,
            "profile": self.profile,
            "model": self.setting("model"),
            "approval_mode": self.setting("approval_mode"),
            "active_index": self.setting("active_index"),
            "created_at": str(self.meta.get("created_at", "")),
            "conversations": len(self.conversations()),
            "artifacts": len(self.artifacts.list()),
            "indexes": [index.name for index in self.paths.index_folders()],
        }


STAGING_PREFIX = ".import-"
"""Staging folders of bundle imports (services.bundles.importer), beside the workspaces."""


def clean_stale_imports(root: Path) -> list[str]:
    """Remove staging folders left by imports that were killed (their lock is free).

    A workspace that ``--force`` had moved aside when the import was killed is put back first.
    """
    from services.files.staging import clean_stale_staging

    return clean_stale_staging(root, STAGING_PREFIX)


class WorkspaceManager:
    """Creates, lists and opens the workspaces under one data root."""

    def __init__(self, root: Path | None = None) -> None:
        if root is None:
            from services.settings.config import workspaces_root  # pydantic is imported only when needed

            root = workspaces_root()
        self.root = Path(root)
        if self.root.is_dir() and any(e.name.startswith(STAGING_PREFIX) for e in os.scandir(self.root)):
            clean_stale_imports(self.root)  # left by an import that was killed: never a workspace

    def path_for(self, name: str) -> Path:
        return self.root / validate_name(name)

    def exists(self, name: str) -> bool:
        return (self.path_for(name) / WORKSPACE_FILE).is_file()

    def create(self, name: str) -> tuple[Workspace, OpenReport]:
        """Create ``name`` (or repair it if it exists). Nothing is created for a bad name. A trust record
        left by a deleted folder of this name concerns a workspace that is gone: a new folder starts
        without one (the folder's inode, which the record also names, may be reused at once)."""
        path = self.path_for(name)
        self.root.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            (self.root / TRUST_DIR / f"{name}.json").unlink(missing_ok=True)
        workspace = Workspace(path, name)
        return workspace, workspace.recover()

    def open(self, name: str) -> tuple[Workspace, OpenReport]:
        path = self.path_for(name)
        if not path.is_dir():
            raise NotFound(f"no workspace named {name!r}; create it with: aries workspace new {name}")
        workspace = Workspace(path, name)
        return workspace, workspace.recover()

    def list(self) -> list[str]:
        if not self.root.is_dir():
            return []
        names = []
        for entry in sorted(self.root.iterdir()):
            if entry.name.startswith("."):
                continue  # staging folders of imports in progress
            if entry.is_dir() and (entry / WORKSPACE_FILE).is_file():
                names.append(entry.name)
        return names

    def delete(self, name: str) -> None:
        path = self.path_for(name)
        if not path.is_dir():
            raise NotFound(f"no workspace named {name!r}")
        shutil.rmtree(path)


def ephemeral_workspace() -> Workspace:
    """A throw-away workspace in a temporary directory, removed by ``close()``."""
    tempdir = tempfile.TemporaryDirectory(prefix="aries-ephemeral-")
    root = Path(tempdir.name)
    workspace = Workspace(root, EPHEMERAL_NAME, ephemeral=True)
    workspace._tempdir = tempdir
    for sub in SUBDIRS:
        (root / sub).mkdir()
    # Nothing here outlives the process, so the settings stay in memory until changed.
    workspace._meta = {"name": EPHEMERAL_NAME, "profile": "default", "settings": dict(DEFAULT_SETTINGS)}
    workspace._plain = plain_settings(workspace._meta)
    return workspace


# -- open/close markers (thin wrappers over the lease) ---------------------------------
_LEASES: dict[Path, WorkspaceLease] = {}
_LEASES_LOCK = threading.Lock()


def session_marker(workspace: Workspace) -> dict[str, Any] | None:
    """The holder record of the workspace's lease, if any (it may be stale)."""
    return holder_record(workspace.root)


def marker_is_live(marker: dict[str, Any]) -> bool:
    return pid_alive(marker.get("pid"))


def held_lease(workspace: Workspace) -> WorkspaceLease | None:
    """The lease this process holds on ``workspace`` through :func:`mark_open`, if any."""
    with _LEASES_LOCK:
        lease = _LEASES.get(workspace.root.resolve())
    return lease if lease is not None and lease.held else None


def mark_open(workspace: Workspace, *, purpose: str = "tui") -> dict[str, Any] | None:
    """Take the workspace's lease for this process (kept until :func:`mark_closed`).

    Returns the record of a previous holder that exited uncleanly, if any; raises
    :class:`WorkspaceBusy` when another live Aries holds the lease.  Calling it again for a
    workspace this process already holds is a no-op that returns None.
    """
    key = workspace.root.resolve()
    with _LEASES_LOCK:
        current = _LEASES.get(key)
        if current is not None and current.held:
            return None
        lease = acquire_lease(workspace, purpose=purpose)
        _LEASES[key] = lease
    return lease.recovered


def mark_closed(workspace: Workspace) -> bool:
    """Release this process's lease on ``workspace``, or clear a dead holder's record.

    Returns True if a lease or a stale record was removed; False when there was nothing to
    remove or another live process holds the lease (it is never taken from it).
    """
    with _LEASES_LOCK:
        lease = _LEASES.pop(workspace.root.resolve(), None)
    if lease is not None and lease.held:
        lease.release()
        return True
    if holder_record(workspace.root) is None:
        return False
    try:
        return clear_stale(workspace) is not None
    except WorkspaceBusy:
        return False
