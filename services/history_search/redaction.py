"""The secrets redactor of what Aries keeps to search or recall: ``redact_secrets``.

Every text indexed for the conversation search (:mod:`services.history_search.documents`), stored in
the prompt history (:mod:`services.history_search.prompt_history`) or exported goes through it first.
A module apart from the prompt history so that a search does not import pydantic and the history's
file model for it (the detectors themselves, detect-secrets, load on first use).
"""

from __future__ import annotations

SECRET_KINDS = frozenset({"private_key", "jwt", "api_key", "credentials", "password", "token"})
"""What the bridge's detectors find that is redacted (paths, names and addresses are kept)."""


def redact_secrets(text: str) -> str:
    """``text`` with every secret the bridge's detectors find replaced by ``[REDACTED:<kind>]``."""
    from services.bridge.sanitizer import find_spans  # detect-secrets: on first use

    pieces: list[str] = []
    cursor = 0
    for start, end, kind in find_spans(text):
        if kind in SECRET_KINDS:
            pieces += [text[cursor:start], f"[REDACTED:{kind}]"]
            cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


__all__ = ["SECRET_KINDS", "redact_secrets"]
