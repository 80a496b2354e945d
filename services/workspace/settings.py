"""Workspace settings read without pydantic or ruamel.yaml, for start-up (``plain_yaml``, ``plain_settings``)."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from services.approval_mode import MODE_NAMES
from services.errors import AriesError
from services.text.names import validate_name

DEFAULT_SETTINGS: dict[str, Any] = {
    "model": "offline",
    "active_index": None,
}
"""What a new ``workspace.yaml`` says. No ``approval_mode``: unset, the profile's or the policy file's
mode applies (``services.session.inforce``); a file that has one keeps it."""


def plain_settings(data: Any) -> dict[str, Any] | None:
    """``{"profile", "settings"}`` read without pydantic when ``workspace.yaml`` has the everyday shape
    (every known key of the right type and value); None otherwise, and then the full model checks it.

    Start-up reads settings before the first frame; importing pydantic and building the models costs
    about 180 ms there. This check is a strict subset of what ``WorkspaceConfig`` accepts, so a file
    it passes is one the model accepts with the same values.
    """
    data = {} if data is None else data
    if not isinstance(data, dict):
        return None
    version = data.get("format_version", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        return None
    if not isinstance(data.get("name"), str | None) or not isinstance(data.get("created_at"), str | date | None):
        return None
    profile = data.get("profile") or "default"
    settings = data.get("settings") or {}
    if not isinstance(profile, str) or not isinstance(settings, dict):
        return None
    if any(key in settings for key in ("retrieval", "models", "cloud")):  # nested settings: the model checks them
        return None
    model = settings.get("model", "offline")
    index = settings.get("active_index")
    try:
        validate_name(profile, "profile")
        if index is not None:
            validate_name(index, "index")
    except AriesError:
        return None
    if not isinstance(model, str) or not model.strip() or not isinstance(index, str | None):
        return None
    if settings.get("approval_mode") is not None and settings["approval_mode"] not in MODE_NAMES:
        return None
    plain = {**DEFAULT_SETTINGS, **{str(k): v for k, v in settings.items()}}
    return {"profile": profile, "settings": plain}


_KEY_LINE = re.compile(r"^( {2})?([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?$")
_PLAIN_TEXT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/@+-]*$")
_QUOTED = re.compile(r"^'((?:[^']|'')*)'$")
_NOT_TEXT = frozenset({"null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE"})
MAX_PLAIN_BYTES = 64 * 1024
"""A longer file is left to ruamel.yaml (Aries writes a few hundred bytes)."""


def _scalar(raw: str) -> tuple[bool, Any]:
    """``(True, value)`` for a scalar this reader is sure of, ``(False, None)`` otherwise."""
    raw = raw.rstrip(" ")
    if raw == "" or raw == "~":
        return True, None
    quoted = _QUOTED.match(raw)
    if quoted:
        return True, quoted.group(1).replace("''", "'")
    if raw.isascii() and raw.isdigit() and (raw == "0" or not raw.startswith("0")):
        return True, int(raw)
    if _PLAIN_TEXT.match(raw) and raw not in _NOT_TEXT and not raw.endswith(":") and "#" not in raw:
        return True, raw
    return False, None


def plain_yaml(text: str) -> dict[str, Any] | None:
    """``workspace.yaml`` as Aries writes it, read without ruamel.yaml: top-level ``key: value`` lines
    and one level of two-space indented ``key: value`` under a key with no value, whole-line comments,
    values that are empty, ``~``, single-quoted, a whole number or plain text of the safe characters.
    None for anything else (another shape, a flow style, an anchor, a tab, a trailing comment, a
    duplicate key, a value YAML would read as a bool, a float or a date): ruamel.yaml reads it then.

    Start-up reads ``workspace.yaml`` only to know a few settings; ruamel.yaml costs ~2 MB resident and
    ~40 ms to import. What this reader accepts, ruamel.yaml reads to the same values (tested).
    """
    if len(text) > MAX_PLAIN_BYTES or "\t" in text or "\r" in text:
        return None
    data: dict[str, Any] = {}
    block: dict[str, Any] | None = None
    for line in text.split("\n"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        found = _KEY_LINE.match(line)
        if found is None:
            return None
        indent, key, raw = found.groups()
        target = block if indent else data
        if target is None or key in target or key in _NOT_TEXT:
            return None
        if not indent and raw is None:
            block = data[key] = {}
            continue
        sure, value = _scalar(raw or "")
        if not sure:
            return None
        target[key] = value
        if not indent:
            block = None
    return {key: (value or None) if isinstance(value, dict) else value for key, value in data.items()}
