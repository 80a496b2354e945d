"""Workspace settings read without pydantic, for start-up (see ``plain_settings``)."""

from __future__ import annotations

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
