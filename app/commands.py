"""The slash-command table lives in ``widgets.commands`` (screens read it too); re-exported here."""

from widgets.commands import (
    BY_NAME,
    COMMANDS,
    CommandError,
    SlashCommand,
    complete,
    completion_tree,
    palette_entries,
    parse,
    suggestions,
)

__all__ = [
    "BY_NAME",
    "COMMANDS",
    "CommandError",
    "SlashCommand",
    "complete",
    "completion_tree",
    "palette_entries",
    "parse",
    "suggestions",
]
