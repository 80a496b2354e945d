"""The operator's own settings, outside every workspace folder: ``$ARIES_HOME/settings.json``.

What belongs to the person at the keyboard rather than to a workspace (which may be imported, shared
or untrusted): the theme, how Aries notifies, and — as the next issues add them — lasting grants,
each keyed by the identity of the workspace it was given for. A workspace can never write here.

The file is a versioned pydantic model (``format``), written atomically (``services.files.atomic``) under a
file lock, so two Aries processes changing it do not lose each other's change. A file that does not
read is reported in one line (:class:`OperatorSettingsError`, naming it) and never overwritten: the
operator fixes or removes it.

Reached from what is in force (``services.session.inforce.InForce.settings``): the operator's side of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.errors import ConfigError

SETTINGS_FILE = "settings.json"
FORMAT: Literal[1] = 1
LOCK_TIMEOUT = 10.0


class OperatorSettingsError(ConfigError):
    code = "operator_settings"


class Notifications(BaseModel):
    """How Aries gets the operator's attention when something waits (an approval, a finished turn)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    bell: bool = True
    """Ring the terminal bell."""
    desktop: bool = False
    """Send a desktop notification (OSC 9 or OSC 777, where the terminal supports one; fixed text only)."""
    long_turn_seconds: float = Field(default=5.0, ge=0)
    """A turn that ends after more than this many seconds notifies (a call waiting for approval always does)."""


class WorkspaceIdentity(BaseModel):
    """Which workspace a lasting grant belongs to: its folder, and a key that changes when the folder
    is deleted and made again or replaced by ``import --force`` (``services.grants.store.identity``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    path: str
    """The workspace folder."""
    key: str
    """The folder's identity: its device and inode and the workspace's ``created_at``, hashed."""
    name: str = ""
    """The workspace's name, for display."""


class GrantPattern(BaseModel):
    """What a lasting grant covers (``services.grants``): argv tokens of a shell command, or a path."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    kind: Literal["argv", "path"]
    """``argv``: a shell command; ``path``: the files a file tool touches."""
    argv: tuple[str, ...] = ()
    """The program and its literal arguments, each matched exactly."""
    rest: bool = False
    """A trailing ``*``: one or more further plain arguments (never an option, never outside the roots)."""
    executable: str | None = None
    """The resolved executable the program name must still resolve to."""
    cwd: str | None = None
    """The working directory the command runs in (resolved)."""
    path: str | None = None
    """The resolved file or folder a file tool's paths must be (or lie under)."""
    folder: bool = False
    """``path`` is a folder: any path under it matches."""


class GrantOrigin(BaseModel):
    """Where a lasting grant came from."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    by: str
    """``approval`` (the modal's "always") or ``cli`` (``aries grants add``)."""
    at: str
    """When (ISO 8601, UTC)."""
    call_id: str | None = None
    """The call that was approved "always", when there was one."""
    asked_by: str | None = None
    """Who asked for that call (``operator``, ``assistant``, ...) and, for a model, which one."""


class LastingGrant(BaseModel):
    """A grant that outlives the session, for one workspace (``services.grants.store``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    format: Literal[1] = 1
    """Layout version of one grant."""
    id: str
    """Shared with session grants' ids (``/grants revoke ID``)."""
    workspace: WorkspaceIdentity
    tool_id: str
    """The tool the grant covers."""
    pattern: GrantPattern
    """What arguments it covers."""
    origin: GrantOrigin
    expires_at: str | None = None
    """When it stops applying (ISO 8601, UTC); None: never."""
    uses: int = 0
    """How many calls it approved."""
    last_used_at: str | None = None


class OperatorSettings(BaseModel):
    """The whole of ``settings.json``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    format: Literal[1] = FORMAT
    """Layout version of the file."""
    theme: str | None = None
    """The Textual theme the TUI uses; None: its default."""
    notifications: Notifications = Field(default_factory=Notifications)
    """How Aries notifies."""
    auto_compact: bool = False
    """Ask the model for a summary (``/compact``) by itself after a turn whose request left out turns no
    summary covers (``/compact auto on|off``)."""
    grants: list[LastingGrant] = Field(default_factory=list)
    """Lasting grants, each for one workspace (``services.grants.store``)."""


def settings_path(home: Path | None = None) -> Path:
    """``$ARIES_HOME/settings.json`` (``services.settings.config.aries_home``)."""
    from services.settings.config import aries_home

    return (home or aries_home()) / SETTINGS_FILE


def load_settings(path: Path | None = None) -> OperatorSettings:
    """The operator's settings (the defaults when there is no file yet). A file that does not read
    raises OperatorSettingsError naming it, in one line."""
    path = path or settings_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return OperatorSettings()
    except (OSError, UnicodeDecodeError) as exc:
        raise OperatorSettingsError(f"{path}: cannot be read ({exc})") from None
    try:
        return OperatorSettings.model_validate_json(text)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error.get("loc", ())) or "the file"
        raise OperatorSettingsError(
            f"{path}: {where}: {error.get('msg', 'invalid')} (fix or remove the file; Aries leaves it as it is)"
        ) from None


def update_settings(
    change: Callable[[OperatorSettings], OperatorSettings], path: Path | None = None
) -> OperatorSettings:
    """Read, change and write the settings under the file lock (so a concurrent change is not lost);
    written atomically. A file that does not read raises OperatorSettingsError and is left untouched."""
    from filelock import FileLock, Timeout

    from services.files.atomic import atomic_write_text

    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(path.with_name(f".{path.name}.lock")), timeout=LOCK_TIMEOUT):
            settings = OperatorSettings.model_validate(change(load_settings(path)).model_dump())
            atomic_write_text(path, json.dumps(settings.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    except Timeout:
        raise OperatorSettingsError(f"{path}: another Aries process holds its lock; try again") from None
    return settings


__all__ = [
    "SETTINGS_FILE",
    "GrantOrigin",
    "GrantPattern",
    "LastingGrant",
    "Notifications",
    "OperatorSettings",
    "OperatorSettingsError",
    "WorkspaceIdentity",
    "load_settings",
    "settings_path",
    "update_settings",
]
