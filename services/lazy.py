"""A package's public names, imported on first access (PEP 562): importing one of its submodules, or
the package itself, does not load what the names need until one is used (start-up, idle memory).

    __getattr__ = lazy_names(__name__, {"RetrievalEngine": "engine", ...})

Each name maps to the submodule that defines it; a name found is kept on the package, so the hook runs
once per name. The package lists the same names under ``TYPE_CHECKING`` for the type checker.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``homes`` maps a public name to its submodule."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


__all__ = ["lazy_names"]
