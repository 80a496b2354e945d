"""The sanitizer: what is redacted before a question may leave the machine.

``sanitize(text, config)`` runs the detectors of :mod:`services.bridge.detectors` in a fixed order
(private-key blocks, JWTs, provider keys, credentials in URLs, secrets in assignments, bearer
tokens, e-mails, ``user@host``, listed and internal host names, IP addresses, paths, listed
project names, long random strings).  What one detector finds is masked before the next looks,
so a span is redacted once, under the first kind that claims it.

Each distinct value becomes a stable placeholder ``[REDACTED:<kind>#<n>]``: ``n`` counts distinct
values of that kind in order of first appearance, the same value always gets the same
placeholder, and the same text and configuration always give the same output.  ``counts`` are
the occurrences redacted per kind.  The originals are kept only in memory (``Sanitized.mapping``,
never logged or written).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from services.bridge import detectors as d

if TYPE_CHECKING:  # pydantic: not imported for a redaction without a config
    from services.workspace.bridge_config import BridgeConfig

KINDS: tuple[str, ...] = (
    "private_key",
    "jwt",
    "api_key",
    "credentials",
    "password",
    "token",
    "email",
    "user",
    "host",
    "ip",
    "path",
    "project",
    "high_entropy",
)
PLACEHOLDER = "[REDACTED:{kind}#{n}]"


@dataclass(frozen=True)
class Sanitized:
    """The redacted text, the occurrences redacted per kind and the placeholder of each value."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)
    mapping: dict[str, str] = field(default_factory=dict, repr=False)  # placeholder -> original

    @property
    def redacted(self) -> int:
        return sum(self.counts.values())


def _pipeline(config: BridgeConfig | None) -> list[tuple[str, Callable[[str], object]]]:
    hosts, projects = d.config_names(config)
    steps: list[tuple[str, Callable[[str], object]]] = [
        ("private_key", d.private_key_blocks),
        ("jwt", d.jwts),
        ("api_key", d.provider_keys),
        ("credentials", d.url_credentials),
        ("password", d.assignments),
        ("token", d.bearer_tokens),
        ("email", d.emails),
        ("user", d.user_at_host),
        ("host", hosts),
        ("ip", d.ip_addresses),
    ]
    steps += [("path", detector) for detector in d.paths_detectors]
    steps += [("project", projects), ("high_entropy", d.high_entropy)]
    return steps


def find_spans(text: str, config: BridgeConfig | None = None) -> list[tuple[int, int, str]]:
    """``(start, end, kind)`` of everything to redact in ``text``, in order, never overlapping."""
    masked = text
    found: list[tuple[int, int, str]] = []
    for kind, detect in _pipeline(config):
        spans = sorted(set(detect(masked)))  # type: ignore[call-overload]
        for start, end in spans:
            if end <= start or d.MASK in masked[start:end]:
                continue  # overlaps something already found (or an earlier span of this pass)
            found.append((start, end, kind))
            masked = masked[:start] + d.MASK * (end - start) + masked[end:]
    return sorted(found)


def sanitize(text: str, config: BridgeConfig | None = None) -> Sanitized:
    """``text`` with every secret, identifier, address, path and listed name replaced."""
    text = text.replace(d.MASK, "\ufffd")
    spans = find_spans(text, config)
    numbers: dict[tuple[str, str], str] = {}
    per_kind: dict[str, int] = {}
    counts: dict[str, int] = {}
    pieces: list[str] = []
    cursor = 0
    for start, end, kind in spans:
        value = text[start:end]
        placeholder = numbers.get((kind, value))
        if placeholder is None:
            per_kind[kind] = per_kind.get(kind, 0) + 1
            placeholder = PLACEHOLDER.format(kind=kind, n=per_kind[kind])
            numbers[(kind, value)] = placeholder
        counts[kind] = counts.get(kind, 0) + 1
        pieces += [text[cursor:start], placeholder]
        cursor = end
    pieces.append(text[cursor:])
    mapping = {placeholder: value for (_, value), placeholder in numbers.items()}
    ordered = {kind: counts[kind] for kind in KINDS if kind in counts}
    return Sanitized(text="".join(pieces), counts=ordered, mapping=mapping)


__all__ = ["KINDS", "PLACEHOLDER", "Sanitized", "find_spans", "sanitize"]
