"""Where Aries keeps its data, and the few process-wide settings read from the environment."""

from __future__ import annotations

import os
from pathlib import Path

ENV_HOME = "ARIES_HOME"


def aries_home() -> Path:
    """The data root: ``$ARIES_HOME`` if set, else the platform's user data directory."""
    value = os.environ.get(ENV_HOME)
    if value:
        return Path(value).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("aries", appauthor=False))


def workspaces_root(home: Path | None = None) -> Path:
    return (home or aries_home()) / "workspaces"
