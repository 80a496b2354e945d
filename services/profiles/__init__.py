"""Prompt profiles: behaviour contracts chosen by the operator (Phase 2.4).

A profile (YAML, ``profiles/NAME.yaml`` shipped with Aries or ``<workspace>/profiles/NAME.yaml``,
which wins by name) sets the system prompt, the tools enabled and the policy or approval mode they
run under, retrieval (index, k, threshold), the default model and temperature, and optionally an
``output_schema`` every answer must satisfy. ``Session.use_profile(name)`` switches it; the gateway
enforces the tool list (a call outside it is denied with rule ``profile.<name>``), not only the
list of tools offered to the model.

Importing this package is light: pydantic and jsonschema load only when a profile is parsed.
"""

from __future__ import annotations

from services.profiles.loader import (
    DEFAULT_PROFILE,
    ActiveProfile,
    ProfileEntry,
    ProfileError,
    list_profiles,
    load_profile,
    load_profile_file,
    parse_profile,
    profile_path,
    resolve_tools,
    shipped_dir,
    workspace_dir,
)

__all__ = [
    "DEFAULT_PROFILE",
    "ActiveProfile",
    "ProfileEntry",
    "ProfileError",
    "list_profiles",
    "load_profile",
    "load_profile_file",
    "parse_profile",
    "profile_path",
    "resolve_tools",
    "shipped_dir",
    "workspace_dir",
]
