"""Where Aries keeps its data, and the process-wide settings read from the environment.

:class:`EnvSettings` is the one typed view of every environment variable Aries reads
(``ARIES_*``, ``AXIOMME_*`` and the model endpoints).  A bad value is a
:class:`~services.errors.ConfigError` naming the variable — ``AXIOMME_MIN_SCORE='high': must
be a number`` — never a traceback.  Reading it imports only pydantic, no heavy library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.settings.env import EnvSettings

ENV_HOME = "ARIES_HOME"
ENV_MIN_SCORE = "AXIOMME_MIN_SCORE"


def env_settings(environ: Mapping[str, str] | None = None) -> EnvSettings:
    """The environment as :class:`EnvSettings` (``services.settings.env``; imports pydantic on first use)."""
    from services.settings.env import env_settings as typed

    return typed(environ)


def aries_home() -> Path:
    """The data root: ``$ARIES_HOME`` if set, else the platform's user data directory."""
    value = os.environ.get(ENV_HOME)
    if value and value.strip():
        return Path(value.strip()).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("aries", appauthor=False))


def workspaces_root(home: Path | None = None) -> Path:
    return (home or aries_home()) / "workspaces"
