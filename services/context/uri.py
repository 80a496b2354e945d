"""``axiom://{scope}/{path}`` URIs: :func:`parse_uri` and the canonical :class:`AxiomUri`.

The rules (each refusal is its own :class:`~services.context.errors.InvalidUri` subclass; the
checks run in this order, so a URI that breaks several rules gets the first one's error):

1. **Length** (:class:`UriTooLong`): at most :data:`MAX_URI_CHARS` characters in the text as given
   and in the canonical form, at most :data:`MAX_SEGMENT_BYTES` UTF-8 bytes per name (a common
   file-system limit) and at most :data:`MAX_DEPTH` names below the scope.
2. **Control characters** (:class:`ControlCharacter`): NUL, C0 and C1 controls, DEL, and every
   invisible format character (Unicode category ``Cf``: bidi embeddings/overrides/isolates, marks,
   zero-width characters, the BOM) and the line/paragraph separators; anywhere, also when
   percent-encoded (``%00``).
3. **Scheme** (:class:`NotAxiomUri`): the text starts with ``axiom://`` (the scheme is matched
   case-insensitively and written in lower case); no query (``?``), fragment (``#``), userinfo
   (``@`` before the first ``/``) or port (``:`` there).
4. **Backslash** (:class:`BackslashInPath`): a literal ``\\`` anywhere after the scheme.
5. **Look-alikes** (:class:`LookalikeCharacter`): a character whose NFKC form contains ``/``,
   ``.`` or ``\\`` (U+FF0F, U+FF0E, U+2024, U+FE68, fullwidth and small forms ...), or one in
   :data:`LOOKALIKES` (U+2215 DIVISION SLASH, U+2044 FRACTION SLASH, U+29F5 REVERSE SOLIDUS
   OPERATOR ..., which NFKC leaves alone); anywhere after the scheme, also when percent-encoded.
   This refuses U+2026 HORIZONTAL ELLIPSIS too (its NFKC form is ``...``): one rule, no exceptions.
6. **Scope** (:class:`UnknownScope`): the authority is one of :data:`SCOPES` (matched
   case-insensitively, written in lower case); an empty one (``axiom:///x``) is refused too.
7. **Segments**: one trailing ``/`` is dropped (``axiom://resources/a/`` is ``axiom://resources/a``);
   repeated slashes are *refused*, not collapsed (:class:`EmptySegment`), because collapsing would
   give two spellings one meaning and hide mistakes.  A ``..`` name is :class:`PathTraversal`; a name
   made only of dots (``.``, ``...``) is :class:`DotSegment`.  Names beginning with ``.``
   (``.abstract.md``) are valid URIs: they are reserved for Aries, which
   :mod:`services.context.scopes` enforces on writes.
8. **Percent-encoding** (:class:`EncodedTraversal`): each name is percent-decoded exactly once
   (``my%20notes.md`` is ``my notes.md``).  An escape of ``.``, ``/`` or ``\\`` is refused at any
   depth of encoding (``%2e``, ``%2F``, ``%5c``, ``%252e``, ``%25252f`` ...), as are overlong UTF-8
   forms (``%c0%ae``) and ``%uXXXX`` escapes; escapes that are not UTF-8 are :class:`NotAxiomUri`.
9. **Names** are NFC-normalized, so the two spellings of ``é`` are one name.

The canonical form (``str(uri)``) is ``axiom://scope/name/name`` with names written literally
except ``%`` before two hex digits, ``?`` and ``#``, which are percent-encoded; ``parse_uri`` of it
gives the same :class:`AxiomUri`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from services.context.errors import (
    BackslashInPath,
    ControlCharacter,
    DotSegment,
    EmptySegment,
    EncodedTraversal,
    LookalikeCharacter,
    NotAxiomUri,
    PathTraversal,
    UnknownScope,
    UriTooLong,
)

Scope = Literal["resources", "user", "agent", "session", "temp", "queue"]
CORE_SCOPES: tuple[str, ...] = ("resources", "user", "agent", "session")
"""Scopes that hold context: resources, user and agent memory, sessions."""
INTERNAL_SCOPES: tuple[str, ...] = ("temp", "queue")
"""Aries's own working scopes: ``temp`` (staging) and ``queue`` (indexing work; read-only)."""
SCOPES: tuple[str, ...] = CORE_SCOPES + INTERNAL_SCOPES

SCHEME = "axiom"
PREFIX = "axiom://"
MAX_URI_CHARS = 2048
"""Most characters in a URI (as given and in canonical form): well under PATH_MAX with the root."""
MAX_SEGMENT_BYTES = 255
"""Most UTF-8 bytes in one name (the NAME_MAX of common file systems)."""
MAX_DEPTH = 64
"""Most names below the scope."""

LOOKALIKES: dict[str, str] = {
    "\u2215": "DIVISION SLASH",
    "\u2044": "FRACTION SLASH",
    "\u29f5": "REVERSE SOLIDUS OPERATOR",
    "\u29f8": "BIG SOLIDUS",
    "\u29f9": "BIG REVERSE SOLIDUS",
    "\u2216": "SET MINUS",
    "\u2571": "BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT",
    "\u2572": "BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT",
    "\u0337": "COMBINING SHORT SOLIDUS OVERLAY",
    "\u0338": "COMBINING LONG SOLIDUS OVERLAY",
    "\u1735": "PHILIPPINE SINGLE PUNCTUATION",
    "\u3033": "VERTICAL KANA REPEAT MARK UPPER HALF",
}
"""Look-alikes of ``/``, ``.`` and ``\\`` that NFKC does not map to them (those it maps are refused too)."""

_SEPARATORS = frozenset("/.\\")
_LINE_SEPARATORS = frozenset("\u2028\u2029\u0085")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_DANGEROUS_ESCAPE = re.compile(r"%(?:2e|2f|5c)|%u[0-9a-f]{4}|%c0|%c1|%e0%80|%f0%80", re.IGNORECASE)
_ENCODING_DEPTH = 4


def _is_control(char: str) -> bool:
    code = ord(char)
    if code < 0x20 or 0x7F <= code <= 0x9F or char in _LINE_SEPARATORS:
        return True
    return unicodedata.category(char) == "Cf"


def _check_controls(text: str, what: str) -> None:
    for index, char in enumerate(text):
        if _is_control(char):
            raise ControlCharacter(f"{what}: control character U+{ord(char):04X} at position {index}")


def _is_lookalike(char: str) -> bool:
    if char.isascii():
        return False
    if char in LOOKALIKES:
        return True
    return any(c in _SEPARATORS for c in unicodedata.normalize("NFKC", char))


def _check_lookalikes(text: str, what: str) -> None:
    for char in text:
        if _is_lookalike(char):
            name = LOOKALIKES.get(char) or unicodedata.name(char, "unnamed")
            raise LookalikeCharacter(f"{what}: U+{ord(char):04X} {name} looks like a path separator or dot")


def _unquote_once(text: str) -> str:
    """Decode every ``%XX`` escape of ``text`` once (escapes of one character taken together)."""

    def runs() -> str:
        out: list[str] = []
        pending = bytearray()
        pos = 0
        for match in _ESCAPE.finditer(text):
            if match.start() != pos:
                if pending:
                    out.append(_decode(bytes(pending)))
                    pending.clear()
                out.append(text[pos : match.start()])
            pending.append(int(match.group(1), 16))
            pos = match.end()
        if pending:
            out.append(_decode(bytes(pending)))
        out.append(text[pos:])
        return "".join(out)

    return runs() if "%" in text else text


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotAxiomUri(f"percent-escapes that are not UTF-8: {data.hex()}") from None


def _check_encoded(raw: str) -> None:
    """Refuse escapes of ``.``, ``/``, ``\\`` (and overlong forms) at any depth of encoding."""
    text = raw
    for _ in range(_ENCODING_DEPTH):
        if _DANGEROUS_ESCAPE.search(text):
            raise EncodedTraversal(f"percent-encoded '.', '/' or '\\' in {raw!r}")
        try:
            decoded = _unquote_once(text)
        except NotAxiomUri:
            return  # the single decode of the name reports it
        if decoded == text:
            return
        text = decoded
        _check_lookalikes(text, f"name {raw!r} (decoded)")
        if "\\" in text or "/" in text:
            raise EncodedTraversal(f"percent-encoded '/' or '\\' in {raw!r}")
    raise EncodedTraversal(f"percent-encoding nested {_ENCODING_DEPTH} deep in {raw!r}")


def _name(raw: str) -> str:
    """One raw path segment → its canonical name (decoded once, NFC), or the segment's error."""
    if raw == "":
        raise EmptySegment("empty path segment (repeated '/')")
    if raw == "..":
        raise PathTraversal("'..' segment: a URI cannot leave its scope")
    if set(raw) == {"."}:
        raise DotSegment(f"{raw!r} segment: names made only of dots are not allowed")
    _check_encoded(raw)
    name = _unquote_once(raw)
    _check_controls(name, "name (decoded)")
    name = unicodedata.normalize("NFC", name)
    _check_lookalikes(name, "name (decoded)")
    if name == "..":
        raise EncodedTraversal(f"percent-encoded '..' in {raw!r}")
    if set(name) == {"."}:
        raise EncodedTraversal(f"percent-encoded dot segment {raw!r}")
    if len(name.encode("utf-8")) > MAX_SEGMENT_BYTES:
        raise UriTooLong(f"a name is longer than {MAX_SEGMENT_BYTES} UTF-8 bytes")
    return name


def _quote(name: str) -> str:
    return _ESCAPE.sub(lambda m: "%25" + m.group(1), name).replace("?", "%3F").replace("#", "%23")


@dataclass(frozen=True, order=True)
class AxiomUri:
    """A canonical ``axiom://`` URI: a scope and the names below it (empty for the scope itself).

    Built by :func:`parse_uri`, :meth:`root` or :meth:`join`; constructing one directly checks
    the parts too (each name must already be canonical).
    """

    scope: str
    segments: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise UnknownScope(f"unknown scope {self.scope!r}; use one of: {', '.join(SCOPES)}")
        if len(self.segments) > MAX_DEPTH:
            raise UriTooLong(f"more than {MAX_DEPTH} names below the scope")
        for segment in self.segments:
            if not isinstance(segment, str) or segment == "":
                raise EmptySegment(f"not a name: {segment!r}")
            if "/" in segment:
                raise NotAxiomUri(f"not a single name: {segment!r}")
            if "\\" in segment:
                raise BackslashInPath(f"backslash in the name {segment!r}")
            _check_controls(segment, "name")
            _check_lookalikes(segment, "name")
            if _name(_quote(segment)) != segment:
                raise NotAxiomUri(f"not a canonical name: {segment!r}")
        if len(str(self)) > MAX_URI_CHARS:
            raise UriTooLong(f"URI longer than {MAX_URI_CHARS} characters")

    @classmethod
    def root(cls, scope: str) -> AxiomUri:
        """The scope folder itself: ``axiom://resources``."""
        return cls(scope)

    def __str__(self) -> str:
        if not self.segments:
            return PREFIX + self.scope
        return PREFIX + self.scope + "/" + "/".join(_quote(s) for s in self.segments)

    @property
    def is_root(self) -> bool:
        return not self.segments

    @property
    def name(self) -> str:
        """The last name, or the scope for a scope root."""
        return self.segments[-1] if self.segments else self.scope

    @property
    def parent(self) -> AxiomUri:
        """The containing URI; a scope root is its own parent (as in :mod:`pathlib`)."""
        return AxiomUri(self.scope, self.segments[:-1]) if self.segments else self

    @property
    def ancestors(self) -> tuple[AxiomUri, ...]:
        """Parents from the nearest up to the scope root (empty for a scope root)."""
        return tuple(AxiomUri(self.scope, self.segments[:i]) for i in range(len(self.segments) - 1, -1, -1))

    @property
    def is_hidden(self) -> bool:
        """True when any name begins with ``.`` (reserved for Aries: tier files, state)."""
        return any(s.startswith(".") for s in self.segments)

    def join(self, name: str) -> AxiomUri:
        """The URI of ``name`` below this one; ``name`` may be a relative path ``a/b`` of literal names."""
        parts = name.split("/")
        quoted = "/".join(_quote(p) for p in parts)
        return parse_uri(f"{self}/{quoted}")

    def is_within(self, other: AxiomUri) -> bool:
        """True when this URI is ``other`` or below it."""
        return self.scope == other.scope and self.segments[: len(other.segments)] == other.segments


def parse_uri(text: str) -> AxiomUri:
    """Parse and normalize an ``axiom://`` URI; each refusal is a typed :class:`InvalidUri`."""
    if not isinstance(text, str):
        raise NotAxiomUri(f"not a URI: {type(text).__name__}")
    if len(text) > MAX_URI_CHARS:
        raise UriTooLong(f"URI longer than {MAX_URI_CHARS} characters")
    _check_controls(text, "URI")
    if text[: len(PREFIX)].lower() != PREFIX:
        shown = text[:40] + ("…" if len(text) > 40 else "")
        raise NotAxiomUri(f"not an axiom:// URI: {shown!r}")
    rest = text[len(PREFIX) :]
    if "?" in rest or "#" in rest:
        raise NotAxiomUri("axiom:// URIs have no query or fragment ('?', '#')")
    if "\\" in rest:
        raise BackslashInPath("backslash in an axiom:// URI ('\\' is never a separator or a name character)")
    _check_lookalikes(rest, "URI")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        raise NotAxiomUri("axiom:// URIs have no userinfo ('@')")
    if ":" in authority:
        raise NotAxiomUri("axiom:// URIs have no port (':')")
    scope = authority.lower()
    if not authority:
        raise UnknownScope(f"no scope in the URI; use one of: {', '.join(SCOPES)}")
    if not authority.isascii() or scope not in SCOPES:
        raise UnknownScope(f"unknown scope {authority[:40]!r}; use one of: {', '.join(SCOPES)}")
    if path.endswith("/"):
        path = path[:-1]
    if not path and not (slash and rest.endswith("//")):
        return AxiomUri(scope)
    raw_segments = path.split("/")
    if len(raw_segments) > MAX_DEPTH:
        raise UriTooLong(f"more than {MAX_DEPTH} names below the scope")
    names = tuple(_name(raw) for raw in raw_segments)
    return AxiomUri(scope, names)
