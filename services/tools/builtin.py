"""The builtin tool provider (fs, undo, artifact, shell, web, context) and the default registry.

Kept apart from ``registry.py`` so that the registry does not import the tools that register
themselves with it (no import cycle).
"""

from __future__ import annotations

from services.tools import artifact, context, fs, fs_patch, shell, undo, web
from services.tools.registry import ToolRegistry, ToolSpec


class BuiltinProvider:
    name = "builtin"

    def tools(self) -> list[ToolSpec]:
        return [*fs.TOOLS, *fs_patch.TOOLS, *undo.TOOLS, *artifact.TOOLS, *shell.TOOLS, *web.TOOLS, *context.TOOLS]


_DEFAULT_REGISTRY: ToolRegistry | None = None


def default_registry() -> ToolRegistry:
    """The registry of the builtin tools (built once per process)."""
    global _DEFAULT_REGISTRY
    if _DEFAULT_REGISTRY is None:
        _DEFAULT_REGISTRY = ToolRegistry([BuiltinProvider()])
    return _DEFAULT_REGISTRY


__all__ = ["BuiltinProvider", "default_registry"]
