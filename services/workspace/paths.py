"""The one owner of a workspace folder's layout: every file and folder name a workspace holds.

A workspace root holds::

    workspace.yaml          name, created_at, active profile and settings
    policy.yaml             the workspace's own tool policy (authority)
    profiles/               the workspace's own prompt profiles (authority)
    commands/               the workspace's slash commands, one NAME.md each (authority)
    AGENTS.md               the project's instructions to the model (authority)
    audit.db                the audit store (tool calls, retrievals, plan runs, …)
    transcripts/            one NDJSON file per conversation
    artifacts/              the artifact registry
    indexes/NAME/           one retrieval index: manifest.db, tantivy/, chroma/
    indexes/.locks/         the indexes' writer and store locks
    context/                the axiom:// context tree
    logs/                   request logs (the web viewer's)
    prompt_history.json     the prompt's Up/Down history
    exports/                conversations exported as documents (``/history export``)
    .quarantine/            imported authority waiting for the operator's review
    .aries.lock .aries-session.json   the lease (one live Aries per workspace)

Every name here is what Aries has always written: changing one is an on-disk format change.
Code that has a ``Workspace`` uses ``workspace.paths``; code that has only a root folder uses
``WorkspacePaths(root)``.  This module imports nothing of Aries (every package may use it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AGENTS_FILE",
    "ARTIFACTS_DIR",
    "COMMANDS_DIR",
    "AUDIT_FILE",
    "AUDIT_SIDE_FILES",
    "CHROMA_DIR",
    "CONTEXT_DIR",
    "EXPORTS_DIR",
    "INDEXES_DIR",
    "INDEX_LOCKS_DIR",
    "INTERNAL",
    "LEASE_FILES",
    "LOCK_FILE",
    "LOGS_DIR",
    "MANIFEST_FILE",
    "POLICY_FILE",
    "PROFILES_DIR",
    "PROMPT_HISTORY_FILE",
    "QUARANTINE_DIR",
    "SESSION_FILE",
    "SQLITE_SIDE_SUFFIXES",
    "SUBDIRS",
    "TANTIVY_DIR",
    "TRANSCRIPTS_DIR",
    "WORKSPACE_FILE",
    "CACHE_DIR",
    "TRUST_DIR",
    "IndexPaths",
    "WorkspacePaths",
]

WORKSPACE_FILE = "workspace.yaml"
POLICY_FILE = "policy.yaml"
PROFILES_DIR = "profiles"
COMMANDS_DIR = "commands"
"""Workspace slash commands (``commands/NAME.md``, ``services.project.commands``): authority."""
AGENTS_FILE = "AGENTS.md"
"""The project's instructions, at the workspace root only (``services.project.instructions``): authority."""
AUDIT_FILE = "audit.db"
TRANSCRIPTS_DIR = "transcripts"
ARTIFACTS_DIR = "artifacts"
INDEXES_DIR = "indexes"
CONTEXT_DIR = "context"
LOGS_DIR = "logs"
PROMPT_HISTORY_FILE = "prompt_history.json"
EXPORTS_DIR = "exports"
"""Conversations exported as documents (``/history export``): written by Aries, opened by a browser."""
QUARANTINE_DIR = ".quarantine"
TRUST_DIR = ".trust"
"""Beside the workspaces (``<workspaces>/.trust/NAME.json``): the operator's trust records, one per name."""
CACHE_DIR = "cache"
"""Derived stores (the conversation search index): rebuilt from the workspace's records, never exported."""
LOCK_FILE = ".aries.lock"
SESSION_FILE = ".aries-session.json"

MANIFEST_FILE = "manifest.db"
"""An index's SQLite manifest (the source of truth of the index), in ``indexes/NAME/``."""
TANTIVY_DIR = "tantivy"
CHROMA_DIR = "chroma"
INDEX_LOCKS_DIR = ".locks"
"""In ``indexes/``: the writer and store locks of every index (never an index)."""

SQLITE_SIDE_SUFFIXES = ("-wal", "-shm", "-journal")
SUBDIRS = (TRANSCRIPTS_DIR, ARTIFACTS_DIR, INDEXES_DIR)
"""The folders every workspace has (created on open)."""
LEASE_FILES = (LOCK_FILE, SESSION_FILE)
AUDIT_SIDE_FILES = tuple(AUDIT_FILE + suffix for suffix in SQLITE_SIDE_SUFFIXES)

INTERNAL = (
    AUDIT_FILE,
    *AUDIT_SIDE_FILES,
    WORKSPACE_FILE,
    POLICY_FILE,  # a workspace's own tool policy: tools must not be able to loosen it
    PROFILES_DIR,  # workspace profiles bind tools, policies and modes: authority, not a tool's to write
    COMMANDS_DIR,  # workspace commands: operator-authored prompts (authority), not a tool's to write
    AGENTS_FILE,  # the project's instructions to the model (authority), not a tool's to write
    QUARANTINE_DIR,  # imported authority waiting for the operator's review (services.trust)
    SESSION_FILE,
    TRANSCRIPTS_DIR,
    ARTIFACTS_DIR,
    INDEXES_DIR,
    CACHE_DIR,  # derived from the transcripts: a tool's write would only skew what search and recall find
    EXPORTS_DIR,  # what the operator opens in a browser as Aries' own export: no tool may plant one
)
"""The workspace's own records, which no tool may write (``services.policy.model.WORKSPACE_INTERNAL``)."""


@dataclass(frozen=True)
class IndexPaths:
    """The folder of one retrieval index, ``<workspace>/indexes/NAME``."""

    directory: Path

    @property
    def name(self) -> str:
        return self.directory.name

    @property
    def manifest(self) -> Path:
        return self.directory / MANIFEST_FILE

    @property
    def tantivy(self) -> Path:
        return self.directory / TANTIVY_DIR

    @property
    def chroma(self) -> Path:
        return self.directory / CHROMA_DIR


@dataclass(frozen=True)
class WorkspacePaths:
    """Where each part of the workspace at ``root`` lives."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def settings(self) -> Path:
        """``workspace.yaml``."""
        return self.root / WORKSPACE_FILE

    @property
    def policy(self) -> Path:
        return self.root / POLICY_FILE

    @property
    def profiles(self) -> Path:
        return self.root / PROFILES_DIR

    @property
    def audit_db(self) -> Path:
        return self.root / AUDIT_FILE

    @property
    def transcripts(self) -> Path:
        return self.root / TRANSCRIPTS_DIR

    @property
    def artifacts(self) -> Path:
        return self.root / ARTIFACTS_DIR

    @property
    def indexes(self) -> Path:
        return self.root / INDEXES_DIR

    def index(self, name: str) -> IndexPaths:
        return IndexPaths(self.indexes / name)

    def index_folders(self) -> list[IndexPaths]:
        """Every index folder present (sorted by name; hidden folders such as the locks are no index)."""
        if not self.indexes.is_dir():
            return []
        return [
            IndexPaths(entry)
            for entry in sorted(self.indexes.iterdir())
            if entry.is_dir() and not entry.name.startswith(".")
        ]

    @property
    def context(self) -> Path:
        """The ``axiom://`` context tree."""
        return self.root / CONTEXT_DIR

    @property
    def logs(self) -> Path:
        return self.root / LOGS_DIR

    @property
    def prompt_history(self) -> Path:
        return self.root / PROMPT_HISTORY_FILE

    @property
    def quarantine(self) -> Path:
        return self.root / QUARANTINE_DIR

    @property
    def cache(self) -> Path:
        return self.root / CACHE_DIR

    @property
    def exports(self) -> Path:
        return self.root / EXPORTS_DIR

    @property
    def lock_file(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def session_file(self) -> Path:
        return self.root / SESSION_FILE
