"""Typed errors of the context service (the ``axiom://`` context filesystem).

Every error is a :class:`ContextError` (an :class:`~services.errors.AriesError`), so the
CLI prints ``aries: <message>`` and the TUI shows the same one line.  Other context
modules define their own errors as subclasses of :class:`ContextError`.

URI refusals are :class:`InvalidUri` subclasses, one per reason, so callers and tests can
tell exactly why a URI was refused.  The message never echoes control characters: the
offending text is shown with :func:`repr`-style escapes.
"""

from __future__ import annotations

from services.errors import AlreadyExists, AriesError, NotFound


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


class ResourceNotFound(ContextError, NotFound):
    """Nothing at this URI (also a :class:`services.errors.NotFound`)."""

    code = "not_found"


class ResourceExists(ContextError, AlreadyExists):
    """Something is already at this URI and the operation does not replace it."""

    code = "already_exists"


class WrongKind(ContextError):
    """A folder where a file was expected, or a file where a folder was expected."""

    code = "wrong_kind"
    exit_code = 2


class DirectoryNotEmpty(ContextError):
    """A folder that still has entries, removed without ``recursive=True``."""

    code = "directory_not_empty"


class NotText(ContextError):
    """A file read as text that is not UTF-8."""

    code = "not_text"


class StagingError(ContextError):
    """A staging folder that cannot be finalized (empty, already finalized, or not a staging folder)."""

    code = "staging_error"


__all__ = [
    "BackslashInPath",
    "ContextError",
    "ControlCharacter",
    "DirectoryNotEmpty",
    "DotSegment",
    "EmptySegment",
    "EncodedTraversal",
    "InvalidUri",
    "LookalikeCharacter",
    "NotAxiomUri",
    "NotInTree",
    "NotText",
    "PathTraversal",
    "ResourceExists",
    "ResourceNotFound",
    "ScopeReadOnly",
    "StagingError",
    "UnknownScope",
    "UriTooLong",
    "WrongKind",
]
