"""The context index: ONE retrieval index named ``context`` in the workspace's retrieval engine.

It holds every file of the scopes ``resources``, ``user``, ``agent`` and ``session`` — the L2 files
(originals) AND the tier files ``.abstract.md`` (L0) and ``.overview.md`` (L1) — and nothing from
``temp`` or ``queue`` (staging folders, trash, queue entries) or any other name beginning with ``.``
(locks, journals, state).

How: the whole context root is indexed as one folder with the engine's own incremental ingest
(:meth:`RetrievalEngine.index_add`), told to take the two tier names among the dot-names
(``include_hidden``) and to skip the top-level ``temp``/``queue`` folders (``exclude_top``).  One
root, one walk: a chunk's source path is its path relative to the context root
(``resources/docs/a.md``), so its URI is ``axiom://`` + source path (:func:`uri_of_source`).  The
engine keeps it incremental and idempotent (a file whose bytes and chunking are unchanged is not
re-embedded; a file gone from the tree is dropped) and whole-file atomic.  Files the loaders do not
read (``messages.jsonl``, ``meta.json``, images) are listed as skipped in the report, not errors.

The context index never becomes the workspace's active ``/rag`` index (``activate=False``).
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING

from services.context.errors import ContextError
from services.context.tiers import ABSTRACT, OVERVIEW
from services.context.uri import INTERNAL_SCOPES, SCOPES, AxiomUri

if TYPE_CHECKING:
    from services.context.tree import ContextTree
    from services.retrieval.engine import RetrievalEngine
    from services.retrieval.engine_indexes import ProgressCallback
    from services.retrieval.models import IngestReport

INDEX_NAME = "context"
"""The name of the context index in the workspace's retrieval engine."""
TIER_NAMES: tuple[str, ...] = (ABSTRACT, OVERVIEW)
"""The dot-names that are indexed (L0 and L1 tier files)."""
EXCLUDED_SCOPES: tuple[str, ...] = INTERNAL_SCOPES
"""Scope folders never indexed: ``temp`` (staging, trash) and ``queue``."""


class NotContextSource(ContextError):
    """An index source path that is not a file of an indexed scope."""

    code = "not_context_source"


def sync_index(
    tree: ContextTree,
    engine: RetrievalEngine,
    *,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> IngestReport:
    """Bring the ``context`` index in line with ``tree``: new and changed files (re)indexed,
    unchanged ones not re-embedded, deleted ones dropped.  ``cancel`` stops between files."""
    return engine.index_add(
        tree.root,
        INDEX_NAME,
        progress=progress,
        cancel=cancel,
        include_hidden=TIER_NAMES,
        exclude_top=EXCLUDED_SCOPES,
        activate=False,
    )


def uri_of_source(source_path: str) -> AxiomUri:
    """The URI of a chunk's source path (relative to the context root): ``axiom://`` + path.

    The path's names are taken literally.  Raises :class:`NotContextSource` for a path outside the
    indexed scopes, or an :class:`~services.context.errors.InvalidUri` subclass for a bad name.
    """
    return _uri_of_source(source_path)


@functools.lru_cache(maxsize=65536)
def _uri_of_source(source_path: str) -> AxiomUri:
    parts = source_path.split("/")
    if len(parts) < 2 or parts[0] not in SCOPES:
        raise NotContextSource(f"{source_path!r} is not a file of a context scope")
    if parts[0] in EXCLUDED_SCOPES:
        raise NotContextSource(f"{source_path!r} is in the internal scope {parts[0]}, which is never indexed")
    return AxiomUri(parts[0], tuple(parts[1:]))  # names are literal (a file named a%20b.md stays so)


def level_of(uri: AxiomUri) -> str:
    """``L0`` for ``.abstract.md``, ``L1`` for ``.overview.md``, else ``L2``."""
    if uri.name == ABSTRACT:
        return "L0"
    if uri.name == OVERVIEW:
        return "L1"
    return "L2"
