"""axiom:// URIs: every hostile URI is refused with its own typed error; canonical forms round-trip."""

from __future__ import annotations

import pytest

from services.context.errors import (
    BackslashInPath,
    ContextError,
    ControlCharacter,
    DotSegment,
    EmptySegment,
    EncodedTraversal,
    InvalidUri,
    LookalikeCharacter,
    NotAxiomUri,
    PathTraversal,
    UnknownScope,
    UriTooLong,
)
from services.context.uri import CORE_SCOPES, INTERNAL_SCOPES, MAX_DEPTH, MAX_URI_CHARS, SCOPES, AxiomUri, parse_uri
from services.errors import AriesError

HOSTILE: list[tuple[str, type[InvalidUri]]] = [
    # traversal, plain
    ("axiom://resources/..", PathTraversal),
    ("axiom://resources/a/../../user/x", PathTraversal),
    ("axiom://resources/../queue", PathTraversal),
    # traversal, percent-encoded and double-encoded
    ("axiom://resources/%2e%2e/etc", EncodedTraversal),
    ("axiom://resources/%2E%2E", EncodedTraversal),
    ("axiom://resources/.%2e", EncodedTraversal),
    ("axiom://resources/a%2fb", EncodedTraversal),
    ("axiom://resources/a%2F..%2Fb", EncodedTraversal),
    ("axiom://resources/a%5cb", EncodedTraversal),
    ("axiom://resources/%252e%252e", EncodedTraversal),
    ("axiom://resources/a%252fb", EncodedTraversal),
    ("axiom://resources/a%25255cb", EncodedTraversal),
    ("axiom://resources/%c0%ae%c0%ae", EncodedTraversal),
    ("axiom://resources/%c0%af", EncodedTraversal),
    ("axiom://resources/%u002e%u002e", EncodedTraversal),
    # backslash
    ("axiom://resources/a\\b", BackslashInPath),
    ("axiom://resources/..\\..\\x", BackslashInPath),
    ("axiom://resources\\a", BackslashInPath),
    # Unicode look-alikes of / . \
    ("axiom://resources/a\u2215b", LookalikeCharacter),
    ("axiom://resources/\uff0e\uff0e/x", LookalikeCharacter),
    ("axiom://resources/\u2024\u2024", LookalikeCharacter),
    ("axiom://resources/a\uff0fb", LookalikeCharacter),
    ("axiom://resources/a\u29f5b", LookalikeCharacter),
    ("axiom://resources/a\uff3cb", LookalikeCharacter),
    ("axiom://resources/a\u2044b", LookalikeCharacter),
    ("axiom://resources/\ufe52\ufe52", LookalikeCharacter),
    ("axiom://resources/%EF%BC%8E%EF%BC%8E", LookalikeCharacter),
    ("axiom://resources\uff0fa", LookalikeCharacter),
    # empty and dot segments
    ("axiom://resources//a", EmptySegment),
    ("axiom://resources/a//b", EmptySegment),
    ("axiom://resources//", EmptySegment),
    ("axiom://resources/a//", EmptySegment),
    ("axiom://resources/./a", DotSegment),
    ("axiom://resources/a/.", DotSegment),
    ("axiom://resources/.../a", DotSegment),
    # NUL, control and bidi characters
    ("axiom://resources/a\x00b", ControlCharacter),
    ("axiom://resources/a%00b", ControlCharacter),
    ("axiom://resources/a\nb", ControlCharacter),
    ("axiom://resources/a\x1b[31mb", ControlCharacter),
    ("axiom://resources/a\x7fb", ControlCharacter),
    ("axiom://resources/a\x85b", ControlCharacter),
    ("axiom://resources/a%c2%9bb", ControlCharacter),
    ("axiom://resources/evil\u202egnp.md", ControlCharacter),
    ("axiom://resources/a\u2066b", ControlCharacter),
    ("axiom://resources/a\u200bb", ControlCharacter),
    ("axiom://resources/a\u2028b", ControlCharacter),
    # too long
    ("axiom://resources/" + "a" * 256, UriTooLong),
    ("axiom://resources/" + "\u00e9" * 128, UriTooLong),
    ("axiom://resources/" + "/".join(["a"] * (MAX_DEPTH + 1)), UriTooLong),
    ("axiom://resources/" + "/".join(["abcdefgh"] * 300), UriTooLong),
    ("axiom://resources/" + "x" * MAX_URI_CHARS, UriTooLong),
    # scope
    ("axiom://etc/passwd", UnknownScope),
    ("axiom:///resources/a", UnknownScope),
    ("axiom://", UnknownScope),
    ("axiom://resourcesx/a", UnknownScope),
    ("axiom://r\u00e9sources/a", UnknownScope),
    ("axiom://resource\u212a/a", UnknownScope),
    # not an axiom:// URI
    ("resources/a", NotAxiomUri),
    ("/etc/passwd", NotAxiomUri),
    ("http://resources/a", NotAxiomUri),
    ("file:///etc/passwd", NotAxiomUri),
    ("axiom:resources/a", NotAxiomUri),
    ("axiom:/resources/a", NotAxiomUri),
    (" axiom://resources/a", NotAxiomUri),
    ("axiom://resources/a?x=1", NotAxiomUri),
    ("axiom://resources/a#frag", NotAxiomUri),
    ("axiom://admin@resources/a", NotAxiomUri),
    ("axiom://resources:8080/a", NotAxiomUri),
    ("axiom://resources/%ff%fe", NotAxiomUri),
    ("", NotAxiomUri),
]


@pytest.mark.parametrize(("text", "error"), HOSTILE, ids=[repr(t)[:60] for t, _ in HOSTILE])
def test_hostile_uri_is_refused_with_its_typed_error(text: str, error: type[InvalidUri]) -> None:
    with pytest.raises(InvalidUri) as caught:
        parse_uri(text)
    assert type(caught.value) is error, f"{text!r}: got {type(caught.value).__name__}: {caught.value}"
    assert isinstance(caught.value, ContextError) and isinstance(caught.value, AriesError)
    message = caught.value.message
    assert "\n" not in message and "\x00" not in message and "\u202e" not in message
    assert len(message) < 400


def test_the_hostile_suite_covers_every_refusal() -> None:
    assert len(HOSTILE) >= 30
    assert {error for _text, error in HOSTILE} == set(InvalidUri.__subclasses__())


CANONICAL = [
    ("axiom://resources", "axiom://resources", ()),
    ("axiom://resources/", "axiom://resources", ()),
    ("AXIOM://Resources/Docs/", "axiom://resources/Docs", ("Docs",)),
    ("Axiom://queue", "axiom://queue", ()),
    ("axiom://resources/a/b.md", "axiom://resources/a/b.md", ("a", "b.md")),
    ("axiom://resources/my%20notes.md", "axiom://resources/my notes.md", ("my notes.md",)),
    ("axiom://resources/why%3F.md", "axiom://resources/why%3F.md", ("why?.md",)),
    ("axiom://resources/c%23.md", "axiom://resources/c%23.md", ("c#.md",)),
    ("axiom://resources/100%25.md", "axiom://resources/100%.md", ("100%.md",)),
    ("axiom://resources/100%2541", "axiom://resources/100%2541", ("100%41",)),
    ("axiom://user/caf\u0065\u0301.md", "axiom://user/caf\u00e9.md", ("caf\u00e9.md",)),
    ("axiom://user/caf%C3%A9.md", "axiom://user/caf\u00e9.md", ("caf\u00e9.md",)),
    ("axiom://resources/a/.abstract.md", "axiom://resources/a/.abstract.md", ("a", ".abstract.md")),
    ("axiom://resources/\u6587\u6863/\u8bf4\u660e.md", "axiom://resources/\u6587\u6863/\u8bf4\u660e.md", None),
    ("axiom://session/2024-01-01 run", "axiom://session/2024-01-01 run", ("2024-01-01 run",)),
]


@pytest.mark.parametrize(("text", "canonical", "segments"), CANONICAL)
def test_canonical_form_round_trips(text: str, canonical: str, segments: tuple[str, ...] | None) -> None:
    uri = parse_uri(text)
    assert str(uri) == canonical
    if segments is not None:
        assert uri.segments == segments
    again = parse_uri(str(uri))
    assert again == uri and str(again) == canonical


def test_scopes() -> None:
    assert CORE_SCOPES == ("resources", "user", "agent", "session")
    assert INTERNAL_SCOPES == ("temp", "queue")
    assert SCOPES == CORE_SCOPES + INTERNAL_SCOPES
    for scope in SCOPES:
        assert parse_uri(f"axiom://{scope}") == AxiomUri.root(scope)


def test_parent_join_name() -> None:
    uri = parse_uri("axiom://resources/a/b/c.md")
    assert uri.name == "c.md"
    assert str(uri.parent) == "axiom://resources/a/b"
    assert uri.parent.parent.parent == AxiomUri.root("resources")
    assert AxiomUri.root("resources").parent == AxiomUri.root("resources")
    assert AxiomUri.root("user").name == "user"
    assert uri.parent.join("c.md") == uri
    assert str(AxiomUri.root("resources").join("x/y z?.md")) == "axiom://resources/x/y z%3F.md"
    assert [str(a) for a in uri.ancestors] == ["axiom://resources/a/b", "axiom://resources/a", "axiom://resources"]
    assert uri.is_within(parse_uri("axiom://resources/a")) and not uri.is_within(parse_uri("axiom://user"))
    assert not parse_uri("axiom://resources/ab").is_within(parse_uri("axiom://resources/a"))


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("..", PathTraversal),
        (".", DotSegment),
        ("a//b", EmptySegment),
        ("a\\b", BackslashInPath),
        ("%2e%2e", EncodedTraversal),
        ("a\u2215b", LookalikeCharacter),
        ("a\x00", ControlCharacter),
    ],
)
def test_join_refuses_what_parse_refuses(name: str, error: type[InvalidUri]) -> None:
    with pytest.raises(error):
        AxiomUri.root("resources").join(name)


@pytest.mark.parametrize(
    ("scope", "segments", "error"),
    [
        ("nope", (), UnknownScope),
        ("resources", ("..",), PathTraversal),
        ("resources", ("",), EmptySegment),
        ("resources", ("a/b",), NotAxiomUri),
        ("resources", ("a\\b",), BackslashInPath),
        ("resources", ("a\u202e",), ControlCharacter),
        ("resources", ("e\u0301",), NotAxiomUri),
    ],
)
def test_direct_construction_is_checked_too(scope: str, segments: tuple[str, ...], error: type[InvalidUri]) -> None:
    with pytest.raises(error):
        AxiomUri(scope, segments)


def test_not_a_string() -> None:
    with pytest.raises(NotAxiomUri):
        parse_uri(b"axiom://resources")  # type: ignore[arg-type]
