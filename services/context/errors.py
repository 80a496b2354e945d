"""Typed errors of the context service (the ``axiom://`` context filesystem).

Every error is a :class:`ContextError` (an :class:`~services.errors.AriesError`), so the
CLI prints ``aries: <message>`` and the TUI shows the same one line.  Other context
modules define their own errors as subclasses of :class:`ContextError`.

URI refusals are :class:`InvalidUri` subclasses, one per reason, so callers and tests can
tell exactly why a URI was refused.  The message never echoes control characters: the
offending text is shown with :func:`repr`-style escapes.
"""

from __future__ import annotations

from services.errors import AriesError


class ContextError(AriesError):
    """Base class of every error of the context service."""

    code = "context_error"


class InvalidUri(ContextError):
    """An ``axiom://`` URI that cannot be used; the subclass says why."""

    code = "invalid_uri"
    exit_code = 2


class NotAxiomUri(InvalidUri):
    """Not an ``axiom://`` URI: wrong or missing scheme, a query or fragment, userinfo or a port."""

    code = "not_axiom_uri"


class UnknownScope(InvalidUri):
    """The first segment is not one of the scopes (``resources``, ``user``, ``agent``, ...)."""

    code = "unknown_scope"


class PathTraversal(InvalidUri):
    """A literal ``..`` segment (an attempt to leave the scope)."""

    code = "path_traversal"


class EncodedTraversal(InvalidUri):
    """A percent-encoded (or double-encoded) ``.``, ``/`` or ``\\`` (e.g. ``%2e%2e``, ``%252f``)."""

    code = "encoded_traversal"


class BackslashInPath(InvalidUri):
    """A literal backslash in the path (a Windows separator is never a name character)."""

    code = "backslash_in_path"


class LookalikeCharacter(InvalidUri):
    """A Unicode look-alike of ``/``, ``.`` or ``\\`` (U+2215, U+FF0E, U+2024, fullwidth forms ...)."""

    code = "lookalike_character"


class EmptySegment(InvalidUri):
    """An empty path segment: ``axiom://resources//a`` (repeated slashes are refused, not collapsed)."""

    code = "empty_segment"


class DotSegment(InvalidUri):
    """A ``.`` segment, or a name beginning with ``.`` (names beginning with ``.`` are reserved)."""

    code = "dot_segment"


class ControlCharacter(InvalidUri):
    """NUL, a C0/C1 control, DEL, or a bidirectional override/isolate character."""

    code = "control_character"


class UriTooLong(InvalidUri):
    """Over the total length limit or the per-segment limit (see ``services.context.uri``)."""

    code = "uri_too_long"


class ScopeReadOnly(ContextError):
    """A write to a scope (or place) that this actor may not write (see ``services.context.scopes``)."""

    code = "scope_read_only"
    exit_code = 2


class NotInTree(ContextError):
    """A path that resolves outside the context tree (e.g. through a symlink that leaves it)."""

    code = "not_in_tree"


__all__ = [
    "BackslashInPath",
    "ContextError",
    "ControlCharacter",
    "DotSegment",
    "EmptySegment",
    "EncodedTraversal",
    "InvalidUri",
    "LookalikeCharacter",
    "NotAxiomUri",
    "NotInTree",
    "PathTraversal",
    "ScopeReadOnly",
    "UnknownScope",
    "UriTooLong",
]
