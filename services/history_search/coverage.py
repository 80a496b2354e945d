"""How far the conversation search index is (:class:`Coverage`) and its one error, apart from the store.

A module of their own so that the TUI, which only hears the background build's reports
(:mod:`services.history_search.child`), does not import the store and what it imports.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.errors import AriesError


class SearchIndexError(AriesError):
    """The conversation search index cannot be written or read even after a rebuild (a full or
    read-only disk): one line, never a traceback."""

    code = "history_index"


@dataclass(frozen=True)
class Coverage:
    """How much of the workspace's transcripts the index holds."""

    indexed: int  # transcripts indexed to their end
    total: int  # transcripts in the workspace
    entries_added: int = 0  # by this catch-up
    rebuilt: str = ""  # why this catch-up threw a damaged index away and started again ('' when it did not)

    @property
    def partial(self) -> bool:
        return self.indexed < self.total


__all__ = ["Coverage", "SearchIndexError"]
