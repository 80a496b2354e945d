"""Authority vs data: the one place that names what in a workspace carries authority.

*Authority* is configuration that can start a process, open a connection, widen what a tool may
touch or change how calls are approved. Everything else in a workspace is *data*: it can be read,
shown, retrieved and sent to a model, but it never decides what runs.

In a workspace folder, authority is exactly :data:`AUTHORITY` (the rest — transcripts, artifacts,
``audit.db``, the ``axiom://`` context tree, index chunks, ``name``/``created_at``/``format_version``
and ``settings.active_index``/``settings.retrieval`` of ``workspace.yaml`` — is data). Outside the
folder, authority comes only from the operator: :data:`OPERATOR_ONLY`.

Authority that arrives from outside (a workspace bundle) is moved aside into ``.quarantine/`` of
the workspace by :func:`quarantine` before the workspace appears, so that no code path can see it:
the shipped default policy is in force, no MCP server is configured, the cloud bridge is off,
imported profiles do not exist, index folders are not re-read or served. :func:`restore` puts it
back when the operator trusts the workspace (:mod:`services.trust.records`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.errors import ConfigError
from services.hashing import sha256_hex
from services.workspace.paths import (
    AGENTS_FILE,
    AUDIT_FILE,
    COMMANDS_DIR,
    INDEXES_DIR,
    MANIFEST_FILE,
    POLICY_FILE,
    PROFILES_DIR,
    WORKSPACE_FILE,
    WorkspacePaths,
)
from services.workspace.paths import QUARANTINE_DIR as QUARANTINE_DIR  # authority waiting for review

WHOLE_META = f"{WORKSPACE_FILE}.whole"
"""In ``.quarantine/``: a ``workspace.yaml`` that could not be parsed, quarantined whole."""
INDEX_ROOTS_FILE = "index-roots.json"
PLAN_RUNS_FILE = "plan-runs.json"

AUTHORITY: tuple[tuple[str, str], ...] = (
    (
        POLICY_FILE,
        "the tool policy: approval mode, allowed roots and deny rules, tool classes and per-tool rules, "
        "programs, shell sandbox and network, web schemes and hosts, MCP servers (commands, URLs, "
        "environment), auto-approval, limits, hooks (commands run before and after tool calls)",
    ),
    (
        f"{PROFILES_DIR}/*.yaml",
        "workspace profiles: the tools they enable, the policy file and approval mode they bind, "
        "their default model and cloud bridge (a workspace profile also replaces a shipped one of its name)",
    ),
    (
        f"{COMMANDS_DIR}/*.md",
        "workspace commands: prompts sent to the model in the operator's name (`/NAME`, `aries ask --command`), "
        "each with the tools it may use",
    ),
    (f"{AGENTS_FILE} (at the root)", "project instructions: added to the system prompt of every turn"),
    (f"{WORKSPACE_FILE}: profile", "which profile is active"),
    (f"{WORKSPACE_FILE}: settings.model", "which model provider is contacted"),
    (f"{WORKSPACE_FILE}: settings.approval_mode", "how tool calls are approved"),
    (f"{WORKSPACE_FILE}: settings.cloud", "the cloud bridge: mode, endpoint, model, the variable that holds its key"),
    (f"{WORKSPACE_FILE}: any other key", "a key Aries does not know is treated as authority"),
    (f"{INDEXES_DIR}/*/{MANIFEST_FILE}: roots", "the folders an index re-reads and `aries serve` serves and edits"),
    (
        f"{INDEXES_DIR}/*/{MANIFEST_FILE}: meta.chroma_url",
        "the Chroma server an index's vectors live on (cleared on import)",
    ),
    (
        f"{AUDIT_FILE}: plan_runs",
        "a recorded plan run: `aries replay` runs its plan under its stored policy and approvals",
    ),
)
"""Every authority setting a workspace folder can hold: (where, what it decides)."""

OPERATOR_ONLY: tuple[str, ...] = (
    "the environment: ARIES_*, AXIOMME_*, OLLAMA_HOST, OPENAI_BASE_URL, OPENAI_API_KEY, cloud key variables",
    "command-line flags: --policy, --mode, --approve, --yes, --cloud",
    "the operator's own steps in the TUI: /mode, /model, /profile use, /policy reload, approvals",
)
"""Authority that never comes from a file inside a workspace."""

DATA_TOP_KEYS = frozenset({"format_version", "name", "created_at", "settings"})
DATA_SETTINGS = frozenset({"active_index", "retrieval"})
_DEFAULT_SETTINGS: dict[str, tuple[Any, ...]] = {
    "model": (None, "offline", ""),
    "approval_mode": (None, "guide"),
    "cloud": (None, {}, {"mode": "off"}),
}


@dataclass
class Authority:
    """The authority settings of one workspace folder (or of its quarantine)."""

    policy: str | None = None
    """``policy.yaml``'s text."""
    profiles: dict[str, str] = field(default_factory=dict)
    """File name under ``profiles/`` → its text."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The authority part of ``workspace.yaml`` (``profile``, ``settings.{model,approval_mode,cloud,…}``,
    unknown keys); ``{WHOLE_META: text}`` when the file could not be parsed."""
    index_roots: dict[str, list[list[str]]] = field(default_factory=dict)
    """Index name → its ``roots`` rows (root, added_at, updated_at)."""
    plan_runs: list[str] = field(default_factory=list)
    """Recorded plan runs that may not be replayed until trusted (their plan, policy and approvals)."""
    commands: dict[str, str] = field(default_factory=dict)
    """File name under ``commands/`` → its text (workspace commands: operator-authored prompts)."""
    instructions: str | None = None
    """``AGENTS.md``'s text (project instructions in the system prompt)."""
    default_mode: str | None = None
    """``settings.approval_mode`` when it says the default (``guide``): not authority (neither
    fingerprinted nor quarantined, so workspaces that always wrote it keep their trust), yet it decides
    the approval mode over a profile's or a policy's (``services.session.inforce``); the review needs it."""

    def empty(self) -> bool:
        return (
            self.policy is None
            and not self.profiles
            and not self.settings
            and not self.index_roots
            and not self.plan_runs
            and not self.commands
            and self.instructions is None
        )

    def fingerprint(self) -> str:
        """SHA-256 of the policy, the profiles, the settings, the commands and the instructions (index
        roots are the operator's to change with ``rag index add``; they are quarantined on import but not
        fingerprinted). Commands and instructions count only when present, so that a workspace trusted
        before they were authority keeps its fingerprint until it gains some (then it asks for a review).

        When a policy file holds ``hooks`` the body says so (``"hooks": true``): a workspace trusted
        before Aries ran hooks, whose policy then did not even load with them, is ``changed`` once and
        reviewed with its hooks listed; one without hooks keeps its fingerprint."""
        kept: dict[str, Any] = {"policy": self.policy, "profiles": self.profiles, "settings": self.settings}
        if self.commands:
            kept["commands"] = self.commands
        if self.instructions is not None:
            kept["instructions"] = self.instructions
        if self.has_hooks():
            kept["hooks"] = True
        body = json.dumps(kept, sort_keys=True, ensure_ascii=False, default=str)
        return sha256_hex(body)

    def has_hooks(self) -> bool:
        """Whether ``policy.yaml`` or a policy file under ``profiles/`` holds ``hooks``."""
        texts = [self.policy or "", *self.profiles.values()]
        return any("hooks" in text and _declares_hooks(text) for text in texts)

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "profiles": dict(self.profiles),
            "settings": self.settings,
            "index_roots": self.index_roots,
            "plan_runs": self.plan_runs,
            "commands": dict(self.commands),
            "instructions": self.instructions,
        }

    @classmethod
    def from_json(cls, data: Any) -> Authority:
        if not isinstance(data, dict):
            return cls()
        policy = data.get("policy")
        profiles = data.get("profiles") or {}
        settings = data.get("settings") or {}
        roots = data.get("index_roots") or {}
        runs = data.get("plan_runs") or []
        commands = data.get("commands") or {}
        instructions = data.get("instructions")
        return cls(
            policy if isinstance(policy, str) else None,
            {str(k): str(v) for k, v in profiles.items()} if isinstance(profiles, dict) else {},
            settings if isinstance(settings, dict) else {},
            {str(k): [list(map(str, r)) for r in v] for k, v in roots.items() if isinstance(v, list)}
            if isinstance(roots, dict)
            else {},
            [str(run) for run in runs] if isinstance(runs, list) else [],
            {str(k): str(v) for k, v in commands.items()} if isinstance(commands, dict) else {},
            instructions if isinstance(instructions, str) else None,
        )

    def summary(self) -> list[str]:
        """Short names of what is here: ``policy.yaml``, ``profiles evil, default``, ``settings
        model, cloud``, ``folders of index docs``."""
        parts = []
        if self.policy is not None:
            parts.append(POLICY_FILE)
        if self.profiles:
            names = ", ".join(sorted(Path(name).stem for name in self.profiles))
            parts.append(f"profile{'s' if len(self.profiles) > 1 else ''} {names}")
        if WHOLE_META in self.settings:
            parts.append("workspace.yaml (unreadable, kept whole)")
        elif self.settings:
            keys = [k for k in self.settings if k != "settings"]
            keys += [f"settings.{k}" for k in (self.settings.get("settings") or {})]
            parts.append(", ".join(keys))
        if self.commands:
            names = ", ".join(sorted(Path(name).stem for name in self.commands))
            parts.append(f"command{'s' if len(self.commands) > 1 else ''} {names}")
        if self.instructions is not None:
            parts.append(AGENTS_FILE)
        if self.index_roots:
            names = ", ".join(sorted(self.index_roots))
            parts.append(f"folders of index{'es' if len(self.index_roots) > 1 else ''} {names}")
        if self.plan_runs:
            count = len(self.plan_runs)
            parts.append(f"replay of {count} recorded plan run{'s' if count > 1 else ''}")
        return parts


def _declares_hooks(text: str) -> bool:
    from services.files.yamlio import parse_yaml_text

    try:
        data = parse_yaml_text(text, source="policy")
    except ConfigError:
        return False
    return isinstance(data, dict) and bool(data.get("hooks"))


# -- workspace.yaml ----------------------------------------------------------------------------
def _plain(node: Any) -> Any:
    from services.files.yamlio import plain

    return plain(node)


def _is_default(key: str, value: Any) -> bool:
    defaults = _DEFAULT_SETTINGS.get(key)
    return defaults is not None and any(value == d for d in defaults)


def authority_part(meta: Any) -> dict[str, Any]:
    """The authority keys of a parsed ``workspace.yaml`` whose values differ from the defaults."""
    if not isinstance(meta, dict):
        return {}
    part: dict[str, Any] = {}
    for key, value in meta.items():
        if key in DATA_TOP_KEYS:
            continue
        if key == "profile" and value in (None, "default"):
            continue
        part[str(key)] = _plain(value)
    settings = meta.get("settings")
    if isinstance(settings, dict):
        picked = {
            str(k): _plain(v) for k, v in settings.items() if k not in DATA_SETTINGS and not _is_default(str(k), v)
        }
        if picked:
            part["settings"] = picked
    elif settings is not None:
        part["settings"] = _plain(settings)  # not a mapping: kept aside whole
    return part


def _read_meta(root: Path) -> tuple[Any, str | None]:
    """``(parsed workspace.yaml or None, the parse error or None)``."""
    from services.files.yamlio import load_yaml

    path = root / WORKSPACE_FILE
    if not path.is_file():
        return None, None
    try:
        return load_yaml(path), None
    except ConfigError as exc:
        return None, exc.message


# -- reading -----------------------------------------------------------------------------------
_MAX_TEXT = 1 << 20


def _text(path: Path) -> str:
    """A small text file as text; bytes that are not UTF-8 are shown replaced (a review never fails)."""
    with open(path, "rb") as handle:
        data = handle.read(_MAX_TEXT + 1)
    text = data[:_MAX_TEXT].decode("utf-8", errors="replace")
    return text + ("\n… (cut at 1 MiB)" if len(data) > _MAX_TEXT else "")


def _profiles(folder: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            found[path.relative_to(folder).as_posix()] = _text(path)
    return found


def _agents(folder: Path) -> str | None:
    """``AGENTS.md`` of ``folder`` (a symbolic link is no file of the workspace)."""
    path = folder / AGENTS_FILE
    return _text(path) if path.is_file() and not path.is_symlink() else None


def in_force(root: Path) -> Authority:
    """The authority settings in force in the workspace folder ``root`` (what the session reads)."""
    authority = Authority()
    policy = root / POLICY_FILE
    if policy.is_file():
        authority.policy = _text(policy)
    authority.profiles = _profiles(root / PROFILES_DIR)
    authority.commands = _profiles(root / COMMANDS_DIR)
    authority.instructions = _agents(root)
    meta, error = _read_meta(root)
    if error is not None:
        authority.settings = {WHOLE_META: error}
    else:
        authority.settings = authority_part(meta)
        inner = meta.get("settings") if isinstance(meta, dict) else None
        mode = inner.get("approval_mode") if isinstance(inner, dict) else None
        authority.default_mode = str(mode) if mode is not None and _is_default("approval_mode", mode) else None
    return authority


def pending(root: Path) -> Authority | None:
    """The authority waiting in ``root/.quarantine`` for the operator's review, or None."""
    folder = root / QUARANTINE_DIR
    if not folder.is_dir():
        return None
    authority = Authority()
    if (folder / POLICY_FILE).is_file():
        authority.policy = _text(folder / POLICY_FILE)
    authority.profiles = _profiles(folder / PROFILES_DIR)
    authority.commands = _profiles(folder / COMMANDS_DIR)
    authority.instructions = _agents(folder)
    if (folder / WHOLE_META).is_file():
        authority.settings = {WHOLE_META: _text(folder / WHOLE_META)}
    elif (folder / WORKSPACE_FILE).is_file():
        try:
            data = json.loads(_text(folder / WORKSPACE_FILE))
        except ValueError:
            data = {}
        authority.settings = data if isinstance(data, dict) else {}
    if (folder / INDEX_ROOTS_FILE).is_file():
        try:
            rows = json.loads(_text(folder / INDEX_ROOTS_FILE))
        except ValueError:
            rows = {}
        authority.index_roots = Authority.from_json({"index_roots": rows}).index_roots
    authority.plan_runs = sorted(quarantined_runs(root))
    return authority


def quarantined_runs(root: Path) -> set[str]:
    """Recorded plan runs of the workspace folder ``root`` that came with an import not yet trusted."""
    path = root / QUARANTINE_DIR / PLAN_RUNS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return set()
    except (OSError, ValueError):
        return {"*"}  # unreadable: no run counts as trusted
    return {str(run) for run in data} if isinstance(data, list) else {"*"}


# -- index roots -------------------------------------------------------------------------------
def _manifests(root: Path) -> list[tuple[str, Path]]:
    return [(index.name, index.manifest) for index in WorkspacePaths(root).index_folders() if index.manifest.is_file()]


# -- quarantine and restore -----------------------------------------------------------------------
def quarantine(root: Path) -> Authority:
    """Move every authority setting of the workspace folder ``root`` into ``root/.quarantine``.

    Used on a folder nobody uses yet (an import's staging folder), after its stores were checked
    (:mod:`services.trust.stores`). Returns what was moved; nothing is left behind when nothing was.
    """
    from services.files.atomic import atomic_write_text
    from services.files.yamlio import write_yaml

    folder = root / QUARANTINE_DIR
    folder.mkdir()
    moved = Authority()
    policy = root / POLICY_FILE
    if policy.is_file():
        moved.policy = _text(policy)
        os.replace(policy, folder / POLICY_FILE)
    elif policy.exists() or policy.is_symlink():
        _remove(policy)
    profiles = root / PROFILES_DIR
    if profiles.is_dir():
        moved.profiles = _profiles(profiles)
        os.replace(profiles, folder / PROFILES_DIR)
    elif profiles.exists() or profiles.is_symlink():
        _remove(profiles)
    moved.commands, moved.instructions = _move_project(root, folder)
    meta, error = _read_meta(root)
    if error is not None:
        moved.settings = {WHOLE_META: error}
        os.replace(root / WORKSPACE_FILE, folder / WHOLE_META)
    elif meta is not None:
        part = authority_part(meta)
        if part:
            moved.settings = part
            atomic_write_text(folder / WORKSPACE_FILE, json.dumps(part, indent=2, sort_keys=True, default=str) + "\n")
            write_yaml(root / WORKSPACE_FILE, _without(meta, part))
    from services.audit.db import plan_run_ids
    from services.retrieval.store_manifest import take_roots

    for name, database in _manifests(root):
        rows = take_roots(database)
        if rows:
            moved.index_roots[name] = rows
    if moved.index_roots:
        atomic_write_text(folder / INDEX_ROOTS_FILE, json.dumps(moved.index_roots, indent=2, sort_keys=True) + "\n")
    moved.plan_runs = plan_run_ids(root / AUDIT_FILE)
    if moved.plan_runs:
        atomic_write_text(folder / PLAN_RUNS_FILE, json.dumps(moved.plan_runs, indent=2) + "\n")
    if moved.empty():
        shutil.rmtree(folder)
    return moved


def _move_project(root: Path, folder: Path) -> tuple[dict[str, str], str | None]:
    """Move ``commands/`` and ``AGENTS.md`` of ``root`` into the quarantine ``folder`` (a file of the
    same name waiting there already is replaced); return what was moved."""
    commands: dict[str, str] = {}
    source = root / COMMANDS_DIR
    if source.is_dir() and not source.is_symlink():
        commands = _profiles(source)
        for path in sorted(p for p in source.rglob("*") if p.is_file() and not p.is_symlink()):
            destination = folder / COMMANDS_DIR / path.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, destination)
        shutil.rmtree(source)
    elif source.exists() or source.is_symlink():
        _remove(source)
    agents = root / AGENTS_FILE
    instructions = _agents(root)
    if instructions is not None:
        os.replace(agents, folder / AGENTS_FILE)
    elif agents.exists() or agents.is_symlink():
        _remove(agents)
    return commands, instructions


def quarantine_project(root: Path) -> Authority:
    """**Upgrade**: a workspace imported before commands and instructions were authority, and never
    trusted, may hold ``commands/`` or ``AGENTS.md`` that arrived as data: they join its quarantine
    (made when needed). Returns what was moved (empty: nothing to do)."""
    moved = Authority()
    if not (root / COMMANDS_DIR).exists() and not (root / AGENTS_FILE).exists():
        return moved
    folder = root / QUARANTINE_DIR
    folder.mkdir(exist_ok=True)
    moved.commands, moved.instructions = _move_project(root, folder)
    return moved


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _without(meta: Any, part: dict[str, Any]) -> Any:
    """``meta`` (ruamel round trip, comments kept) without the keys of ``part``."""
    for key in part:
        if key != "settings":
            del meta[key]
    settings = part.get("settings")
    if isinstance(settings, dict) and isinstance(meta.get("settings"), dict):
        for key in settings:
            del meta["settings"][key]
    elif settings is not None:
        meta["settings"] = {}
    return meta


def merged(current: Authority, waiting: Authority | None) -> Authority:
    """What is in force once ``waiting`` (the quarantine) is restored over ``current``."""
    if waiting is None:
        return current
    result = copy.deepcopy(current)
    if waiting.policy is not None:
        result.policy = waiting.policy
    result.profiles.update(waiting.profiles)
    result.commands.update(waiting.commands)
    if waiting.instructions is not None:
        result.instructions = waiting.instructions
    if WHOLE_META in waiting.settings:
        result.settings = dict(waiting.settings)
    else:
        inner = {**(result.settings.get("settings") or {}), **(waiting.settings.get("settings") or {})}
        result.settings = {**result.settings, **{k: v for k, v in waiting.settings.items() if k != "settings"}}
        if inner:
            result.settings["settings"] = inner
    result.index_roots = {**result.index_roots, **waiting.index_roots}
    result.plan_runs = sorted(set(result.plan_runs) | set(waiting.plan_runs))
    return result


def _restore_project(root: Path, folder: Path) -> None:
    """``commands/`` and ``AGENTS.md`` back from the quarantine ``folder`` into ``root``."""
    waiting = folder / COMMANDS_DIR
    if waiting.is_dir():
        target = root / COMMANDS_DIR
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            _remove(target)
        for path in sorted(waiting.rglob("*")):
            if path.is_file() and not path.is_symlink():
                destination = target / path.relative_to(waiting)
                destination.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, destination)
        shutil.rmtree(waiting)
    if (folder / AGENTS_FILE).is_file():
        if (root / AGENTS_FILE).is_symlink():
            _remove(root / AGENTS_FILE)
        os.replace(folder / AGENTS_FILE, root / AGENTS_FILE)


def restore(root: Path) -> None:
    """Put the quarantined authority of ``root`` back in force (the operator trusted it), piece by
    piece, each step atomic; ``.quarantine`` is removed last."""
    from services.files.yamlio import write_yaml

    folder = root / QUARANTINE_DIR
    if not folder.is_dir():
        return
    if (folder / POLICY_FILE).is_file():
        os.replace(folder / POLICY_FILE, root / POLICY_FILE)
    waiting_profiles = folder / PROFILES_DIR
    if waiting_profiles.is_dir():
        target = root / PROFILES_DIR
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            _remove(target)
        for path in sorted(waiting_profiles.rglob("*")):
            if path.is_file() and not path.is_symlink():
                destination = target / path.relative_to(waiting_profiles)
                destination.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, destination)
        shutil.rmtree(waiting_profiles)
    _restore_project(root, folder)
    if (folder / WHOLE_META).is_file():
        os.replace(folder / WHOLE_META, root / WORKSPACE_FILE)
    elif (folder / WORKSPACE_FILE).is_file():
        part = json.loads(_text(folder / WORKSPACE_FILE))
        meta, error = _read_meta(root)
        if error is None and isinstance(part, dict):
            from ruamel.yaml.comments import CommentedMap

            meta = meta if isinstance(meta, dict) else CommentedMap()
            for key, value in part.items():
                if key == "settings" and isinstance(value, dict):
                    if not isinstance(meta.get("settings"), dict):
                        meta["settings"] = CommentedMap()
                    for inner, setting in value.items():
                        meta["settings"][inner] = setting
                else:
                    meta[key] = value
            write_yaml(root / WORKSPACE_FILE, meta)
        (folder / WORKSPACE_FILE).unlink()
    if (folder / INDEX_ROOTS_FILE).is_file():
        from services.retrieval.store_manifest import put_roots

        rows = json.loads(_text(folder / INDEX_ROOTS_FILE))
        manifests = dict(_manifests(root))
        for name, index_rows in (rows if isinstance(rows, dict) else {}).items():
            if name in manifests and isinstance(index_rows, list):
                with contextlib.suppress(sqlite3.Error):
                    put_roots(manifests[name], [list(map(str, r))[:3] for r in index_rows if len(r) >= 3])
        (folder / INDEX_ROOTS_FILE).unlink()
    (folder / PLAN_RUNS_FILE).unlink(missing_ok=True)
    shutil.rmtree(folder)
