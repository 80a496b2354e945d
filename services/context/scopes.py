"""Who may write where in the context tree: the one place that decides (:func:`check_write`).

"Write" is any change at a URI: creating, replacing or removing a file or a folder.  Reading is
open to everyone (``temp`` and ``queue`` are visible for debugging, as the spec asks).

Two actors: ``system`` is Aries itself (ingest finalisation, tier synthesis, the indexing queue,
session commits, reconcile); ``user`` is anything the operator asks for directly (the markdown
editor, ``context add`` destinations, package import destinations, removing a resource).

=============  ==========  ==========  ======================================================
scope          user        system      why
=============  ==========  ==========  ======================================================
``resources``  write       write       the operator's material
``user``       write       write       the operator's memory: the operator may correct it
``agent``      write       write       the agent's memory: the operator stays in control of it
``session``    read-only   write       sessions are written by the session service (append,
                                       commit); an archive edited by hand would no longer be
                                       the record of what was said
``temp``       read-only   write       staging (``temp`` is Aries's working area)
``queue``      read-only   write       the spec: "queue is read-only for non-system operations"
=============  ==========  ==========  ======================================================

Two more rules apply to every scope:

* a scope folder itself (``axiom://resources``) is never created, replaced or removed by a user;
* names beginning with ``.`` (``.abstract.md``, ``.overview.md``, state files) are reserved for
  Aries: only ``system`` writes them, anywhere in the path.
"""

from __future__ import annotations

from typing import Literal

from services.context.errors import ScopeReadOnly
from services.context.uri import SCOPES, AxiomUri

Actor = Literal["user", "system"]
ACTORS: tuple[str, ...] = ("user", "system")

USER_WRITABLE: frozenset[str] = frozenset({"resources", "user", "agent"})
"""Scopes the operator may write directly; every other scope is written by ``system`` only."""
SYSTEM_ONLY: frozenset[str] = frozenset(SCOPES) - USER_WRITABLE
"""``session``, ``temp``, ``queue``."""


def check_write(uri: AxiomUri, actor: Actor) -> None:
    """Raise :class:`ScopeReadOnly` unless ``actor`` may create, replace or remove ``uri``."""
    if actor not in ACTORS:
        raise ScopeReadOnly(f"unknown actor {actor!r}: writes are made by one of: {', '.join(ACTORS)}")
    if actor == "system":
        return
    if uri.scope not in USER_WRITABLE:
        if uri.scope == "queue":
            raise ScopeReadOnly(f"{uri} is read-only: the queue is written by Aries only", uri=str(uri))
        raise ScopeReadOnly(f"{uri} is read-only: axiom://{uri.scope} is written by Aries only", uri=str(uri))
    if uri.is_root:
        raise ScopeReadOnly(f"{uri} is a scope folder: it cannot be created, replaced or removed", uri=str(uri))
    if uri.is_hidden:
        raise ScopeReadOnly(f"{uri}: names beginning with '.' are reserved for Aries", uri=str(uri))


def can_write(uri: AxiomUri, actor: Actor) -> bool:
    """True when :func:`check_write` would let ``actor`` write ``uri``."""
    try:
        check_write(uri, actor)
    except ScopeReadOnly:
        return False
    return True
